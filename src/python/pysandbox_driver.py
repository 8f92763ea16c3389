"""pysandbox's cell driver: the interpreter of a session (and of the server's and batch's runs),
started as `python3 -c "...; import pysandbox_driver; pysandbox_driver.main()" CONTROL_FD MODULE...`
inside the sandbox (imported, so that the bytecode prepared at build time is used).

It imports the profile's [python] preload modules, says "ready" on the control channel, and then
runs one cell per request, in one persistent __main__ namespace, as a REPL would: the value of a
final expression statement is reported (its repr), an uncaught exception is printed to stderr as
Python prints it (without this file's frames), matplotlib figures left open are returned as PNG.

The channel (control_channel.hpp) is a SOCK_SEQPACKET socket: a message is one JSON object,
split into records of at most CONTROL_RECORD bytes (64 KiB); each record is a flag byte
(CONTROL_MORE "+" more follows, CONTROL_LAST "." the last), CONTROL_INDEX_DIGITS hex digits
numbering it within its message, and the text. The numbers let a record be sent again after a
KeyboardInterrupt without being taken twice. These constants, and the limits below, come from
pysandbox_wire, which the build writes from the ones pysandbox is compiled with (wire/fds.hpp).

This file shares its process with the script, so everything it says is the script's word; the
supervisor keeps time, limits and the session's framing itself, and checks each cell's token.
pysandbox embeds this file and writes it into the sandbox's module directory for each run.
"""

# What a sandbox's start costs is paid by every batch job and every MCP call, and on this file's
# imports alone it once spent more than Python's own start (7 ms of 14): json and linecache
# bring in re, tokenize and enum, signal brings in enum. So the channel speaks JSON through the
# C accelerator json is built on (_json), signals go through _signal (signal's own core), `_ast`
# stands in for `ast` (no enum, no contextlib), and linecache gets the cells' source once
# something imports it (_LinecacheSources). base64, traceback and __future__ are imported where
# they are needed, which most cells are not. io, os and sys are loaded before site runs. The
# types are for mypy alone: typing is imported only when it checks (TYPE_CHECKING), and the
# annotations that name typing's types are strings.
import _ast as ast
import _signal as signal
import io
import os
import sys

from pysandbox_wire import (CONTROL_HEADER, CONTROL_INDEX_DIGITS, CONTROL_LAST, CONTROL_MORE,
                            CONTROL_RECORD, MAX_CELL_FIGURE_BYTES, MAX_CELL_FIGURES,
                            MAX_CELL_MATCHES, MAX_CELL_RICH, MAX_CELL_VALUE,
                            MAX_INPUT_PROMPT)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, FrameType, ModuleType, TracebackType
    from typing import Any, Callable, Iterator

    from matplotlib.figure import Figure

try:
    import _json
except ImportError:  # an interpreter without the accelerator: json itself, at its full price
    _json = None  # type: ignore[assignment]

RECORD = CONTROL_RECORD
HEADER = CONTROL_HEADER  # flag byte and the hex digits numbering the record
MAX_VALUE = MAX_CELL_VALUE  # characters of a repr
MAX_FIGURES = MAX_CELL_FIGURES
MAX_FIGURE_BYTES = MAX_CELL_FIGURE_BYTES  # all of a cell's PNGs together
DRIVER_FILE = __file__


class _JsonContext:
    """What _json's scanner reads from json.JSONDecoder: plain JSON, no hooks."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> "Any":
        raise ValueError("not JSON: " + name)


_scan: "Callable[[str, int], tuple[Any, int]]"
_quote: "Callable[[str], str]"
if _json is not None:
    _scan = _json.make_scanner(_JsonContext())  # type: ignore[arg-type]
    _quote = _json.encode_basestring_ascii
else:
    import json

    _scan = json.JSONDecoder().scan_once
    _quote = json.encoder.encode_basestring_ascii


def _loads(text: str) -> "Any":
    """One JSON value, the whole of `text` (the supervisor writes it compactly)."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        raise ValueError("the supervisor's message is not one JSON value")
    return value


def _utf8(text: str) -> str:
    """`text` with each lone surrogate (which has no UTF-8, and whose JSON escape the supervisor's
    parser refuses, dropping the whole message) as its backslash escape, as tracebacks show it."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("ascii")


def _dumps(value: object) -> str:
    """Compact JSON in ASCII, for what this file sends: dicts, lists, strings, integers, None and
    booleans."""
    if isinstance(value, str):
        return _quote(_utf8(value))
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, dict):
        return "{" + ",".join(_quote(_utf8(key)) + ":" + _dumps(item)
                              for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dumps(item) for item in value) + "]"
    raise TypeError("cannot send %s as JSON" % type(value).__name__)


class _LinecacheSources:
    """The cells' source for linecache, which warnings and traceback.print_exc() read lines from.
    A cell's filename ("<cell-3>") names no file, so its lines live only in linecache's cache.
    linecache itself costs a cell nothing until something imports it; this finder, first on
    sys.meta_path until then, sees that import and fills the cache right after the module ran.
    A cell that goes around it (its own finder, a new sys.meta_path) gets its linecache filled
    when the next cell starts (adopt)."""

    def __init__(self) -> None:
        # filename: the cell's code, kept for the session, as linecache keeps it
        self.sources: dict[str, str] = {}
        self.linecache: "ModuleType | None" = None

    def add(self, filename: str, code: str) -> None:
        self.sources[filename] = code
        if self.linecache is not None:
            self._fill(filename, code)

    def _fill(self, filename: str, code: str) -> None:
        assert self.linecache is not None
        self.linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)

    def adopt(self) -> None:
        """A linecache imported some other way than through find_spec."""
        linecache = sys.modules.get("linecache")
        if linecache is not None and linecache is not self.linecache:
            self.loaded(linecache)

    def find_spec(self, name: str, path: "Any" = None, target: "Any" = None) -> "Any":
        if name != "linecache":
            return None
        return _spec_then(self, name, path, target, self.loaded)

    def loaded(self, module: "ModuleType") -> None:
        """linecache ran (a spec found is not yet an import: importlib.util.find_spec)."""
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        self.linecache = module
        for filename, code in self.sources.items():
            self._fill(filename, code)


def _spec_then(finder: object, name: str, path: "Any", target: "Any",
               then: "Callable[[ModuleType], None]") -> "Any":
    """The spec the import system would find for `name` without `finder`, whose loader calls
    `then` with the module right after it ran."""
    for other in sys.meta_path:
        if other is finder:
            continue
        find = getattr(other, "find_spec", None)
        spec = find(name, path, target) if find is not None else None
        if spec is not None:
            spec.loader = _ThenCall(spec.loader, then)
            return spec
    return None


class _ThenCall:
    """A module's own loader, and then a call with the module (_spec_then)."""

    def __init__(self, loader: "Any", then: "Callable[[ModuleType], None]") -> None:
        self._loader = loader
        self._then = then

    def create_module(self, spec: "Any") -> "Any":
        return self._loader.create_module(spec)

    def exec_module(self, module: "ModuleType") -> None:
        self._loader.exec_module(module)
        self._then(module)

    # get_source and the rest, for whoever asks the module's loader
    def __getattr__(self, name: str) -> "Any":
        return getattr(self._loader, name)


class _Channel:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: "dict[str, Any]") -> None:
        data = _dumps(message).encode("ascii")
        step = RECORD - HEADER
        count = max(1, (len(data) + step - 1) // step)
        index = 0
        while index < count:
            flag = CONTROL_LAST if index == count - 1 else CONTROL_MORE
            record = (flag + b"%0*x" % (CONTROL_INDEX_DIGITS, index) +
                      data[index * step:(index + 1) * step])
            try:
                os.write(self.fd, record)
                index += 1
            except KeyboardInterrupt:
                continue  # a late interrupt: the record goes again; the supervisor drops copies

    def receive(self, interruptible: bool = False) -> "dict[str, Any] | None":
        """The next message, or None when the supervisor is gone. `interruptible`: a
        KeyboardInterrupt ends the wait (a cell's input()); a message it cut short is skipped
        when the next receive() meets the rest of its records."""
        parts: list[bytes] = []
        expected = 0
        while True:
            try:
                record = os.read(self.fd, RECORD + 1)
            except KeyboardInterrupt:
                if interruptible:
                    raise
                continue
            except OSError:
                return None
            if not record:
                return None
            flag, index = record[:1], int(record[1:HEADER], 16)
            if index != expected:
                parts, expected = [], 0
                if index != 0:
                    continue
            parts.append(record[HEADER:])
            expected += 1
            if flag == CONTROL_LAST:
                message: "dict[str, Any]" = _loads(b"".join(parts).decode("utf-8"))
                return message


def _ignore_interrupt(signum: int, frame: "FrameType | None") -> None:
    """SIGINT while no cell runs: a cell's timeout that came after the cell was done."""


class _Interrupts:
    """The cell's SIGINT handler while a cell runs (by default Python's: KeyboardInterrupt, so
    a timeout ends a plain loop), and one that ignores it while this file's own code runs."""

    def __init__(self) -> None:
        self.cell_handler: "Any" = signal.default_int_handler
        signal.signal(signal.SIGINT, _ignore_interrupt)

    def enter_cell(self) -> None:
        signal.signal(signal.SIGINT, self.cell_handler)

    def leave_cell(self) -> None:
        # A handler the cell installed (SIG_IGN, its own) is kept for the next cell. Any step may
        # be interrupted while the cell's handler is in place: each is safe to repeat.
        while True:
            try:
                current = signal.getsignal(signal.SIGINT)
                if current is not _ignore_interrupt:
                    self.cell_handler = current
                signal.signal(signal.SIGINT, _ignore_interrupt)
                return
            except KeyboardInterrupt:
                continue


class _Figures:
    def __init__(self, as_files: bool = False) -> None:
        self.pngs: list[str] = []
        self.size = 0
        self.omitted = 0
        self.as_files = as_files  # a terminal's REPL: saved as figure-N.png in the work directory

    def keep(self, figure: "Figure") -> None:
        """Renders one figure now (plt.show() during a cell, and every figure left open)."""
        if self.as_files:
            from pysandbox_figures import next_path

            figure.savefig(next_path())
            return
        if len(self.pngs) >= MAX_FIGURES:
            self.omitted += 1
            return
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        data = buffer.getvalue()
        if self.size + len(data) > MAX_FIGURE_BYTES:
            self.omitted += 1
            return
        self.size += len(data)
        import base64

        self.pngs.append(base64.b64encode(data).decode("ascii"))

    def collect_open(self) -> None:
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is None:
            return
        for number in pyplot.get_fignums():
            try:
                self.keep(pyplot.figure(number))
            except Exception as error:  # a figure that cannot be drawn is the cell's problem
                print("pysandbox: figure %d could not be saved: %r" % (number, error),
                      file=sys.stderr)
        pyplot.close("all")


_current_figures: "_Figures | None" = None


def keep_figure(figure: "Figure") -> bool:
    """Called by pysandbox_figures.show() while a cell runs."""
    if _current_figures is None:
        return False
    if _current_rich is not None:
        _current_rich.figure(figure)  # shown where plt.show() was called, as Jupyter shows it
    else:
        _current_figures.keep(figure)
    return True


# A kernel's cell (fronts/kernel.cpp) shows its value and what it passes to display() as MIME
# bundles, each representation from the method IPython's formatters call. The kernel takes these
# types and no others.
_REPR_METHODS = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"),
                 ("text/latex", "_repr_latex_"), ("image/svg+xml", "_repr_svg_"),
                 ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
                 ("application/json", "_repr_json_"))
_MIME_TYPES = frozenset(["text/plain"] + [mime for mime, _ in _REPR_METHODS])


def _real_method(value: object, name: str) -> "Callable[..., Any] | None":
    """`value`'s method `name` as IPython's get_real_method finds it: none on a class (its
    methods are unbound), and none from a __getattr__ that answers every name."""
    if isinstance(value, type):
        return None
    try:
        if getattr(value, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        method = getattr(value, name, None)
    except Exception:
        return None
    return method if callable(method) else None


def _as_text(mime: str, data: object) -> "str | None":
    """A representation as the kernel sends it: images in base64, JSON as its text."""
    if isinstance(data, tuple) and len(data) == 2:  # (data, metadata), as IPython allows
        data = data[0]
    if mime.startswith("image/") and mime != "image/svg+xml" and isinstance(data, bytes):
        import base64

        return base64.b64encode(data).decode("ascii")
    if mime == "application/json" and isinstance(data, (dict, list)):
        import json

        return json.dumps(data)
    return data if isinstance(data, str) else None


def _entry_size(mime: str, text: str) -> int:
    """What one representation costs of MAX_CELL_RICH: its JSON."""
    return len(_dumps(mime)) + len(_dumps(text)) + 2


def _bundle_size(data: "dict[str, str]") -> int:
    return sum(_entry_size(mime, text) for mime, text in data.items())


class _Rich:
    """A kernel cell's rich output, in order: each display() call's bundle (or the figure it
    showed, which _Figures keeps as every figure), clear_output()'s clears and
    update_display()'s updates; and the value's. All of it at most MAX_CELL_RICH characters of
    JSON and MAX_CELL_FIGURES displays; what does not fit is left out and counted. The kernel
    sends it when the cell ends, so what a clear or an update replaces is dropped here: a loop
    that clears and shows anew, or updates one display, takes one place, not one a turn."""

    def __init__(self, figures: _Figures) -> None:
        self.figures = figures
        self.displays: "list[dict[str, Any]]" = []
        self.used = 0
        self.omitted = 0
        self.clear_waits = False  # clear_output(wait=True): it clears when the next output comes

    def bundle(self, value: object, text: str,
               wanted: "Callable[[str], bool] | None" = None) -> "dict[str, str] | None":
        """text/plain (`text`, the capped repr) and what else `value` shows as (of the types
        `wanted` takes), each representation that still fits."""
        if not self._fits("text/plain", text):
            self.omitted += 1
            return None
        data = {"text/plain": text}
        offered: "list[tuple[str, object]]" = []
        mimebundle = _real_method(value, "_repr_mimebundle_")
        if mimebundle is not None:
            try:
                got = mimebundle(include=None, exclude=None)
            except Exception as error:
                self._failed(value, "_repr_mimebundle_", error)
                got = None
            if isinstance(got, tuple) and len(got) == 2:
                got = got[0]
            if isinstance(got, dict):
                offered.extend(item for item in got.items() if item[0] in _MIME_TYPES)
        for mime, name in _REPR_METHODS:
            method = _real_method(value, name)
            if method is None or any(mime == taken for taken, _ in offered):
                continue
            if wanted is not None and not wanted(mime):
                continue
            try:
                offered.append((mime, method()))
            except Exception as error:
                self._failed(value, name, error)
        self._add(data, offered, wanted)
        return data

    def raw(self, value: object) -> "dict[str, str] | None":
        """A bundle given as it is, display(raw=True)'s {MIME type: data}. The kernel wants
        text/plain in every bundle: "" when it has none (a front end shows the richest type)."""
        if not isinstance(value, dict):
            raise TypeError("display(raw=True) takes MIME bundles, dicts of MIME type to data, "
                            "not %s" % type(value).__name__)
        text = _as_text("text/plain", value.get("text/plain")) or ""
        if not self._fits("text/plain", text):
            self.omitted += 1
            return None
        data = {"text/plain": text}
        self._add(data, [item for item in value.items() if item[0] in _MIME_TYPES], None)
        return data

    def _add(self, data: "dict[str, str]", offered: "list[tuple[str, object]]",
             wanted: "Callable[[str], bool] | None") -> None:
        for mime, got in offered:
            if mime == "text/plain" or (wanted is not None and not wanted(mime)):
                continue
            shown = _as_text(mime, got)
            if shown is None:
                continue
            if self._fits(mime, shown):
                data[mime] = shown
            else:
                self.omitted += 1

    def _fits(self, mime: str, text: str) -> bool:
        size = _entry_size(mime, text)
        if self.used + size > MAX_CELL_RICH:
            return False
        self.used += size
        return True

    @staticmethod
    def _failed(value: object, name: str, error: Exception) -> None:
        print("pysandbox: %s.%s() failed: %r" % (type(value).__name__, name, error),
              file=sys.stderr)

    def display(self, value: object, raw: bool = False,
                wanted: "Callable[[str], bool] | None" = None,
                display_id: "str | None" = None) -> None:
        self._clear_if_waiting()
        if len(self.displays) >= MAX_FIGURES:
            self.omitted += 1
        elif not raw and type(value).__module__ == "matplotlib.figure" and hasattr(value,
                                                                               "savefig"):
            self.figure(value)
        else:
            data = self.raw(value) if raw else self.bundle(value, _capped_repr(value), wanted)
            if data is not None:
                item: "dict[str, Any]" = {"data": data}
                if display_id is not None:
                    item["display_id"] = display_id
                self.displays.append(item)

    def update(self, value: object, raw: bool, wanted: "Callable[[str], bool] | None",
               display_id: str) -> None:
        """update_display(): this cell's displays with that id show `value` instead; one an
        earlier cell made gets an update, which the kernel sends as update_display_data."""
        matching = [item for item in self.displays
                    if item.get("display_id") == display_id and "data" in item]
        if not matching and len(self.displays) >= MAX_FIGURES:
            self.omitted += 1
            return
        for item in matching:  # what they showed makes room for what replaces it
            self.used -= _bundle_size(item["data"])
        data = self.raw(value) if raw else self.bundle(value, _capped_repr(value), wanted)
        if data is None:  # it did not fit: they show what they showed
            for item in matching:
                self.used += _bundle_size(item["data"])
            return
        for item in matching:
            item["data"] = data
        self.used += _bundle_size(data) * max(0, len(matching) - 1)
        if not matching:
            self.displays.append({"data": data, "display_id": display_id, "update": True})

    def clear(self, wait: bool) -> None:
        """clear_output(): the cell's output goes, now or (wait) when the next output comes."""
        if wait:
            self.clear_waits = True
            return
        self.clear_waits = False
        self._drop()
        self.displays.append({"clear": False})

    def _clear_if_waiting(self) -> None:
        if self.clear_waits:
            self.clear_waits = False
            self._drop()
            self.displays.append({"clear": True})

    def _drop(self) -> None:
        """What a clear takes away: this cell's displays and the figures shown in them (the
        kernel shows each figure no display showed at the end). Updates of earlier cells'
        displays stay: their outputs are not this cell's."""
        self.displays[:] = [item for item in self.displays if item.get("update")]
        self.used = sum(_bundle_size(item["data"]) for item in self.displays)
        self.figures.pngs.clear()
        self.figures.size = 0

    def finish(self) -> None:
        """A clear that still waits when the cell ends goes as it is: the client clears at the
        next output (the value, a figure left open), or keeps what is shown."""
        if self.clear_waits:
            self.displays.append({"clear": True})

    def figure(self, figure: "Figure") -> None:
        self._clear_if_waiting()
        before = len(self.figures.pngs)
        self.figures.keep(figure)
        if len(self.figures.pngs) > before and len(self.displays) < MAX_FIGURES:
            self.displays.append({"figure": before})


_current_rich: "_Rich | None" = None


def _new_display_id() -> str:
    return os.urandom(16).hex()


class DisplayHandle:
    """What display(..., display_id=...) returns, as IPython's: update() shows another object
    in the display's place."""

    def __init__(self, display_id: "str | None" = None) -> None:
        self.display_id = display_id or _new_display_id()

    def __repr__(self) -> str:
        return "<%s display_id=%s>" % (type(self).__name__, self.display_id)

    def display(self, obj: object, **options: "Any") -> None:
        display(obj, display_id=self.display_id, **options)

    def update(self, obj: object, **options: "Any") -> None:
        display(obj, display_id=self.display_id, update=True, **options)


def _show(rich: _Rich, objs: "tuple[object, ...]", options: "dict[str, Any]") -> "str | None":
    """IPython's display(*objs, **options) in a kernel's cell, as its own does in ipykernel
    (include, exclude, display_id, transient's display_id, raw, clear, update; metadata is not
    passed on); the display id it used."""
    display_id = options.get("display_id")
    transient = options.get("transient")
    if display_id is True:
        display_id = _new_display_id()
    elif not display_id and isinstance(transient, dict):
        display_id = transient.get("display_id")
    if display_id is not None and not isinstance(display_id, str):
        raise TypeError("display_id must be a string, or True for a new one")
    update = bool(options.get("update"))
    if update and not display_id:
        raise TypeError("display_id required for update_display")
    raw = bool(options.get("raw"))
    if not objs and display_id:  # a place to update later, empty until then
        objs, raw = ({},), True
    if options.get("clear"):
        rich.clear(True)
    include, exclude = options.get("include"), options.get("exclude")
    wanted = None
    if include is not None or exclude is not None:
        def wanted(mime: str) -> bool:
            return (include is None or mime in include) and (exclude is None or
                                                              mime not in exclude)
    for obj in objs:
        if update:
            assert display_id is not None
            rich.update(obj, raw, wanted, display_id)
        else:
            rich.display(obj, raw, wanted, display_id)
    return display_id


def display(*objs: object, **options: "Any") -> "DisplayHandle | None":
    """IPython's display(), in a kernel's cells: each value as a display_data message, with
    every MIME type it shows as (a matplotlib figure as PNG), and IPython's options (_show).
    Outside a kernel's cell each value is printed, as IPython's display() does outside
    IPython."""
    if _current_rich is None:
        print(*objs)
        return None
    shown = _show(_current_rich, objs, options)
    return DisplayHandle(shown) if options.get("display_id") else None


# Where IPython keeps display(), clear_output() and the rest, and takes them from for
# IPython.display and IPython.core.display.
_IPYTHON_DISPLAY = "IPython.core.display_functions"


class _IPythonDisplay:
    """IPython's display functions, which print a repr where no InteractiveShell runs, made to
    show in a kernel's cells as the builtin display() does. Installed by a kernel's first cell;
    IPython is not imported for it (it is slow, and may be absent): its display functions are
    replaced right after IPython.core.display_functions ran, before any module takes its names
    (IPython.display takes them with `import *`), or at once when a preload module imported
    them before. Outside a kernel's cell (a silent one) IPython's own run."""

    def __init__(self) -> None:
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        self.installed = True
        loaded = sys.modules.get(_IPYTHON_DISPLAY)
        if loaded is not None:
            self.patch(loaded)
        else:
            sys.meta_path.insert(0, self)

    def find_spec(self, name: str, path: "Any" = None, target: "Any" = None) -> "Any":
        if name != _IPYTHON_DISPLAY:
            return None
        return _spec_then(self, name, path, target, self.patch)

    def patch(self, module: "ModuleType") -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        own: "dict[str, Any]" = {name: getattr(module, name, None)
                                 for name in ("display", "clear_output", "publish_display_data")}
        handle = getattr(module, "DisplayHandle", DisplayHandle)

        def ipython_display(*objs: object, **options: "Any") -> "Any":
            if _current_rich is None:
                return own["display"](*objs, **options)
            shown = _show(_current_rich, objs, options)
            return handle(shown) if options.get("display_id") else None

        def ipython_clear_output(wait: bool = False) -> None:
            if _current_rich is None:
                own["clear_output"](wait)
            else:
                _current_rich.clear(bool(wait))

        def ipython_publish_display_data(*args: "Any", **options: "Any") -> None:
            if _current_rich is None:
                own["publish_display_data"](*args, **options)
                return
            data = args[0] if args else options.pop("data", None)
            options.pop("metadata", None)
            _show(_current_rich, (data,), dict(options, raw=True))

        ours = {"display": ipython_display, "clear_output": ipython_clear_output,
                "publish_display_data": ipython_publish_display_data}
        for name, function in ours.items():
            function.__doc__ = getattr(own[name], "__doc__", None)
            setattr(module, name, function)
            for taker in ("IPython.display", "IPython.core.display"):  # took them already
                other = sys.modules.get(taker)
                if other is not None and own[name] is not None and getattr(
                        other, name, None) is own[name]:
                    setattr(other, name, function)


_ipython_display = _IPythonDisplay()


def _without_driver_frames(tb: "TracebackType | None") -> "TracebackType | None":
    while tb is not None and tb.tb_frame.f_code.co_filename == DRIVER_FILE:
        tb = tb.tb_next
    return tb


# The hook the sandbox started with: Python's own, or the [policy] hook (sitecustomize), which
# leaves its own frames out and then calls Python's. Taken when this module is imported, which is
# before the preload (pysandbox_zygote too), so a hook a preload module or a cell sets is theirs.
_STARTUP_HOOK = sys.excepthook


def _print_traceback(kind: "type[BaseException]", value: BaseException,
                     tb: "TracebackType | None") -> None:
    """Python's own printing, in Python: Python 3.11's C printer (sys.__excepthook__) reads a
    frame's line from the file its filename names, and a cell's ("<cell-3>") names none, so it
    would print no line at all; traceback reads linecache, which holds every cell's source
    (_LinecacheSources). Newer Pythons print through traceback themselves."""
    import traceback

    traceback.print_exception(kind, value, tb)


def _print_exception(error: BaseException) -> None:
    """As the interpreter prints an uncaught exception, with each cell frame's source line, as
    Jupyter does: through sys.excepthook when the cell (or a preload module) set its own, and
    otherwise through the hook the sandbox started with, printing with _print_traceback."""
    error.__traceback__ = _without_driver_frames(error.__traceback__)
    kind, tb = type(error), error.__traceback__
    hook = sys.excepthook
    try:
        if hook is sys.__excepthook__:
            _print_traceback(kind, error, tb)
        elif hook is _STARTUP_HOOK:  # the [policy] hook: `default` is whom it passes it on to
            hook(kind, error, tb, default=_print_traceback)  # type: ignore[call-arg]
        else:
            hook(kind, error, tb)
    except BaseException:  # the cell replaced the hook with one that fails
        _print_traceback(kind, error, tb)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def _capped_repr(value: object) -> str:
    text = repr(value)
    if len(text) > MAX_VALUE:
        omitted = len(text) - MAX_VALUE
        text = text[:MAX_VALUE] + "... [%d characters omitted]" % omitted
    return text


class MagicNotSupportedError(SyntaxError):
    """A line of IPython's own syntax (a %magic, a !command) in a kernel's cell: pysandbox's
    kernel runs Python, not IPython. A SyntaxError that says so, at the line."""


class InstallNotSupportedError(MagicNotSupportedError):
    """%pip install and the like in a kernel's cell: a running sandbox's packages are read-only,
    and come from what the kernel was started with."""


# What a %magic or !command that installs packages starts with (or runs with python -m).
_INSTALLERS = frozenset(["pip", "pip3", "conda", "mamba", "micromamba", "uv"])


def _magic_error(code: str, error: SyntaxError) -> "MagicNotSupportedError | None":
    """What a kernel cell's SyntaxError means when its line is IPython's: one that starts with %
    or !, which no Python statement does."""
    lines = code.splitlines()
    if not error.lineno or error.lineno > len(lines):
        return None
    text = lines[error.lineno - 1]
    line = text.strip()
    if not line.startswith(("%", "!")):
        return None
    shown = line if len(line) <= 200 else line[:200] + "..."
    words = line.lstrip("%!").split()
    command = words[0].rsplit("/", 1)[-1] if words else ""
    where = (error.filename, error.lineno, len(text) - len(text.lstrip()) + 1, text)
    if command in _INSTALLERS or (len(words) > 2 and words[1] == "-m" and
                                  words[2] in _INSTALLERS):
        return InstallNotSupportedError(
            "%s: packages cannot be installed into a running sandbox. They come from what the "
            "kernel starts with: the profile's [python] requirements, or an environment made "
            "with `pysandbox env create PKG` given as `pysandbox kernel --with-env ID`. Add the "
            "package there and restart the kernel (the host's python3-* packages import as "
            "they are)" % shown, where)
    if command == "matplotlib":
        return MagicNotSupportedError(
            "%s: IPython magics are not Python, and this kernel runs Python; figures show "
            "inline without it: remove the line" % shown, where)
    return MagicNotSupportedError(
        "%s: IPython magics (%%name) and shell commands (!command) are not Python, and this "
        "kernel runs Python: write it in Python" % shown, where)


# What _Session.warm_up runs.
_WARM_UP_CODE = """def _(a):
    for b in a:
        pass
    return [b for b in a]
_(())
"""


class _Session:
    def __init__(self, channel: _Channel) -> None:
        self.channel = channel
        self.sources = _LinecacheSources()
        # Until linecache runs; one a preloaded module imported is adopted by the first cell.
        sys.meta_path.insert(0, self.sources)
        self.interrupts = _Interrupts()
        self.namespace = self._fresh_main()
        self.flags: int = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        self.loop: "Any" = None

    @staticmethod
    def _fresh_main() -> "dict[str, Any]":
        module = type(sys)("__main__")
        module.__dict__["__builtins__"] = __builtins__
        sys.modules["__main__"] = module
        return module.__dict__

    def _compile(self, code: str, filename: str,
                 kernel: bool = False) -> "tuple[CodeType, CodeType | None]":
        """The cell's body and, when it ends in an expression statement, that expression. In a
        kernel's cell, a line of IPython's syntax where Python found none is said to be that."""
        self.sources.adopt()
        self.sources.add(filename, code)
        try:
            tree = compile(code, filename, "exec", ast.PyCF_ONLY_AST | self.flags,
                           dont_inherit=True)
        except SyntaxError as error:
            magic = _magic_error(code, error) if kernel else None
            if magic is None:
                raise
            raise magic from None
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, filename, "exec", self.flags, dont_inherit=True)
        for feature in _future_flags(body):
            self.flags |= feature
        expression = None
        if last is not None:
            expression = compile(last, filename, "eval", self.flags, dont_inherit=True)
        return body, expression

    def _run(self, code: "CodeType") -> "Any":
        result = eval(code, self.namespace)
        if code.co_flags & 0x80:  # CO_COROUTINE: top-level await
            if self.loop is None:
                import asyncio
                self.loop = asyncio.new_event_loop()
            result = self.loop.run_until_complete(result)
        return result

    def cell(self, message: "dict[str, Any]") -> None:
        global _current_figures, _current_rich
        if "query" in message:
            self.query(message)
            return
        # "kind" and "token" first: the supervisor takes only a message that begins with what it
        # waits for, and skips any other from its first record (control_channel.hpp).
        done: "dict[str, Any]" = {"kind": "done", "token": message.get("token"), "outcome": "ok",
                                  "value": None}
        filename = message.get("filename") or "<cell-%d>" % int(message.get("cell", 0))
        if "argv" in message:
            sys.argv = list(message["argv"])
        if "stdin" in message:
            import base64

            sys.stdin = io.TextIOWrapper(io.BytesIO(base64.b64decode(message["stdin"])))
        figures = _Figures(bool(message.get("figure_files")))
        problem = _write_files(message.get("files") or [])
        if problem:
            done["files_error"] = problem
        _current_figures = figures
        rich_value: "dict[str, str] | None" = None
        rich = _Rich(figures) if message.get("rich") else None
        if rich is not None:
            _install_display()
            _input.start(self.channel, message.get("token"), bool(message.get("input")))
        _current_rich = rich
        try:
            self.interrupts.enter_cell()
            try:
                body, expression = self._compile(message["code"], filename, rich is not None)
                self._run(body)
                if expression is not None:
                    value = self._run(expression)
                    if value is not None:
                        done["value"] = _capped_repr(value)
                        if rich is not None:
                            rich_value = rich.bundle(value, done["value"])
            finally:
                self.interrupts.leave_cell()
        except SystemExit as exit:
            code = exit.code
            if code is None or isinstance(code, int):
                done["exit_code"] = code or 0
            else:
                print(code, file=sys.stderr)
                done["exit_code"] = 1
            done["outcome"] = "exit"
        except BaseException as error:
            _print_exception(error)
            done["outcome"] = "exception"
        if rich is not None:
            rich.finish()
        _current_figures = None
        _current_rich = None
        _input.allowed = False
        try:
            figures.collect_open()
        except Exception as error:
            print("pysandbox: figures could not be collected: %r" % (error,), file=sys.stderr)
        done["figures"] = figures.pngs
        done["figures_omitted"] = figures.omitted
        if rich is not None:
            done["rich"] = {"value": rich_value, "displays": rich.displays,
                            "omitted": rich.omitted}
        _flush()
        self.channel.send(done)


    def warm_up(self) -> None:
        """Goes once through what a cell does, on code of its own, before the first cell: a
        fresh interpreter's first compile, eval and print cost it some hundreds of microseconds
        more than the next ones (the compiler's first use, its code paged in), and a pooled
        sandbox serves one call only. The code names, defines, loops, builds a list and calls,
        as most cells do: each of these takes the compiler and the evaluation loop through code
        of theirs the others do not, and the first cell to need it would fault it in (a page
        fault is tens of microseconds on a paravirtualized guest). Nothing of it is left: its
        namespace is emptied and thrown away, its source is not linecache's, nothing is written
        and nothing imported."""
        filename = "<pysandbox-warm-up>"
        tree = compile(_WARM_UP_CODE, filename, "exec", ast.PyCF_ONLY_AST | self.flags,
                       dont_inherit=True)
        last = ast.Expression(tree.body.pop().value)
        namespace = {"__builtins__": __builtins__}
        eval(compile(tree, filename, "exec", self.flags, dont_inherit=True), namespace)
        eval(compile(last, filename, "eval", self.flags, dont_inherit=True), namespace)
        namespace.clear()  # its function and the namespace hold each other
        print(end="")
        _loads(_dumps({"kind": "done", "token": "", "outcome": "ok", "value": None,
                       "figures": [], "figures_omitted": 0}))

    def query(self, message: "dict[str, Any]") -> None:
        """A kernel's complete or inspect request: answered from the namespace without running
        any of the cell's code but the attribute lookups rlcompleter does, under the cell's
        timeout (a __getattr__ that sleeps is interrupted as a cell is). Open figures, sys.argv
        and the work directory are left as they are."""
        done: "dict[str, Any]" = {"kind": "done", "token": message.get("token"), "outcome": "ok",
                                  "value": None, "answer": None}
        query = message["query"]
        try:
            self.interrupts.enter_cell()
            try:
                code, cursor = str(query.get("code", "")), int(query.get("cursor", 0))
                if query.get("kind") == "complete":
                    done["answer"] = _complete(code, cursor, self.namespace)
                elif query.get("kind") == "inspect":
                    done["answer"] = _inspect(code, cursor, self.namespace)
            finally:
                self.interrupts.leave_cell()
        except BaseException as error:  # KeyboardInterrupt at the timeout, a hostile lookup's
            print("pysandbox: the %s request failed: %s: %s" % (
                query.get("kind"), type(error).__name__, error), file=sys.stderr)
            done["outcome"] = "exception"
        _flush()
        self.channel.send(done)


class StdinNotImplementedError(NotImplementedError):
    """input() in a kernel's cell whose client does not answer input requests (IPython's
    name)."""


class _Input:
    """input() and getpass.getpass() in a kernel's cell, as ipykernel offers them: when the
    client allows it (allow_stdin), the prompt goes to the supervisor, {"kind": "input", "token",
    "n", "prompt", "password"}, and the kernel asks the client on its stdin channel; the answer
    comes back as {"kind": "input", "token", "n", "value"} (or "error": the client's reply was
    unusable). Only the answer numbered `n` is taken: one to an input() that was interrupted is
    not the next one's."""

    def __init__(self) -> None:
        self.channel: "_Channel | None" = None
        self.token: "Any" = None
        self.allowed = False
        self.number = 0
        self.getpass_installed = False

    def start(self, channel: _Channel, token: "Any", allowed: bool) -> None:
        self.channel, self.token, self.allowed = channel, token, allowed
        if allowed and not self.getpass_installed:
            import getpass  # a cell that may ask pays for the import, once

            getpass.getpass = _getpass
            self.getpass_installed = True

    def ask(self, prompt: object, password: bool, what: str) -> str:
        if not self.allowed or self.channel is None:
            raise StdinNotImplementedError(
                "%s was called, but this client does not allow input requests (it sent "
                "allow_stdin false): put the data in the cell, or in a file of the sandbox, "
                "instead" % what)
        text = str(prompt)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_INPUT_PROMPT:
            raise ValueError("%s: the prompt is over %d bytes" % (what, MAX_INPUT_PROMPT))
        _flush()  # what the cell printed comes before the prompt
        self.number += 1
        # "kind" and "token" first: the supervisor takes only what begins with them.
        self.channel.send({"kind": "input", "token": self.token, "n": self.number,
                           "prompt": text, "password": password})
        while True:
            reply = self.channel.receive(interruptible=True)
            if reply is None:
                raise EOFError("%s: the sandbox's supervisor is gone" % what)
            if reply.get("kind") == "input" and reply.get("n") == self.number:
                break
        if "error" in reply:
            raise ValueError("%s: %s" % (what, reply["error"]))
        value = reply.get("value")
        if not isinstance(value, str):
            raise ValueError("%s: the answer was not a string" % what)
        if value == "\x04":  # end of file, as a terminal's Ctrl-D (ipykernel's convention)
            raise EOFError
        return value


_input = _Input()


def _kernel_input(prompt: object = "") -> str:
    return _input.ask(prompt, False, "input()")


def _getpass(prompt: str = "Password: ", stream: "Any" = None) -> str:
    return _input.ask(prompt, True, "getpass()")


def _install_display() -> None:
    """display() as a builtin, where IPython puts it, for a kernel's cells, and IPython's own
    display functions showing as it does once a cell imports them; and an input() that asks the
    kernel's client, or says why it cannot, rather than reading end of file."""
    import builtins

    if not hasattr(builtins, "display"):
        builtins.display = display  # type: ignore[attr-defined]
        builtins.input = _kernel_input
    _ipython_display.install()


def _name_before(code: str, cursor: int) -> int:
    """Where the dotted name that ends at `cursor` begins."""
    start = max(0, min(cursor, len(code)))
    while start > 0 and (code[start - 1].isalnum() or code[start - 1] in "_."):
        start -= 1
    return start


def _complete(code: str, cursor: int, namespace: "dict[str, Any]") -> "dict[str, Any]":
    """rlcompleter's matches for the name before the cursor: names of the namespace, builtins
    and keywords, or a dotted name's attributes (rlcompleter looks the dotted part up, and no
    property's getter runs), without the '(' or ':' it adds for a terminal."""
    cursor = max(0, min(cursor, len(code)))
    start = _name_before(code, cursor)
    text = code[start:cursor]
    matches: "list[str]" = []
    if text and not text[0].isdigit():
        import rlcompleter

        completer = rlcompleter.Completer(namespace)
        found = completer.attr_matches(text) if "." in text else completer.global_matches(text)
        size = 0
        for match in found:
            match = match.rstrip("(: ")
            size += len(_dumps(match)) + 1
            if match in matches:
                continue
            if len(matches) >= MAX_CELL_MATCHES or size > MAX_CELL_RICH:
                break
            matches.append(match)
    return {"matches": matches, "cursor_start": start, "cursor_end": cursor}


def _inspect(code: str, cursor: int, namespace: "dict[str, Any]") -> "dict[str, Any]":
    """The type, signature and docstring of the dotted name at the cursor (or of the call the
    cursor is in, after its '('), found by name and getattr alone: nothing is called, not even
    repr()."""
    cursor = max(0, min(cursor, len(code)))
    end = cursor
    while end < len(code) and (code[end].isalnum() or code[end] == "_"):
        end += 1
    start = _name_before(code, end)
    if start == end:
        before = code[:cursor].rstrip()
        if before.endswith("("):
            end = len(before) - 1
            start = _name_before(code, end)
    name = code[start:end].strip(".")
    parts = name.split(".")
    if not name or not all(part.isidentifier() for part in parts):
        return {"found": False}
    import builtins
    import inspect

    if parts[0] in namespace:
        found = namespace[parts[0]]
    elif hasattr(builtins, parts[0]):
        found = getattr(builtins, parts[0])
    else:
        return {"found": False}
    for part in parts[1:]:
        found = getattr(found, part)
    lines = ["Type: %s" % type(found).__qualname__]
    try:
        lines.append("Signature: %s%s" % (parts[-1], inspect.signature(found)))
    except (TypeError, ValueError):
        pass
    lines.append("Docstring: %s" % (inspect.getdoc(found) or "<no docstring>"))
    text = "\n".join(lines)
    if len(text) > MAX_VALUE:
        text = text[:MAX_VALUE] + "... [%d characters omitted]" % (len(text) - MAX_VALUE)
    return {"found": True, "text": text}


# Every flag a `from __future__ import` can set in co_flags (CO_FUTURE_DIVISION, 0x20000, to
# CO_FUTURE_ANNOTATIONS, 0x1000000): __future__ is imported only for a cell that used one.
_FUTURE_FLAGS = 0x1FE0000


def _future_flags(code: "CodeType") -> "Iterator[int]":
    if not code.co_flags & _FUTURE_FLAGS:
        return
    import __future__
    for name in __future__.all_feature_names:
        flag = getattr(__future__, name).compiler_flag
        if code.co_flags & flag:
            yield flag


def _write_files(files: "list[dict[str, Any]]") -> "str | None":
    """The request's files, into the working directory before the cell runs."""
    if files:
        import base64
    for entry in files:
        try:
            data = base64.b64decode(entry["data"], validate=True)
            with open(entry["name"], "xb") as out:
                out.write(data)
        except Exception as error:
            return "%s: %s" % (entry.get("name"), error)
    return None


def _preload(modules: "list[str]") -> "dict[str, str]":
    failed: dict[str, str] = {}
    for name in modules:
        try:
            __import__(name)
        except BaseException as error:  # SystemExit and KeyboardInterrupt included
            failed[name] = "%s: %s" % (type(error).__name__, error)
    return failed


def _channel_fd(where: str) -> int:
    """The channel: the descriptor number pysandbox passed, or, under gVisor, where the
    interpreter inherits none, the path of the socket to connect to (plan/gvisor.hpp);
    pysandbox takes this one connection and no other. Where the profile allows no socket,
    sitecustomize connected it before sealing the calls off and put its number here."""
    if where.isdigit():
        return int(where)
    if where == "sealed":  # gvisor::kSealedControl, which sitecustomize replaces before the seal
        os.write(2, b"pysandbox: sandbox error: the driver's channel was not connected and sealed "
                 b"before it started (sitecustomize did not run: python.args has -S?)\n")
        os._exit(125)
    import _socket
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
    connection.connect(where)
    return connection.detach()


def main(preloaded: "dict[str, str] | None" = None) -> None:
    """`preloaded`: what failed of a preload already imported (by a fork server's zygote,
    pysandbox_zygote.py, through _preload), instead of importing it here."""
    channel = _Channel(_channel_fd(sys.argv[1]))
    try:
        os.set_inheritable(channel.fd, False)  # programs a cell starts must not hold it
    except OSError:
        pass
    sys.modules["pysandbox_driver"] = sys.modules[__name__]
    failed = _preload(sys.argv[2:]) if preloaded is None else preloaded
    sys.argv = [""]  # as in an interactive interpreter
    # The -c that imported this module put its directory first (pysandbox's own modules are on
    # PYTHONPATH already): without it, sys.path is what `pysandbox run -c` has, the working
    # directory ('') first, as in an interactive interpreter, unless python.args has -P, which
    # keeps it off a run's path too.
    if sys.path and sys.path[0] == os.path.dirname(__file__):
        del sys.path[0]
    if sys.path[:1] != [""] and not getattr(sys.flags, "safe_path", False):
        sys.path.insert(0, "")
    # Each line as it is printed, as at a terminal: stdout and stderr then arrive in the order
    # the cell wrote them.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
        except (AttributeError, ValueError):
            pass
    session = _Session(channel)
    if preloaded is None:  # a forked job's cell is sent at once: it would only go first
        session.warm_up()
    _flush()
    channel.send({"kind": "ready", "failed": failed})
    while True:
        message = channel.receive()
        if message is None:
            break
        if message.get("kind") == "cell":
            session.cell(message)
    _flush()


if __name__ == "__main__":
    main()
