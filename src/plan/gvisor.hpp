#pragma once
// sandbox.kernel = "gvisor": the script's system calls are answered by gVisor (Debian's runsc), a
// kernel in user space, instead of the host's.
//
// The sandbox is built as for the host kernel (its namespaces, the read-only root, the size-capped
// /tmp, the inputs and the workdir, the ids, the host user's counts), and init starts runsc where
// it would start the interpreter. runsc runs the script in a container whose root is the sandbox's
// own root, read-only, served by runsc's file proxy (the gofer), with the sandbox's /tmp bound in
// read-write; /proc, /dev and the network are gVisor's own. The script's program, environment,
// working directory, ids, rlimits and seccomp policy go to runsc as an OCI bundle
// (bundle/config.json), which the plan writes into the sandbox's root, where the container cannot
// see it.
//
// What changes around runsc, and why (each is a field of the plan set here, nothing else):
// - No Landlock: a Landlock-restricted task cannot mount or pivot_root, which runsc's gofer and
//   sandbox do in their own namespaces. gVisor's gofer serves only the bundle's mounts instead.
// - The host filter is not the profile's allowlist (runsc needs ptrace, namespaces, mounts) but
//   a denylist of what runsc never needs (runsc_recipe); runsc then puts its own strict filters
//   on its sentry and gofer. The profile's allowlist goes inside, to gVisor's seccomp, which
//   checks each call of the script before gVisor serves it. There is no supervisor to ask: a
//   denied call gets EPERM (or, with action = "kill", ends the script with SIGSYS) and is not
//   listed in the result.
// - The script's rlimits (address space, processes, files) are gVisor's, in the bundle: on runsc
//   itself an address-space limit would stop its Go runtime, and a process limit its threads.
//   runsc keeps the core, locked-memory, message-queue and signal limits. The CPU-time limit is
//   the supervisor's (engine/sandbox.cpp, on_cpu_watch), over runsc's processes beyond runsc's
//   start: gVisor's would end the script with SIGXCPU, which runsc reports as exit code 152, as
//   the script could exit by itself. gVisor's and the host's on runsc stay as backstops, at
//   twice the limit and a second more.
// - Nothing masked on the sandbox's /proc: runsc mounts procfs in its namespaces, which a user
//   namespace may only do where a fully visible one exists. Only runsc sees that /proc.
// - The host user's namespace counts allow runsc's own namespaces (a few of each kind). The first
//   two, a user namespace where runsc is root and a mount namespace, init makes before it
//   executes runsc (inside/init.cpp): runsc would make the same by starting itself again.
// - The channels, the [policy] audit hook's and the cell driver's (sessions, MCP, batch, the
//   kernel): runsc passes the container no descriptor but stdio, so the hook and the driver
//   connect, before the script runs, to SOCK_SEQPACKET sockets the supervisor created and the
//   sandbox's setup bound at kGvisorPolicySocket and kGvisorControlSocket and listens on
//   (engine/policy_channel.hpp, engine/control_channel.hpp); runsc gets --host-uds=open, the
//   bundle a read-only bind of the sockets' directory (runsc binds no single socket). The
//   supervisor takes each first connection and closes the only listener left: a second connect
//   is refused. The channels are then what the host kernel's pairs give: records kept whole,
//   stamped by the host kernel, read by the supervisor alone; the script can add junk or stop
//   reporting, never take back what was sent. The hook lets the driver's connect through
//   (sitecustomize.py) where the channels are not sealed (below). A session keeps one warm
//   gVisor sandbox: a cell costs about a millisecond more than on the host kernel, not runsc's
//   start. Not yet as on the host kernel:
//   the interrupt a cell past its timeout gets is not passed on by runsc, so its sandbox is
//   killed and replaced. A cell's usage is that of runsc and every process under it (the sentry,
//   its gofer, the ptrace stubs that hold the script's address spaces), CPU time summed: the
//   script's cost as the host sees it, gVisor's work for it included. A fork server (zygote) is
//   refused: its jobs' channels are passed as descriptors.
//   --host-uds=open also lets the script connect to a host socket file in its mounts (in a
//   directory filesystem.ro lists; the workdir's overlay refuses it), which on the host kernel it
//   can do as well where the profile lets it make an AF_UNIX socket and connect it (can_connect);
//   it is passed only with a channel.
//   Where the profile allows no socket (strict, paranoid), the channels are sealed: seccomp sees
//   no address, so letting the hook's and the driver's socket() and connect() through gVisor's
//   filter lets the script's through too, to any listening host socket of that type in its
//   mounts. gVisor's filter then also allows exactly what the channels take (channel_calls in
//   gvisor.cpp: socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), connect, and
//   seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC), each only where the profile
//   lacks it), and a second filter, the seal (seal_recipe: libseccomp's program, compiled here),
//   denies those again as the profile denies (kill, or EPERM) and allows the rest, which the
//   first filter still answers: filters stack, the strictest answer wins, and none can be taken
//   off. sitecustomize.py, which runs before any line of the script, gets the seal and the
//   sockets to connect through PYSANDBOX_SEAL (kSealVariable, consumed before the script runs;
//   with it, what PYTHONPATH would have held beyond the sandbox's own modules, kept off it until
//   the seal is in: seal_argument) and, in this order: connects the hook's channel and the
//   driver's (the driver's first argument is kSealedControl; sitecustomize puts the connected
//   descriptor's number there), installs the seal on every thread (through the zygote's native
//   helper, inside/zygote_helper.cpp, which the plan writes into the sandbox for it and
//   sitecustomize makes outside the import system and lets go of: not ctypes, whose objects would
//   stay within the script's reach in _ctypes' state, with no import event), puts the rest of the
//   path on sys.path, and only then installs the hook.
//   All connections come before the seal, so nothing connects after it; nothing of the script
//   runs before it: until the seal, sys.path holds the sandbox's own modules and the host's
//   standard library and site directories alone (an environment's package is as hostile as the
//   script, and on PYTHONPATH it would come before the standard library: a package named
//   encodings, which Python imports at its start, would run first), and site reads .pth files
//   only in the host's site directories (the shipped profiles' -s leaves the user's out, and
//   that would be under the sandbox's new /tmp).
//   Fail closed: should a step fail, the interpreter ends (125) before the script, and the
//   supervisor confirms only what comes after the seal: the hook's "installed" record and the
//   driver's "ready" are written after it, by code that ran before anything of the script. A
//   driver that finds kSealedControl unreplaced (sitecustomize did not run) refuses to connect.
//   The seal is gVisor's to enforce (seccomp(2) with TSYNC under noNewPrivileges, Debian 12's
//   runsc included); a script that installs a filter of its own after it is denied the call.
//   Host FIFOs (--host-fifo=open), tried first, are unsound for this, a hostile script's way:
//   gVisor refuses to open a FIFO for writing on a read-only mount, so it must be bound
//   read-write; the only uid the sandbox can create it as is the one runsc maps to the script's
//   0, so the script owns it, may chmod it and open it for reading, and take the hook's records
//   before the supervisor does. A stream, too: the script's bytes glue to the hook's. Unlinking
//   it once opened leaves the descriptor, which the script can fchmod; only this gVisor's
//   refusal to reopen it through /proc/self/fd (Linux allows it) would then protect it. And with
//   the flag, opening for reading a host FIFO nobody held open hung the script, O_NONBLOCK too.
// - Network none and loopback are runsc's --network=none (gVisor's loopback alone, in the
//   sandbox's empty network namespace); the proxy is refused.

#include <string>
#include <string_view>
#include <vector>

#include "plan/seccomp.hpp"

namespace pysandbox {

struct Plan;
struct Profile;

namespace gvisor {

// How gVisor intercepts the script's calls. ptrace works wherever user namespaces do; kvm needs
// /dev/kvm (and hung in a nested VM), systrap is newer than Debian 12's runsc.
inline constexpr std::string_view kPlatform = "ptrace";

// runsc on the caller's PATH (else the standard directories): its absolute path. Throws SysError
// (exit 125) when there is none, saying how to install it, or when the first one found could be
// replaced by another user than root and the caller (owned by one, or in a directory others may
// write): it is the sandbox's kernel.
std::string find_runsc(const std::vector<std::string>& host_env);

// The filter on runsc and everything it starts, on the host: every call allowed but those runsc
// never makes and that widen the host kernel's surface most (bpf, io_uring, perf_event_open,
// userfaultfd, keys, modules, kexec...), which get EPERM.
seccomp::Recipe runsc_recipe();

// The recipe `inside` (the profile's allowlist) as an OCI linux.seccomp object's JSON text, for
// gVisor to enforce on the script: calls the recipe sends to the supervisor get `kill` ? the
// process killed : EPERM.
// `ptrace_allowed`: whether the profile lets the script ptrace (oci_action in gvisor.cpp says why
// that matters).
std::string oci_seccomp(const seccomp::Recipe& inside, bool kill, bool ptrace_allowed);

// Whether the profile's own filter lets the script make an AF_UNIX socket and connect it (the
// comment at the top).
bool can_connect(const Profile& profile);

// Whether channels on this profile need the seal: it allows the script no socket() or connect().
bool needs_seal(const Profile& profile);

// The seal: the calls the channels needed beyond the profile's allowlist (socket, connect,
// seccomp, each only where the profile lacks it, argument-matched as in gVisor's filter) denied
// as the profile denies (kill ? the process killed : EPERM), every other call allowed, for
// gVisor's first filter to answer.
seccomp::Recipe seal_recipe(const Profile& profile);

// The environment variable through which sitecustomize.py learns what to connect before the
// seal and the seal itself; it removes it before the script runs.
inline constexpr std::string_view kSealVariable = "PYSANDBOX_SEAL";
// The driver's first argument where sitecustomize.py connects its channel before the seal and
// puts the descriptor's number in its place; the driver refuses to run on it unreplaced.
inline constexpr std::string_view kSealedControl = "sealed";

// kSealVariable's value, one JSON array (a Python literal): [the native helper that installs it
// (kZygoteHelperFile in kSandboxPythonDir, which the plan then writes there), the seal's program
// (seal_recipe compiled by libseccomp) as its bytes, the hook's socket or "", the driver's socket
// or "", `later_path`]; empty where the profile needs no seal or there is no channel.
// `later_path`: what PYTHONPATH would hold after the sandbox's own modules (the environment's
// site directory, the caller's PYTHONPATH), which sitecustomize puts on sys.path only after the
// seal: on PYTHONPATH, ahead of the standard library, a package named as a module Python imports
// at its start (encodings, or _distutils_hack for the host's distutils-precedence.pth) would run
// before the seal, with socket() and connect() open.
std::string seal_argument(const Profile& profile, std::string_view hook_socket,
                          std::string_view control_socket, std::string_view later_path);

// Puts a planned sandbox on gVisor, as the comment at the top says. Called once the host-kernel
// plan is complete (make_plan). Throws SysError when runsc is missing, UsageError for what this
// kernel cannot do (the proxy; a fork server's sandbox).
void put_on_gvisor(Plan& plan, const std::vector<std::string>& host_env);

}  // namespace gvisor
}  // namespace pysandbox
