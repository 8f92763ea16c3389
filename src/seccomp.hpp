#pragma once
// The system-call policy: what a script may not ask the kernel for. Compiled to BPF by libseccomp
// in the supervisor (compile), loaded by the interpreter's process just before execve (load).
//
// Every denial goes through SECCOMP_RET_USER_NOTIF: the supervisor receives each denied call,
// counts it by name and answers EPERM (or, with action = "kill", ends the sandbox). That is how
// the result can list blocked calls deterministically instead of guessing from stderr.

#include <linux/filter.h>

#include <string>
#include <string_view>
#include <vector>

namespace pysandbox::seccomp {

struct Settings {
    bool kill = false;               // end the sandbox on the first denied call (else EPERM)
    bool allow_processes = false;    // fork/vfork/clone without CLONE_THREAD
    std::vector<std::string> deny;   // added to the default denials
    std::vector<std::string> allow;  // removed from the default denials
};

// The calls denied outright, with the reason (for docs and `profile show`).
struct Denial {
    const char* name;
    const char* why;
};
const std::vector<Denial>& default_denials();

// True when libseccomp knows the name on this architecture.
bool is_known_syscall(std::string_view name);

// The socket families a script may create: always AF_UNIX; AF_INET and AF_INET6 when it has a
// network (loopback, or the proxy on loopback).
enum class Sockets { unix_only, unix_and_inet };

// Compiles the policy to a BPF program. Throws SysError.
std::vector<sock_filter> compile(const Settings& settings, Sockets sockets);

// In the child: loads the program with a user-notification listener. Returns the listener fd or
// -errno. Needs no_new_privs.
int load(const std::vector<sock_filter>& program) noexcept;

// In the supervisor: the name of syscall `nr` on audit architecture `arch`.
std::string syscall_name(std::uint32_t arch, int nr);

}  // namespace pysandbox::seccomp
