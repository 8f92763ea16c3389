"""Files in (--input) and artifacts out (the result's files, --output-dir).

Every attack is judged on the host side: what exists in the output directory afterwards, and
whether the host file a link pointed at was read or changed.
"""

import hashlib
import os
import unittest

from harness import SandboxTestCase, profile, temp_dir, write_file


class FilesTestCase(SandboxTestCase):
    def run_json(self, body, options=(), **kwargs):
        r = self.run_script(body, options=["--json", *options], **kwargs)
        return r, r.json()

    def output_dir(self):
        return temp_dir(0o777)  # written by the caller, nobody included

    def files_by_path(self, obj):
        return {entry["path"]: entry for entry in obj["files"]}


class InputTest(FilesTestCase):
    def test_input_is_readable_under_its_name_and_read_only(self):
        data = write_file(temp_dir() / "data.csv", "a,b\n1,2\n")
        r, obj = self.run_json(
            """
            import os
            print(open('data.csv').read(), end='')
            try:
                open('data.csv', 'a').write('x')
            except OSError as e:
                print('write refused')
            """, options=["--input", str(data)])
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertEqual(obj["stdout"], "a,b\n1,2\nwrite refused\n")
        self.assertEqual(data.read_text(), "a,b\n1,2\n")
        self.assertEqual(obj["files"], [], "an unmodified input is not an artifact")

    def test_input_can_be_renamed(self):
        data = write_file(temp_dir() / "upload-123.bin", "hello")
        r, obj = self.run_json("print(open('in.txt').read())",
                               options=["--input", f"{data}=in.txt"])
        self.assertEqual(obj["stdout"], "hello\n", r.describe())

    def test_bad_names_are_refused_naming_the_flag(self):
        data = write_file(temp_dir() / "d.txt", "x")
        for spec in [f"{data}=../x", f"{data}=a/b", f"{data}=", f"{data}=.."]:
            with self.subTest(spec=spec):
                r = self.run_script("pass", options=["--input", spec])
                self.assertEqual(r.returncode, 125, r.describe())
                self.assertIn(b"--input", r.stderr)
        r = self.run_script("pass", options=["--input", str(data), "--input", f"{data}=d.txt"])
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"two files named", r.stderr)
        r = self.run_script("pass", options=["--input", str(data.parent)])
        self.assertEqual(r.returncode, 125, r.describe())


class ArtifactsTest(FilesTestCase):
    def test_new_files_are_listed_with_size_sha256_and_type(self):
        r, obj = self.run_json(
            """
            import os
            os.makedirs('sub')
            open('out.txt', 'w').write('hello\\n')
            open('sub/table.csv', 'w').write('a,b\\n')
            open('/tmp/elsewhere.txt', 'w').write('not in /tmp/work')
            """)
        self.assertEqual(obj["status"], "ok", r.describe())
        files = self.files_by_path(obj)
        self.assertEqual(sorted(files), ["out.txt", "sub/table.csv"])
        self.assertEqual(files["out.txt"], {
            "path": "out.txt", "size": 6, "sha256": hashlib.sha256(b"hello\n").hexdigest(),
            "media_type": "text/plain", "host_path": None})
        self.assertEqual(files["sub/table.csv"]["media_type"], "text/csv")

    def test_output_dir_receives_copies(self):
        out = self.output_dir()
        r, obj = self.run_json(
            """
            import os
            os.makedirs('a/b')
            open('a/b/deep.json', 'w').write('{}')
            open('top.bin', 'wb').write(bytes(range(256)))
            """, options=["--output-dir", str(out)])
        files = self.files_by_path(obj)
        self.assertEqual((out / "a/b/deep.json").read_text(), "{}", r.describe())
        self.assertEqual((out / "top.bin").read_bytes(), bytes(range(256)))
        self.assertEqual(files["top.bin"]["host_path"], str(out / "top.bin"))
        self.assertEqual(files["top.bin"]["sha256"],
                         hashlib.sha256(bytes(range(256))).hexdigest())

    def test_a_directory_with_content_is_refused_and_left_as_it_was(self):
        # Artifacts go only where the run made room: an output directory with files in it could
        # have a copy land where a later program picks it up. (It used to be accepted, with
        # existing files skipped as "exists"; the contract is now stricter, issue 13.)
        out = self.output_dir()
        write_file(out / "result.txt", "the caller's")
        r = self.run_script("open('result.txt', 'w').write('the script\\'s')",
                            options=["--json", "--output-dir", str(out)])
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"--output-dir", r.stderr)
        self.assertIn(b"is not empty", r.stderr)
        self.assertEqual(r.json()["status"], "sandbox_error")
        self.assertEqual(os.listdir(out), ["result.txt"])
        self.assertEqual((out / "result.txt").read_text(), "the caller's")

    def test_a_missing_directory_is_made_after_the_run(self):
        out = self.output_dir() / "new"
        r, obj = self.run_json("open('result.txt', 'w').write('made')",
                               options=["--output-dir", str(out)])
        self.assertEqual(self.files_by_path(obj)["result.txt"]["host_path"],
                         str(out / "result.txt"), r.describe())
        self.assertEqual((out / "result.txt").read_text(), "made")


class ArtifactAttackTest(FilesTestCase):
    def test_symlink_to_a_host_file_is_not_copied(self):
        secret_dir = temp_dir()
        secret = write_file(secret_dir / "secret.txt", "host secret", mode=0o644)
        out = self.output_dir()
        r, obj = self.run_json(
            f"""
            import os
            os.symlink({str(secret)!r}, 'leak.txt')
            os.symlink('/etc/passwd', 'passwd')
            """, options=["--output-dir", str(out)])
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertEqual(obj["files"], [])
        self.assertEqual(os.listdir(out), [])
        self.assertEqual(secret.read_text(), "host secret")

    def test_symlinked_directory_is_not_walked(self):
        out = self.output_dir()
        r, obj = self.run_json("import os\nos.symlink('/etc', 'd')\n",
                               options=["--output-dir", str(out)])
        self.assertEqual(obj["files"], [], r.describe())
        self.assertEqual(os.listdir(out), [])

    def test_fifo_neither_hangs_nor_is_copied(self):
        out = self.output_dir()
        r, obj = self.run_json("import os\nos.mkfifo('pipe')\nopen('ok.txt', 'w').write('ok')\n",
                               options=["--output-dir", str(out)], timeout=20)
        self.assertEqual(sorted(self.files_by_path(obj)), ["ok.txt"], r.describe())
        self.assertEqual(os.listdir(out), ["ok.txt"])

    def test_hardlink_copies_the_sandbox_file_twice(self):
        # On the sandbox's tmpfs a hard link can only alias another sandbox file: both names
        # come out as independent copies of that file's bytes, nothing else.
        out = self.output_dir()
        r, obj = self.run_json("import os\nopen('a.txt', 'w').write('A')\nos.link('a.txt', 'b.txt')\n",
                               options=["--output-dir", str(out)])
        self.assertEqual(sorted(self.files_by_path(obj)), ["a.txt", "b.txt"], r.describe())
        self.assertEqual((out / "b.txt").read_text(), "A")
        self.assertEqual((out / "a.txt").stat().st_nlink, 1)

    def test_link_to_a_host_file_cannot_even_be_made(self):
        secret = write_file(temp_dir() / "secret.txt", "host secret")
        r, obj = self.run_json(
            f"""
            import os
            try:
                os.link({str(secret)!r}, 'copy.txt')
            except OSError as e:
                print(type(e).__name__)
            """)
        self.assertEqual(obj["files"], [], r.describe())
        self.assertEqual(os.stat(secret).st_nlink, 1, "the host file got a second name")
        self.assertEqual(secret.read_text(), "host secret")

    def test_files_over_the_caps_are_listed_not_copied(self):
        small = profile('extends = "default"\n[limits]\nartifact_size = "1KiB"\n'
                        'artifacts_total = "3KiB"\n')
        out = self.output_dir()
        r, obj = self.run_json(
            """
            open('big.bin', 'wb').write(b'x' * 2048)
            for name in 'abcd':
                open(name + '.bin', 'wb').write(b'y' * 1000)
            """, options=["-p", str(small), "--output-dir", str(out)])
        files = self.files_by_path(obj)
        self.assertEqual(files["big.bin"]["skipped"], "too_large", r.describe())
        self.assertEqual(files["big.bin"]["size"], 2048)
        # Hashing is bounded like copying: a file over artifact_size is listed without a hash.
        self.assertIsNone(files["big.bin"]["sha256"])
        self.assertEqual(files["d.bin"]["skipped"], "total_limit")
        self.assertEqual(sorted(os.listdir(out)), ["a.bin", "b.bin", "c.bin"])

    def test_dot_dot_names_stay_inside(self):
        out = self.output_dir()
        r, obj = self.run_json(
            """
            import os
            os.makedirs('...')
            open('.../x', 'w').write('x')
            open('..a', 'w').write('y')
            """, options=["--output-dir", str(out)])
        self.assertEqual(sorted(self.files_by_path(obj)), [".../x", "..a"], r.describe())
        self.assertEqual(sorted(os.listdir(out)), ["...", "..a"])
        self.assertEqual(os.listdir(out.parent / out.name / "..."), ["x"])


class WorkdirTest(FilesTestCase):
    def workdir(self):
        return temp_dir(0o777)  # writable by the uid the script runs as, 65534 included

    def test_run_two_reads_what_run_one_wrote(self):
        work = self.workdir()
        write_file(work / "old.txt", "from before")
        r, obj = self.run_json("open('clean.csv', 'w').write('a\\n1\\n')",
                               options=["--workdir", str(work)])
        self.assertEqual(obj["status"], "ok", r.describe())
        self.assertEqual((work / "clean.csv").read_text(), "a\n1\n")
        self.assertEqual([f["path"] for f in obj["files"]], ["clean.csv"],
                         "files from before the run are not artifacts")
        r, obj = self.run_json("print(open('clean.csv').read().split())\n"
                               "open('plot.txt', 'w').write('plotted')",
                               options=["--workdir", str(work)])
        self.assertEqual(obj["stdout"], "['a', '1']\n", r.describe())
        self.assertEqual([f["path"] for f in obj["files"]], ["plot.txt"])

    def test_unwritable_workdir_is_refused_before_the_run(self):
        work = temp_dir(0o755)
        # Owned by root, mode 0755: neither nobody nor root's sandbox uid 65534 can write it.
        r = self.run_script("pass", options=["--workdir", str(work)])
        self.assertEqual(r.returncode, 125, r.describe())
        self.assertIn(b"--workdir", r.stderr)
        self.assertIn(b"not writable", r.stderr)


if __name__ == "__main__":
    unittest.main()
