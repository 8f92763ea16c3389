"""Wheels the package tests build themselves (no index is reachable from the test machines): a
wheel is a zip of the package's files and a NAME-VERSION.dist-info with METADATA, WHEEL and
RECORD (PEP 427), which is all pip needs to install it; the same files make the same bytes (every
member dated 1980-01-01), so the same wheel made again is the same request to the store.
``simple_index`` lays a wheelhouse out as a PEP 503 index that ``python3 -m http.server`` can
serve."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _digest(data: bytes) -> str:
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str | bytes],
               requires: tuple[str, ...] = ()) -> Path:
    """Writes DIRECTORY/NAME-VERSION-py3-none-any.whl holding ``files`` (path -> content) and
    returns its path; ``requires`` become its Requires-Dist."""
    dist_info = f"{name}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    entries = {path: content.encode() if isinstance(content, str) else content
               for path, content in files.items()}
    entries[f"{dist_info}/METADATA"] = metadata.encode()
    entries[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: pysandbox-tests\n"
                                     b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in entries.items())
    record += f"{dist_info}/RECORD,,\n"
    path = Path(directory) / f"{name}-{version}-py3-none-any.whl"
    entries[f"{dist_info}/RECORD"] = record.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in entries.items():
            info = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            wheel.writestr(info, data, zipfile.ZIP_DEFLATED)
    path.chmod(0o644)
    return path


def simple_index(wheelhouse: Path, root: Path) -> None:
    """ROOT/simple/NAME/index.html for each wheel in WHEELHOUSE (PEP 503), the wheel beside it."""
    (root / "simple").mkdir(parents=True, exist_ok=True)
    for wheel in sorted(Path(wheelhouse).glob("*.whl")):
        project = wheel.name.split("-")[0].lower().replace("_", "-")
        page = root / "simple" / project
        page.mkdir(exist_ok=True)
        (page / wheel.name).write_bytes(wheel.read_bytes())
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        (page / "index.html").write_text(
            f'<!DOCTYPE html><html><body><a href="{wheel.name}#sha256={digest}">'
            f"{wheel.name}</a></body></html>\n")


def make_extension_wheel(directory: Path, name: str, version: str, c_source: str) -> Path:
    """Builds, on the host and offline (Debian's setuptools, wheel and pip; the C compiler), a
    wheel of one compiled extension module NAME from ``c_source`` into DIRECTORY; returns its
    path. Only the tests' own C is compiled here: no package code from elsewhere runs."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "src"
        source.mkdir()
        (source / f"{name}.c").write_text(c_source)
        (source / "setup.py").write_text(
            "from setuptools import Extension, setup\n"
            f"setup(name={name!r}, version={version!r}, "
            f"ext_modules=[Extension({name!r}, [{name + '.c'!r}])])\n")
        subprocess.run(["/usr/bin/python3", "-m", "pip", "wheel", "--no-deps", "--no-index",
                        "--no-build-isolation", "--disable-pip-version-check", "-q", "-w",
                        str(directory), str(source)],
                       check=True, capture_output=True, timeout=120)
    built = sorted(Path(directory).glob(f"{name}-{version}-*.whl"))
    assert len(built) == 1, built
    built[0].chmod(0o644)
    return built[0]
