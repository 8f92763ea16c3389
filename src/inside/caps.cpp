#include "inside/caps.hpp"

#include <linux/keyctl.h>
#include <linux/securebits.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

namespace pysandbox::caps {
namespace {

struct CapFree {
    void operator()(cap_t caps) const noexcept { cap_free(caps); }
};
using CapPtr = std::unique_ptr<std::remove_pointer_t<cap_t>, CapFree>;

// Root's secure bits for the rest of this process tree: uid 0 gains nothing on exec, and setuid
// transitions change nothing; locked, so the script cannot undo them.
constexpr unsigned long kSecureBits =
    SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
    SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

}  // namespace

// The system calls themselves, not glibc's wrappers: a wrapper in a process that was cloned from a
// multithreaded one (the kernel program, with libzmq's threads) signals threads that are not in
// the child and waits for them forever. The child has one thread; the call changes just that one.
int step_switch_ids(ChildContext& ctx) noexcept {
    const IdMap& ids = ctx.plan.ids;
    if (::syscall(SYS_setresgid, ids.inner_gid, ids.inner_gid, ids.inner_gid) != 0)
        return step_fail(ctx, "setresgid(%u)", ids.inner_gid);
    if (::syscall(SYS_setresuid, ids.inner_uid, ids.inner_uid, ids.inner_uid) != 0)
        return step_fail(ctx, "setresuid(%u)", ids.inner_uid);
    return 0;
}

int step_join_session_keyring(ChildContext& ctx) noexcept {
    // A fresh anonymous session keyring: the caller's keys are out of reach even for a profile
    // that allows keyctl().
    if (::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr) < 0)
        return step_fail(ctx, "keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)");
    return 0;
}

int step_set_no_new_privs(ChildContext& ctx) noexcept {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return step_fail(ctx, "prctl(PR_SET_NO_NEW_PRIVS, 1)");
    return 0;
}

int step_drop_capabilities(ChildContext& ctx) noexcept {
    if (::prctl(PR_SET_SECUREBITS, kSecureBits, 0, 0, 0) != 0)
        return step_fail(ctx, "prctl(PR_SET_SECUREBITS, 0x%lx)", kSecureBits);
    const int last = static_cast<int>(cap_max_bits());
    for (int cap = 0; cap < last; ++cap)
        if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            return step_fail(ctx, "prctl(PR_CAPBSET_DROP, %d)", cap);
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
        return step_fail(ctx, "prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
    CapPtr empty(cap_init());
    if (!empty || cap_set_proc(empty.get()) != 0) return step_fail(ctx, "capset(all sets empty)");

    // Read everything back: a capability that survived is a failed setup, not a warning.
    CapPtr now(cap_get_proc());
    if (!now || cap_compare(now.get(), empty.get()) != 0) {
        errno = EPERM;
        return step_fail(ctx, "capget: effective/permitted/inheritable not empty after drop");
    }
    for (int cap = 0; cap < last; ++cap) {
        if (::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) > 0) {
            errno = EPERM;
            return step_fail(ctx, "PR_CAPBSET_READ: capability %d still in the bounding set", cap);
        }
        if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) > 0) {
            errno = EPERM;
            return step_fail(ctx, "PR_CAP_AMBIENT_IS_SET: capability %d still ambient", cap);
        }
    }
    return 0;
}

}  // namespace pysandbox::caps
