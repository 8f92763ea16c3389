"""The --json result as every test reads it: checked against schema/pysandbox.result.v1.json.

``parse_result(stdout)`` is the one way a test turns what ``pysandbox run --json`` printed into
a result: exactly one line, one JSON object, valid under the schema (JSON Schema draft 2020-12,
validated with Debian's python3-jsonschema). ``parse_lines(stdout)`` does the same for what
``pysandbox session`` printed: one valid object a line, a cell's result or a bad_request.
Anything else raises ``SchemaError``, an AssertionError, so the test that asked fails and says
which field broke the contract.

Without python3-jsonschema every caller fails, naming the package; nothing is skipped.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SCHEMA_FILE = REPO / "schema" / "pysandbox.result.v1.json"
SCHEMA_ID = "pysandbox.result/v1"

# A message quotes the offending value; a result holds up to the output limit (16 MiB) of text.
_MAX_QUOTE = 300


class SchemaError(AssertionError):
    """A --json result that is not one object valid under the result schema."""


def load_schema() -> dict[str, Any]:
    """The schema file, parsed."""
    return json.loads(SCHEMA_FILE.read_text())


# The schema's pattern for base64 text. jsonschema applies a pattern with re.search, which takes
# about 3 s for this one on the 22 MB of a 16 MiB stdout (a group repeated every 4 characters),
# twice a result (stdout and output): most of the time of a test that prints that much. The
# same test written as a length and one character class takes milliseconds.
BASE64_PATTERN = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _matches_base64_pattern(text: str) -> bool:
    """re.search(BASE64_PATTERN, text), quickly: groups of 4 from the alphabet, the last padded
    with at most two "="; its "$" also matches before one final newline."""
    body = text[:-1] if text.endswith("\n") else text
    return len(body) % 4 == 0 and _BASE64_TEXT.fullmatch(body) is not None


@functools.cache
def validator():
    """A draft 2020-12 validator for the schema, which must itself be a valid 2020-12 schema."""
    try:
        import jsonschema
        from jsonschema import _validators
    except ImportError as e:
        raise AssertionError("validating --json results needs Debian's python3-jsonschema "
                             f"(apt-get install python3-jsonschema): {e}") from None
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    # The quick form must answer as the pattern does, on the cases where they could differ.
    for case in ("", "AAAA", "AA==", "AAA=", "+/9z", "AAAA\n", "AA==\n", "AAAA\n\n", "\nAAAA",
                 "A", "AA", "AAA", "AAAAA", "A===", "====", "AA=A", "A=AA", "AAA-", "AA==AAAA"):
        assert _matches_base64_pattern(case) == bool(re.search(BASE64_PATTERN, case)), case

    def quick_pattern(checker, regex, instance, subschema):
        if regex == BASE64_PATTERN and checker.is_type(instance, "string"):
            if not _matches_base64_pattern(instance):  # jsonschema's own words
                yield jsonschema.ValidationError(f"{instance!r} does not match {regex!r}")
            return
        yield from _validators.pattern(checker, regex, instance, subschema)

    return jsonschema.validators.extend(jsonschema.Draft202012Validator,
                                        {"pattern": quick_pattern})(schema)


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_QUOTE else text[:_MAX_QUOTE] + " [...]"


def problems(obj: Any) -> list[str]:
    """Every way ``obj`` breaks the schema, one line each: the JSON path, then what is wrong.
    Where only one of several shapes could fit (a field that is null or an object), the
    reasons each shape refused are listed beneath."""
    found = []
    for error in sorted(validator().iter_errors(obj), key=lambda e: e.json_path):
        found.append(f"{error.json_path}: {_clip(error.message)}")
        for sub in sorted(error.context or (), key=lambda e: e.json_path):
            if sub.validator == "type" and sub.validator_value == "null":
                continue  # "is not null": true of every value the other shape refused
            found.append(f"    {sub.json_path}: {_clip(sub.message)}")
    return found


def validate(obj: Any) -> dict[str, Any]:
    """``obj`` itself when it is a valid result; SchemaError listing the problems otherwise."""
    found = problems(obj)
    if found:
        raise SchemaError(f"not a valid {SCHEMA_ID} result ({SCHEMA_FILE.relative_to(REPO)}):\n  "
                          + "\n  ".join(found))
    return obj


def _text(stdout: bytes | str) -> str:
    try:
        return stdout.decode("utf-8") if isinstance(stdout, bytes) else stdout
    except UnicodeDecodeError as e:
        raise SchemaError(f"the result is not UTF-8 ({e}): {stdout[:_MAX_QUOTE]!r}") from None


def _parse_line(line: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise SchemaError(f"the result is not JSON ({e}): {_clip(line)!r}") from None
    return validate(obj)


def parse_result(stdout: bytes | str) -> dict[str, Any]:
    """What ``pysandbox run --json`` printed on stdout: one line holding one valid result."""
    text = _text(stdout)
    if not text.endswith("\n") or "\n" in text[:-1]:
        raise SchemaError(f"--json must print exactly one line, the result; stdout has "
                          f"{text.count(chr(10))} newline(s): {_clip(text)!r}")
    return _parse_line(text)


def parse_lines(stdout: bytes | str) -> list[dict[str, Any]]:
    """What ``pysandbox session`` printed on stdout: NDJSON, every line (each ended by a
    newline) one valid result; the first line that is not says where it is."""
    text = _text(stdout)
    if text and not text.endswith("\n"):
        raise SchemaError(f"the last line is not ended by a newline: {_clip(text[-200:])!r}")
    results = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            results.append(_parse_line(line))
        except SchemaError as e:
            raise SchemaError(f"line {number}: {e}") from None
    return results


EVENT_SCHEMA_FILE = REPO / "schema" / "pysandbox.session-event.v1.json"


@functools.cache
def event_validator():
    """A draft 2020-12 validator for a session's event lines ("stream": true)."""
    import jsonschema
    schema = json.loads(EVENT_SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate_event(obj: Any) -> dict[str, Any]:
    """``obj`` itself when it is a valid session event line; SchemaError otherwise."""
    found = [f"{e.json_path}: {_clip(e.message)}" for e in event_validator().iter_errors(obj)]
    if found:
        raise SchemaError(f"not a valid event ({EVENT_SCHEMA_FILE.relative_to(REPO)}):\n  "
                          + "\n  ".join(found))
    return obj


def stream(result: dict[str, Any], name: str) -> bytes:
    """A result's ``stdout`` or ``stderr`` as bytes, decoded as its ``encoding`` says (base64,
    or text that may carry surrogate escapes); empty when it holds none."""
    text = result.get(name)
    if not isinstance(text, str):
        return b""
    encoding = result.get("encoding")
    if isinstance(encoding, dict) and encoding.get(name) == "base64":
        try:
            return base64.b64decode(text)
        except ValueError:
            return b""
    return text.encode("utf-8", "surrogateescape")
