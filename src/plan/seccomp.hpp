#pragma once
// The system-call policy: an allowlist. Each profile allows the calls CPython and the libraries it
// promises need (the table in seccomp.cpp, each call once with the reason it is there) and
// nothing else. Compiled to BPF by libseccomp in the supervisor (compile), loaded by the
// interpreter's process just before execve (load).
//
// Everything not allowed goes to SECCOMP_RET_USER_NOTIF: the supervisor receives each denied call,
// counts it by name and answers with the errno that call expects from a kernel that refuses it
// (denial_errno), or, with action = "kill", ends the sandbox. That is how the result can list
// blocked calls deterministically instead of guessing from stderr. A few newer calls that libc
// tries before an older one (clone3, ...) get ENOSYS from the filter itself, without a record,
// so libc falls back as on an older kernel.

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/seccomp_table.hpp"

namespace pysandbox::seccomp {

// How much of the table a profile takes: the minimal set (computation only, no sockets, no
// file-metadata changes), the standard one (the standard library's needs), and, on top of either,
// process creation.
enum class Base { minimal, standard };

struct Settings {
    bool kill = false;  // end the sandbox on the first denied call (else an errno)
    Base base = Base::standard;
    bool allow_processes = false;    // fork/vfork/clone of processes (up to limits.max_procs)
    std::vector<std::string> deny;   // taken out of the allowlist
    std::vector<std::string> allow;  // added to the allowlist
};

// The socket families a script may create: always AF_UNIX (standard base); AF_INET and AF_INET6
// when it has a network (loopback, or the proxy on loopback).
enum class Sockets { unix_only, unix_and_inet };

// The calls the filter allows for these settings (unconditionally or with arguments checked:
// ioctl, prctl, clone, socket, personality), sorted.
std::vector<std::string> allowed_calls(const Settings& settings, Sockets sockets);

// True when libseccomp knows the name on this architecture.
bool is_known_syscall(std::string_view name);

// Large allocations are watched, not denied: an mmap (or mremap growing) by at least this many
// bytes goes to the supervisor, which measures the process's address space before letting the
// call continue. That is the kernel-side evidence that an allocation failed at the memory limit
// (result.cpp). Only where RLIMIT_AS is the limit (no memory cgroup).
struct AllocationWatch {
    std::uint64_t threshold;
};

// What a filter is made of before libseccomp turns it into BPF: its rules, in the order they
// are added. The same recipe and the same libseccomp make the same program.
struct Recipe {
    struct Rule {
        std::uint32_t action;  // SCMP_ACT_*
        int nr;
        // libseccomp's argument comparisons (scmp_arg_cmp): {arg, op, datum_a, datum_b}
        std::vector<std::array<std::uint64_t, 4>> args;
    };
    std::vector<Rule> rules;
    // What a call no rule names gets: the supervisor is asked (the default), or, for a sandbox
    // that nests others (nesting_recipe), SCMP_ACT_TRACE.
    std::uint32_t default_action = SCMP_ACT_NOTIFY;

    // Text that names the rules and the libseccomp that compiles them: equal text, equal program.
    std::string fingerprint() const;
};

// The policy's recipe. With `trace`, every call but the few the interpreter's process makes
// before its listener reaches the supervisor goes to the supervisor, which lets through what
// `settings` would and records everything (--trace-syscalls).
Recipe recipe(const Settings& settings, Sockets sockets, std::optional<AllocationWatch> watch,
              bool trace = false);

// The filter of a sandbox that creates sandboxes inside itself (a fork server's zygote), for jobs
// whose own filter is made from `jobs`. It allows everything `jobs` allows (filters stack and the
// strictest answer wins, so the outer one must never refuse what a job may do) plus what setting
// up a job takes: clone with namespace flags, unshare, mount and umount2, sethostname, rlimits,
// capset, the prctls of the setup, landlock_*, seccomp, pidfd_open, SIOCSIFFLAGS, wait4/waitid.
// Still refused: setns, the new mount API, pivot_root, bpf, keyctl, perf_event_open,
// userfaultfd, io_uring, ptrace, process_vm_*, and everything else no rule names.
//
// It has no listener (a task whose stack holds one cannot add a filter with another: EBUSY), and
// its default is SCMP_ACT_TRACE, not an errno: with no tracer attached (ptrace is refused
// throughout) a traced call fails with ENOSYS, and TRACE ranks below a job filter's USER_NOTIF,
// so a job's denied call still reaches the supervisor and is recorded. An outer ERRNO would
// outrank it and hide the denial.
Recipe nesting_recipe(const Recipe& jobs);

// Compiles a recipe to a BPF program (libseccomp). Throws SysError.
std::vector<sock_filter> compile(const Recipe& recipe);
inline std::vector<sock_filter> compile(const Settings& settings, Sockets sockets,
                                        std::optional<AllocationWatch> watch, bool trace = false) {
    return compile(recipe(settings, sockets, watch, trace));
}

// Programs compiled ahead of time: compiling costs a run half a millisecond, and the shipped
// profiles' programs are known when pysandbox is built (tools/prepare_seccomp.cpp writes them to
// share/pysandbox/seccomp). A file holds the recipe's fingerprint and the program; it is used
// only for a recipe with exactly that fingerprint.
void write_prepared(const std::filesystem::path& dir, const Recipe& recipe,
                    const std::vector<sock_filter>& program);
// The program prepared in `dir` for `recipe`, or nothing (none there, or not for this recipe).
std::optional<std::vector<sock_filter>> read_prepared(const std::filesystem::path& dir,
                                                      const Recipe& recipe);

// In the supervisor: the name of syscall `nr` on audit architecture `arch`; "syscall N" when
// libseccomp has none.
std::string syscall_name(std::uint32_t arch, int nr);

// The errno a denied call gets: ENOTTY for an ioctl, EINVAL for a prctl, EAFNOSUPPORT for a
// socket family, ENOSYS for a call newer than libseccomp knows (or one of the newer calls the
// table names), EPERM for the rest.
int denial_errno(std::uint32_t arch, int nr);

// Whether a notification is the allocation watch (mmap, mremap), not a denial.
bool is_allocation_watch(std::uint32_t arch, int nr);

// What a program answers for one call (the kernel's SECCOMP_RET_* value, data included): a
// classic-BPF evaluator over seccomp_data, for --trace-syscalls and the tests.
std::uint32_t evaluate(std::span<const sock_filter> program, const seccomp_data& data);

}  // namespace pysandbox::seccomp
