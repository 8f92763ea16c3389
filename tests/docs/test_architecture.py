"""ARCHITECTURE.md's diagram is the tree: every source file of src/ is placed in the block of its
own layer, and the layers link only downward as the diagram says (src/*/CMakeLists.txt)."""

import re
import subprocess
import unittest

from docs_support import REPO

LAYERS = ["fronts", "engine", "inside", "report", "plan", "proxy", "wire", "embed", "sys", "python"]
# What each layer's library may link of pysandbox's own (src/CMakeLists.txt's order).
MAY_LINK = {
    "fronts": {"engine", "report", "plan", "proxy", "wire", "embed", "sys"},
    "engine": {"inside", "report", "plan", "proxy", "wire", "embed", "sys"},
    "inside": {"plan", "proxy", "wire", "embed", "sys"},
    "report": {"plan", "proxy", "wire", "embed", "sys"},
    "plan": {"proxy", "wire", "embed", "sys"},
    "proxy": {"wire", "sys"},
    "wire": {"sys"},
    "embed": set(),
    "sys": set(),
}


def diagram() -> dict[str, str]:
    """The diagram's text for each layer: the lines from its name to the next layer's."""
    text = (REPO / "ARCHITECTURE.md").read_text()
    block = re.search(r"## The layers.*?```\n(.*?)```", text, re.S)
    assert block, "ARCHITECTURE.md has no diagram under '## The layers'"
    blocks: dict[str, str] = {}
    current = None
    for line in block.group(1).splitlines():
        head = re.match(r"(\w+)/\s", line)
        if head and head.group(1) in LAYERS:
            current = head.group(1)
        if current:
            blocks[current] = blocks.get(current, "") + line + "\n"
    return blocks


def sources() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "src"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.split()
    return [path for path in listed if re.search(r"\.(cpp|hpp|in|py)$", path)]


class ArchitectureTest(unittest.TestCase):
    def test_every_source_file_is_placed_in_its_layer(self):
        blocks = diagram()
        for path in sources():
            parts = path.split("/")
            if len(parts) == 2:
                # The two programs: pysandbox, and the kernel program it execs.
                self.assertIn(parts[1], ("main.cpp", "kernel_main.cpp"),
                              f"{path}: a source outside any layer")
                continue
            layer, name = parts[1], parts[-1]
            stem = name.split(".")[0]
            with self.subTest(path=path):
                self.assertIn(layer, blocks, f"layer {layer}/ is not in the diagram")
                self.assertRegex(blocks[layer], rf"\b{re.escape(stem)}\b",
                                 f"{path} is not placed in the diagram's {layer}/ block")

    def test_every_layer_is_a_library_that_links_only_downward(self):
        for layer, allowed in MAY_LINK.items():
            cmake = (REPO / "src" / layer / "CMakeLists.txt").read_text()
            linked = set(re.findall(r"\bpysandbox_(\w+)", cmake)) & set(MAY_LINK)
            linked.discard(layer)
            with self.subTest(layer=layer):
                self.assertIn(f"pysandbox_layer({layer}", cmake)
                self.assertLessEqual(linked, allowed, f"{layer} links upward")


if __name__ == "__main__":
    unittest.main()
