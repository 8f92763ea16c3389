"""The man page and the bash completion stay true to the binary's own CLI definition."""

import re
import subprocess
import unittest
from pathlib import Path

from harness import PYSANDBOX, SandboxTestCase

ROOT = Path(__file__).resolve().parents[2]


def run_options() -> set[str]:
    help_text = subprocess.run([PYSANDBOX, "run", "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"(?:^|[ ,])(--[a-z][-a-z]*)", help_text)) - {"--help"}


class DocsTest(SandboxTestCase):
    def test_man_page_renders_without_warnings(self):
        proc = subprocess.run(["groff", "-man", "-ww", "-z", str(ROOT / "man/pysandbox.1")],
                              capture_output=True, text=True)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))

    def test_man_page_documents_every_run_option(self):
        man = (ROOT / "man/pysandbox.1").read_text().replace("\\-", "-")
        options = run_options()
        self.assertIn("--timeout", options)
        missing = sorted(o for o in options if o not in man)
        self.assertEqual(missing, [], "add these to man/pysandbox.1")

    def complete(self, line: str) -> list[str]:
        script = (f"source /usr/share/bash-completion/bash_completion; "
                  f"source {ROOT / 'completions/pysandbox.bash'}; "
                  f"PATH={Path(PYSANDBOX).parent}:$PATH; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; "
                  f"read -ra COMP_WORDS <<< \"$COMP_LINE\"; COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); "
                  f"_pysandbox 2>/dev/null; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        out = subprocess.run(["bash", "-c", script], capture_output=True, text=True).stdout
        return [w for w in out.split("\n") if w]

    def test_bash_completes_options_from_the_binary(self):
        self.assertEqual(self.complete("pysandbox run --pro"), ["--profile"])
        self.assertEqual(self.complete("pysandbox run --tim"), ["--timeout"])

    def test_bash_completes_profile_names(self):
        self.assertIn("default", self.complete("pysandbox run -p def"))
        self.assertIn("strict", self.complete("pysandbox profile show st"))


if __name__ == "__main__":
    unittest.main()
