"""Real bash, zsh and fish complete pysandbox command lines with the committed completions.

bash: the completion function is called with COMP_WORDS set, as bash-completion would.
zsh: an interactive zsh in a pseudo-terminal is sent the line and a TAB (zsh_complete.zsh).
fish: `complete -C LINE` asks fish what it would offer.
Profile names come from the built binary (first on PATH), which finds the shipped profiles and
the user's (a temporary XDG_CONFIG_HOME here).
"""

import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from docs_support import REPO, env_with_binary_first

COMPLETIONS = REPO / "completions"
HERE = REPO / "tests" / "docs"

# line -> what must be among the offers (and, for a prefix that fits one word, all of them).
CASES = {
    "pysandbox ru": {"run"},
    "pysandbox run --pro": {"--profile"},
    "pysandbox run -p ": {"default", "strict", "datascience", "mine"},  # mine: the user's
    "pysandbox run --net ": {"none", "loopback", "proxy"},
    "pysandbox profile show st": {"strict"},
}
# lines whose offers must be exactly the expected ones
EXACT = ["pysandbox ru", "pysandbox run --pro", "pysandbox run --net ", "pysandbox profile show st"]


# The user's own profiles, found through XDG_CONFIG_HOME like pysandbox finds them.
USER_CONFIG = Path(tempfile.mkdtemp(prefix="pysandbox-completion-"))


def setUpModule():
    profiles = USER_CONFIG / "pysandbox" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "mine.toml").write_text('extends = "default"\ndescription = "the user\'s own"\n')


def tearDownModule():
    shutil.rmtree(USER_CONFIG, ignore_errors=True)


def run_shell(args: list[str], script: str | None = None) -> str:
    env = {**env_with_binary_first(), "XDG_CONFIG_HOME": str(USER_CONFIG)}
    proc = subprocess.run(args, input=script, capture_output=True, text=True, timeout=60,
                          env=env, cwd=REPO)
    if proc.returncode != 0:
        raise AssertionError(f"{args[0]} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def bash_offers(line: str) -> set[str]:
    script = f"""
source /usr/share/bash-completion/bash_completion
source {COMPLETIONS / 'pysandbox.bash'}
COMP_LINE={line!r}
COMP_POINT=${{#COMP_LINE}}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=('')
COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
$(complete -p pysandbox | sed -E 's/.*-F ([^ ]+).*/\\1/')
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    return {w for w in run_shell(["bash", "--norc", "--noprofile"], script).split("\n") if w}


def zsh_offers(lines: list[str]) -> dict[str, set[str]]:
    out = run_shell(["zsh", "-f", str(HERE / "zsh_complete.zsh"), str(COMPLETIONS), *lines])
    offers: dict[str, set[str]] = {}
    current = None
    for row in out.split("\n"):
        if row.startswith("### "):
            current = row[4:]
            offers[current] = set()
        elif row and current is not None:
            offers[current].add(row)
    return offers


def fish_offers(line: str) -> set[str]:
    out = run_shell(["fish", "--no-config", "-c",
                     f"source {COMPLETIONS / 'pysandbox.fish'}; complete -C {line!r}"])
    return {row.split("\t")[0] for row in out.split("\n") if row}


class CompletionTest(unittest.TestCase):
    def check(self, shell: str, offers_of) -> None:
        for line, expected in CASES.items():
            with self.subTest(shell=shell, line=line):
                offers = offers_of(line)
                if line in EXACT:
                    self.assertEqual(offers, expected)
                else:
                    self.assertLessEqual(expected, offers)

    def test_bash(self):
        self.check("bash", bash_offers)

    def test_zsh(self):
        offers = zsh_offers(list(CASES))
        self.check("zsh", lambda line: offers.get(line, set()))

    def test_fish(self):
        self.check("fish", fish_offers)

    def test_script_argument_completes_files(self):
        line = "pysandbox run examples/he"
        self.assertIn("examples/hello.py", bash_offers(line))
        self.assertIn("examples/hello.py", fish_offers(line))
        # zsh's _files adds the directory as a prefix and the file names as matches
        self.assertIn("hello.py", zsh_offers([line])[line])


if __name__ == "__main__":
    unittest.main()
