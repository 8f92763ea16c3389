"""pysandbox's sitecustomize: installs the [policy] audit hook (PEP 578) before the script runs,
when the profile has a [policy].

The hook explains; the kernel layers underneath are the boundary. Each block is reported as one
"kind\twhat" record on the policy channel, a descriptor pysandbox drains while the script runs;
the script runs in this same process and can write there too, so these records are the
script's word, not the sandbox's.

The same file in every run, so the build compiles it once like the other modules, and the hook
lives here rather than in a module of its own: Python imports sitecustomize anyway, and a second
import would cost every run a sixth of a millisecond; for that reason too the variable's name is
written here rather than read from pysandbox_wire, as the other modules read the wire's constants
(the unit tests hold it to plan/policy.hpp's kPolicyVariable). The policy comes as data: pysandbox
sets PYSANDBOX_POLICY (plan.cpp, policy.cpp) to one JSON array of literals (the profile's name,
lists of strings, an object of strings, the channel's descriptor or, under gVisor, the path of
its socket, this directory), and it is removed from the environment here, before the script runs,
so nothing the script starts inherits it. JSON of this shape is a Python literal; it is evaluated with no names at all, so only literals
can come out of it.

Nothing is kept at module level: the rules live, immutable, in the closure of the hook, and
_install is deleted once it ran, so importing sitecustomize gives the script nothing to edit. (A
determined script can still reach the hook through ctypes or the garbage collector; that is what
the kernel layers are for.)
"""


def _install(profile: str, deny_imports: list[str], deny_calls: list[str],
             events: dict[str, str], channel_at: "int | str", own_files: str, for_jobs: int) -> None:
    import os
    import sys

    TYPE_CHECKING = False
    if TYPE_CHECKING:  # for mypy alone: nothing more is imported at a start
        from types import FrameType, TracebackType
        from typing import Any

    # Everything the hook calls is bound here, once: a script that patches os, sys or builtins
    # afterwards (os.write = ..., builtins cleared) changes nothing the hook uses.
    write, realpath, fsdecode, getframe = os.write, os.path.realpath, os.fsdecode, sys._getframe
    permission_error, os_error, is_instance, any_of = PermissionError, OSError, isinstance, any
    integer, text, new_set, identity, backwards, type_of = int, str, set, id, reversed, type
    denied_imports = tuple(deny_imports)
    denied_calls = tuple(deny_calls)
    rules = tuple(events.items())
    event_names = frozenset(event for event, _ in rules)
    set_inheritable = os.set_inheritable
    channel_fd = channel_at if isinstance(channel_at, int) else -1
    channel_path = channel_at if isinstance(channel_at, str) else ""
    # Where pysandbox's channels are under gVisor: connecting there again is refused by
    # pysandbox, so the hook leaves it to the driver (pysandbox_driver._channel_fd).
    channel_dir = channel_path.rpartition("/")[0] + "/" if channel_path else ""

    def claim_channel() -> int:
        if channel_path:
            # Under gVisor the interpreter inherits no channel: the hook connects to pysandbox's
            # socket, before the script runs; pysandbox takes that one connection and no other.
            import _socket
            try:
                connection = _socket.socket(_socket.AF_UNIX,
                                            _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
                connection.connect(channel_path)
            except os_error:
                return -1
            return connection.detach()
        try:
            set_inheritable(channel_fd, False)  # programs the script starts must not hold it
        except os_error:
            return -1
        return channel_fd

    # A fork server's zygote (pysandbox_zygote.py) installs the hook for the jobs it forks
    # (for_jobs): what it blocks there, the preload's imports, is kept rather than reported, for
    # each job, where a cloned sandbox's driver would have blocked it. Each job raises this event
    # first (ZYGOTE_FORKED_EVENT in pysandbox_wire, spelt out here as the variable's name is):
    # the hook then reports on the job's own channel, put in its place by the fork, beginning
    # with what it kept (at most kept_most records: a preload blocks a few).
    forked_event, kept_most = "pysandbox.forked", 256
    kept: "list[tuple[str, str]] | None" = [] if for_jobs else None
    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    harmless_writes = frozenset(("/dev/null", "/dev/stdout", "/dev/stderr"))
    library_prefixes = (os.path.dirname(os.__file__) + "/", own_files, "<frozen ")
    channel: int = claim_channel()

    def record(kind: str, what: str) -> None:
        if kept is not None:
            if len(kept) < kept_most:
                kept.append((kind, what))
        elif channel >= 0:
            try:
                write(channel, ("%s\t%s" % (kind, what[:200])).encode("utf-8", "replace"))
            except os_error:
                pass  # the supervisor is gone, or the script closed the channel

    def block(kind: str, what: str, key: str, listed: "tuple[str, ...]") -> None:
        record(kind, what)
        # EPERM, as the kernel layer underneath would say: code that checks errno behaves alike.
        raise permission_error(
            1, "pysandbox: the sandbox policy blocks %s (policy.%s in profile %s: %s); "
            "everything not listed there is allowed" % (what, key, profile, ", ".join(listed)))

    def from_a_package() -> bool:
        """Whether the code that asked is an installed package's own (matplotlib running fc-list,
        platform asked by pandas running uname): the nearest frame outside the standard library
        is in a read-only */-packages/ directory. Those calls are left to the kernel layers; the
        hook explains the script's own calls, direct or through the standard library."""
        frame: "FrameType | None" = getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith(library_prefixes) or "-packages/" in name:
                return name.startswith("/usr/") and "-packages/" in name
            frame = frame.f_back
        return False

    def writes_outside_tmp(args: "tuple[Any, ...]") -> bool:
        path, mode, flags = args[0], args[1], args[2]
        if path is None or is_instance(path, integer):
            return False  # an fd already open
        writing = (is_instance(mode, text) and any_of(c in mode for c in "wax+")) or (
            is_instance(flags, integer) and flags & writing_flags)
        if not writing:
            return False
        path = realpath(fsdecode(path))
        return not (path == "/tmp" or path.startswith("/tmp/") or path in harmless_writes)

    def rule_for(event: str) -> str:
        for name, rule in rules:
            if name == event:
                return rule
        return event

    def hook(event: str, args: "tuple[Any, ...]") -> None:
        nonlocal channel, kept
        if event == forked_event and kept is not None:
            held, kept, channel = kept, None, claim_channel()
            record("hook", "installed")
            for kind, what in held:
                record(kind, what)
        elif event == "import" and denied_imports:
            name = args[0]
            for denied in denied_imports:
                if name == denied or name.startswith(denied + "."):
                    if not from_a_package():
                        block("import", name, "deny_imports", denied_imports)
        elif event in event_names:
            if event == "open" and not writes_outside_tmp(args):
                return
            if event == "socket.connect" and channel_dir and is_instance(args[1], text) and \
                    args[1].startswith(channel_dir):
                return  # the cell driver's own channel, beside the hook's (gVisor)
            if from_a_package():
                return
            block("call", rule_for(event), "deny_calls", denied_calls)

    def without_own_frames(tb: "TracebackType | None") -> "TracebackType | None":
        """The traceback minus this file's frames, so it ends at the script's line."""
        kept: "list[TracebackType]" = []
        while tb is not None:
            if not tb.tb_frame.f_code.co_filename.startswith(own_files):
                kept.append(tb)
            tb = tb.tb_next
        rebuilt: "TracebackType | None" = None
        for entry in backwards(kept):
            rebuilt = type_of(entry)(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
        return rebuilt

    def excepthook(kind: "type[BaseException]", value: BaseException,
                   tb: "TracebackType | None", default: "Any" = sys.excepthook) -> None:
        # `default` prints; the cell driver passes its own (pysandbox_driver._print_exception).
        seen: "set[int]" = new_set()
        exception: "BaseException | None" = value
        while exception is not None and identity(exception) not in seen:  # chained ones too
            seen.add(identity(exception))
            exception.__traceback__ = without_own_frames(exception.__traceback__)
            exception = exception.__cause__ or exception.__context__
        default(kind, value, value.__traceback__ if value is not None else tb)

    sys.addaudithook(hook)
    sys.excepthook = excepthook
    if kept is None:  # a zygote's jobs say it for themselves
        record("hook", "installed")


def _seal(argument: str) -> int:
    """Under gVisor, where the profile allows the script no socket (plan/gvisor.hpp): connects
    the hook's channel (its descriptor is returned, else -1) and the cell driver's (its number
    replaces the driver's first argument), then installs the seal, a seccomp filter pysandbox
    compiled that denies the socket(), connect() and seccomp() gVisor's filter let through for
    this. Before any line of the script; should any step fail, the interpreter ends (125) and the
    script never runs with those calls open. The seal goes in through pysandbox's native helper
    (src/inside/zygote_helper.cpp), made from its spec outside the import system as the zygote
    makes it (pysandbox_zygote._own_module): nothing of it is left in sys.modules, nor, once
    collected, anywhere else. `argument`: PYSANDBOX_SEAL's value (gvisor::seal_argument), read
    inside the try: site reports an Exception out of sitecustomize and runs the script all the
    same. `later_path`: what PYTHONPATH would have held after this module's
    directory (an environment's packages, the caller's PYTHONPATH), put there on sys.path only
    now, once sealed: until then only the standard library imports, not a package named as one
    of its modules."""
    import _imp
    import os
    import sys
    from _frozen_importlib import ModuleSpec

    def connect(path: str) -> int:
        import _socket
        connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET | _socket.SOCK_CLOEXEC)
        connection.connect(path)
        return connection.detach()

    before = set(sys.modules)
    import gc
    try:
        helper, program, hook_at, control_at, later_path = eval(
            argument, {"__builtins__": {}}, {})
        hook_fd = connect(hook_at) if hook_at else -1
        if control_at:
            if sys.argv[1:2] != ["sealed"]:  # gvisor::kSealedControl
                raise OSError("the driver's channel argument is not where pysandbox put it")
            sys.argv[1] = str(connect(control_at))
        spec = ModuleSpec(helper.rpartition("/")[2].partition(".")[0], None, origin=helper)
        module = _imp.create_dynamic(spec)
        _imp.exec_dynamic(module)
        failed = module.seal(bytes(program))
        if failed:
            raise OSError(-failed, "seccomp(SECCOMP_SET_MODE_FILTER) failed: %s" %
                          os.strerror(-failed))
        del module, spec
    except BaseException as error:
        os.write(2, ("pysandbox: sandbox error: could not seal the channels to pysandbox under "
                     "gVisor (%s); the script does not run\n" % (error,)).encode())
        os._exit(125)
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]
    gc.collect()  # the helper's module and its functions, in a cycle
    # As Python reads PYTHONPATH: relative entries (an empty one too) against the working
    # directory, right after this module's directory, the first. And on PYTHONPATH again for
    # the interpreters the script starts, which inherit the seal.
    if later_path:
        sys.path[1:1] = [os.path.abspath(entry) for entry in later_path.split(":")]
        os.environ["PYTHONPATH"] = os.environ.get("PYTHONPATH", "") + ":" + later_path
    return hook_fd


import os

_policy = os.environ.pop("PYSANDBOX_POLICY", "")
_sealed = os.environ.pop("PYSANDBOX_SEAL", "")
_hook_fd = _seal(_sealed) if _sealed else -1
if _policy:
    _arguments = eval(_policy, {"__builtins__": {}}, {})
    if _sealed:
        _arguments[4] = _hook_fd  # connected before the seal, as the path it was
    _install(*_arguments)
    del _arguments
del _install, _seal, _policy, _sealed, _hook_fd, os
