#include "engine/syscall_watch.hpp"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "plan/seccomp.hpp"
#include "sys/bounded_counts.hpp"
#include "sys/errors.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {
namespace {

// VmSize of process `pid` (host pid space), in bytes; 0 when it cannot be read.
std::uint64_t address_space(pid_t pid) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
    sys::UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
    char text[4096];
    const ssize_t n = fd ? ::read(fd.get(), text, sizeof text - 1) : -1;
    if (n <= 0) return 0;
    text[n] = '\0';
    const char* line = std::strstr(text, "\nVmSize:");
    return line ? std::strtoull(line + 8, nullptr, 10) * 1024 : 0;
}

// "errno ENOSYS" for a trace entry.
std::string errno_verdict(int error) {
    const char* name = ::strerrorname_np(error);
    return std::string("errno ") + (name ? name : std::to_string(error).c_str());
}

}  // namespace

SyscallWatch::SyscallWatch(const Plan& plan) : plan_(plan), request_size_(sizeof(seccomp_notif)) {
    check_sys(-std::abs(seccomp_notify_alloc(&request_, &response_)), "seccomp_notify_alloc");
    seccomp_notif_sizes sizes{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0)
        request_size_ = std::max<std::size_t>(request_size_, sizes.seccomp_notif);
}

SyscallWatch::~SyscallWatch() {
    seccomp_notify_free(request_, response_);
}

bool SyscallWatch::handle(int listener) {
    // The kernel refuses (EINVAL) a request buffer that is not zeroed.
    std::memset(request_, 0, request_size_);
    if (seccomp_notify_receive(listener, request_) != 0) return false;
    const seccomp_data& data = request_->data;
    std::string name = seccomp::syscall_name(data.arch, data.nr);
    if (plan_.trace_syscalls) return trace(listener, name);
    if (seccomp::is_allocation_watch(data.arch, data.nr)) {
        watch_allocation(listener);
        return false;
    }
    return deny(listener, name);
}

// A call outside the allowlist: counted, then refused or the end of the sandbox.
bool SyscallWatch::deny(int listener, const std::string& name) {
    count_bounded(blocked_, name, std::string("(other system calls)"));
    if (plan_.verbose) std::fprintf(stderr, "pysandbox: denied %s\n", name.c_str());
    if (plan_.profile.seccomp.kill) {
        if (killing_syscall_.empty()) killing_syscall_ = name;
        return true;
    }
    answer(listener, seccomp::denial_errno(request_->data.arch, request_->data.nr), false);
    return false;
}

// mmap or mremap of at least the watch's threshold: with RLIMIT_AS as the limit the kernel will
// refuse it exactly when the address space plus the request exceeds the limit. Measured now,
// while the caller waits; the call then goes on as the kernel decides.
void SyscallWatch::watch_allocation(int listener) {
    const seccomp_data& data = request_->data;
    const std::uint64_t requested =
        data.nr == SYS_mmap ? data.args[1]
                            : (data.args[2] > data.args[1] ? data.args[2] - data.args[1] : 0);
    const std::uint64_t limit = plan_.profile.limits.memory;
    const std::uint64_t used = address_space(static_cast<pid_t>(request_->pid));
    if (used > 0 && requested > limit - std::min(limit, used)) allocation_refused_ = true;
    answer(listener, 0, true);
}

// --trace-syscalls: every call, answered as the profile's filter answers it.
bool SyscallWatch::trace(int listener, const std::string& name) {
    const std::uint32_t action = seccomp::evaluate(plan_.profile_seccomp_program, request_->data);
    Outcome::TracedCall& entry = traced_[name];
    ++entry.count;
    switch (action & SECCOMP_RET_ACTION_FULL) {
        case SECCOMP_RET_ALLOW:
            entry.verdict = "allowed";
            answer(listener, 0, true);
            return false;
        case SECCOMP_RET_ERRNO:
            entry.verdict = errno_verdict(static_cast<int>(action & SECCOMP_RET_DATA));
            answer(listener, static_cast<int>(action & SECCOMP_RET_DATA), false);
            return false;
        case SECCOMP_RET_USER_NOTIF:
            if (seccomp::is_allocation_watch(request_->data.arch, request_->data.nr)) {
                entry.verdict = "allowed";
                watch_allocation(listener);
                return false;
            }
            entry.verdict = "denied";
            return deny(listener, name);
        default:  // a kill: another ABI
            entry.verdict = "killed";
            if (killing_syscall_.empty()) killing_syscall_ = name;
            return true;
    }
}

void SyscallWatch::answer(int listener, int error, bool let_through) {
    std::memset(response_, 0, sizeof *response_);
    response_->id = request_->id;
    response_->error = -error;
    if (let_through) response_->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    seccomp_notify_respond(listener, response_);  // ENOENT: the caller died meanwhile
}

void SyscallWatch::report(Outcome& outcome) const {
    outcome.blocked_syscalls = blocked_;
    outcome.killing_syscall = killing_syscall_;
    outcome.allocation_refused = allocation_refused_;
    if (plan_.trace_syscalls) outcome.traced_syscalls = traced_;
}

void SyscallWatch::take(Outcome& outcome) {
    report(outcome);
    blocked_.clear();
    allocation_refused_ = false;
}

}  // namespace pysandbox
