// Each shipped profile's seccomp filter, compiled as a run compiles it and asked about sample
// calls with the BPF evaluator: allowed, denied (to the supervisor), ENOSYS from the filter,
// unknown numbers, other ABIs, argument-filtered calls, the allocation watch. And the evaluator
// itself against the kernel.

#include <doctest/doctest.h>

#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/sockios.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "plan/gvisor.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "plan/seccomp.hpp"
#include "sys/errors.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
namespace seccomp = pysandbox::seccomp;
using pysandbox::test::kShippedProfiles;

namespace {

constexpr std::uint64_t kWatch = 16ULL << 20;
// What the build prepared (share/pysandbox/seccomp in the build tree).
const fs::path kPrepared = PYSANDBOX_BUILD_SECCOMP;

struct Filter {
    std::vector<sock_filter> program;

    // The filter's action (SECCOMP_RET_* without its data) for syscall `nr` with `args`.
    std::uint32_t action(int nr, std::initializer_list<std::uint64_t> args = {},
                         std::uint32_t arch = AUDIT_ARCH_X86_64) const {
        return seccomp::evaluate(program, data(nr, args, arch)) & SECCOMP_RET_ACTION_FULL;
    }
    std::uint32_t errno_of(int nr, std::initializer_list<std::uint64_t> args = {}) const {
        return seccomp::evaluate(program, data(nr, args, AUDIT_ARCH_X86_64)) & SECCOMP_RET_DATA;
    }

    static seccomp_data data(int nr, std::initializer_list<std::uint64_t> args,
                             std::uint32_t arch) {
        seccomp_data d{};
        d.nr = nr;
        d.arch = arch;
        std::size_t i = 0;
        for (std::uint64_t arg : args) d.args[i++] = arg;
        return d;
    }
};

Filter compiled(const std::string& profile_name, bool network = false) {
    const pysandbox::Profile profile =
        pysandbox::load_profile(profile_name, std::vector<fs::path>{kShippedProfiles});
    const auto sockets = network ? seccomp::Sockets::unix_and_inet : seccomp::Sockets::unix_only;
    return {seccomp::compile(profile.seccomp, sockets, seccomp::AllocationWatch{kWatch})};
}

constexpr std::uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t kNotify = SECCOMP_RET_USER_NOTIF;
constexpr std::uint32_t kErrno = SECCOMP_RET_ERRNO;
constexpr std::uint32_t kKill = SECCOMP_RET_KILL_PROCESS;

}  // namespace

TEST_SUITE("seccomp allowlist") {
    TEST_CASE("every shipped profile: ordinary calls pass, the kernel's interfaces are refused") {
        for (const char* name : {"strict", "default", "datascience", "network"}) {
            CAPTURE(name);
            const Filter f = compiled(name, std::string(name) == "network");
            for (int nr : {SYS_read, SYS_write, SYS_openat, SYS_close, SYS_futex, SYS_brk,
                           SYS_munmap, SYS_exit_group, SYS_execve, SYS_rt_sigaction, SYS_getrandom,
                           SYS_newfstatat, SYS_clock_nanosleep})
                CHECK_MESSAGE(f.action(nr) == kAllow, nr);
            for (int nr : {SYS_mount,
                           SYS_umount2,
                           SYS_pivot_root,
                           SYS_unshare,
                           SYS_setns,
                           SYS_ptrace,
                           SYS_bpf,
                           SYS_perf_event_open,
                           SYS_keyctl,
                           SYS_add_key,
                           SYS_init_module,
                           SYS_kexec_load,
                           SYS_userfaultfd,
                           SYS_io_uring_setup,
                           SYS_modify_ldt,
                           SYS_memfd_create,
                           SYS_open_by_handle_at,
                           SYS_chroot,
                           SYS_reboot,
                           SYS_swapon,
                           SYS_setuid,
                           SYS_capset,
                           SYS_shmget,
                           SYS_msgget,
                           447 /* memfd_secret */})
                CHECK_MESSAGE(f.action(nr) == kNotify, nr);
        }
    }

    TEST_CASE("numbers newer than the policy, and other ABIs") {
        const Filter f = compiled("default");
        // statmount ... file_setattr, and beyond: denied (the supervisor answers ENOSYS).
        for (int nr = 457; nr <= 600; ++nr) CHECK_MESSAGE(f.action(nr) == kNotify, nr);
        CHECK(f.action(1000) == kNotify);
        CHECK(f.action(4095) == kNotify);
        // x32 (bit 30 of the number) and i386 (another audit arch) end the process.
        CHECK(f.action(SYS_read | 0x40000000) == kKill);
        CHECK(f.action(0x40000000 + 512) == kKill);
        CHECK(f.action(3 /* i386 read */, {}, AUDIT_ARCH_I386) == kKill);
        CHECK(f.action(11 /* i386 execve */, {}, AUDIT_ARCH_I386) == kKill);
        CHECK(seccomp::denial_errno(AUDIT_ARCH_X86_64, 460) == ENOSYS);
        CHECK(seccomp::denial_errno(AUDIT_ARCH_X86_64, 5000) == ENOSYS);
    }

    TEST_CASE("calls libc falls back from get ENOSYS from the filter itself") {
        const Filter f = compiled("default");
        for (int nr : {SYS_clone3, 437 /* openat2 */, 441 /* epoll_pwait2 */, 449 /* futex_waitv */,
                       452 /* fchmodat2 */}) {
            CAPTURE(nr);
            CHECK(f.action(nr) == kErrno);
            CHECK(f.errno_of(nr) == ENOSYS);
        }
    }

    TEST_CASE("ioctl: the interpreter's own requests only; TIOCSTI and TIOCLINUX are refused") {
        for (const char* name : {"strict", "default", "datascience"}) {
            CAPTURE(name);
            const Filter f = compiled(name);
            for (unsigned long request : {TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX})
                CHECK(f.action(SYS_ioctl, {1, request}) == kAllow);
            for (unsigned long request : {TIOCSTI, TIOCLINUX, TIOCSCTTY, TIOCCONS, TCSETS})
                CHECK(f.action(SYS_ioctl, {0, request}) == kNotify);
            // The kernel reads the request as 32 bits: the upper half changes nothing.
            CHECK(f.action(SYS_ioctl, {0, 0xdead00000000ULL | TIOCSTI}) == kNotify);
            CHECK(f.action(SYS_ioctl, {0, 0xdead00000000ULL | TCGETS}) == kAllow);
        }
        CHECK(seccomp::denial_errno(AUDIT_ARCH_X86_64, SYS_ioctl) == ENOTTY);
    }

    TEST_CASE("clone: threads, processes only where allowed, never a new namespace") {
        constexpr std::uint64_t kThread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                                          CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS;
        constexpr std::uint64_t kFork = CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID | SIGCHLD;
        const Filter normal = compiled("default");
        CHECK(normal.action(SYS_clone, {kThread}) == kAllow);
        CHECK(normal.action(SYS_clone, {kFork}) == kNotify);
        CHECK(normal.action(SYS_fork) == kNotify);
        CHECK(normal.action(SYS_vfork) == kNotify);
        const Filter science = compiled("datascience");
        CHECK(science.action(SYS_clone, {kThread}) == kAllow);
        CHECK(science.action(SYS_clone, {kFork}) == kAllow);
        CHECK(science.action(SYS_fork) == kAllow);
        CHECK(science.action(SYS_vfork) == kAllow);
        for (std::uint64_t flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET,
                                   CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP}) {
            CHECK(normal.action(SYS_clone, {kThread | flag}) == kNotify);
            CHECK(science.action(SYS_clone, {kFork | flag}) == kNotify);
        }
    }

    TEST_CASE("socket families follow the network mode; strict has no sockets") {
        const Filter offline = compiled("default");
        CHECK(offline.action(SYS_socket, {AF_UNIX, SOCK_STREAM}) == kAllow);
        CHECK(offline.action(SYS_socketpair, {AF_UNIX, SOCK_STREAM}) == kAllow);
        for (std::uint64_t family : {AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, 40 /* vsock */})
            CHECK(offline.action(SYS_socket, {family, SOCK_STREAM}) == kNotify);
        CHECK(offline.action(SYS_socket, {(1ULL << 32) | AF_UNIX, SOCK_STREAM}) == kNotify);
        const Filter online = compiled("network", true);
        CHECK(online.action(SYS_socket, {AF_INET, SOCK_STREAM}) == kAllow);
        CHECK(online.action(SYS_socket, {AF_INET6, SOCK_STREAM}) == kAllow);
        CHECK(online.action(SYS_socket, {AF_NETLINK, SOCK_RAW}) == kNotify);
        const Filter strict = compiled("strict");
        CHECK(strict.action(SYS_socket, {AF_UNIX, SOCK_STREAM}) == kNotify);
        CHECK(strict.action(SYS_socketpair, {AF_UNIX, SOCK_STREAM}) == kNotify);
        CHECK(strict.action(SYS_chmod) == kNotify);
        CHECK(strict.action(SYS_symlink) == kNotify);
        CHECK(seccomp::denial_errno(AUDIT_ARCH_X86_64, SYS_socket) == EAFNOSUPPORT);
    }

    TEST_CASE("gVisor's seal: exactly the channels' calls a profile lacks, denied as it denies") {
        // paranoid (strict on gVisor) kills; the seal denies what the channels needed beyond
        // the allowlist, argument for argument, and leaves everything else to gVisor's filter.
        const auto load = [](const char* name) {
            return pysandbox::load_profile(name, std::vector<fs::path>{kShippedProfiles});
        };
        const pysandbox::Profile paranoid = load("paranoid");
        REQUIRE(pysandbox::gvisor::needs_seal(paranoid));
        const Filter seal{seccomp::compile(pysandbox::gvisor::seal_recipe(paranoid))};
        constexpr std::uint64_t kChannel = SOCK_SEQPACKET | SOCK_CLOEXEC;
        CHECK(seal.action(SYS_socket, {AF_UNIX, kChannel, 0}) == SECCOMP_RET_KILL_PROCESS);
        CHECK(seal.action(SYS_connect, {3, 0, 110}) == SECCOMP_RET_KILL_PROCESS);
        CHECK(seal.action(SYS_seccomp, {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC}) ==
              SECCOMP_RET_KILL_PROCESS);
        // Not let through for the channels: gVisor's own filter answers them.
        CHECK(seal.action(SYS_socket, {AF_UNIX, SOCK_STREAM, 0}) == kAllow);
        CHECK(seal.action(SYS_seccomp, {SECCOMP_SET_MODE_FILTER, 0}) == kAllow);
        for (int nr : {SYS_read, SYS_write, SYS_getpid, SYS_mmap, SYS_openat})
            CHECK(seal.action(nr) == kAllow);
        // strict with errno: EPERM, as gVisor's filter answers (Debian 12's runsc has no other).
        pysandbox::Profile errno_profile = paranoid;
        errno_profile.seccomp.kill = false;
        const Filter answered{seccomp::compile(pysandbox::gvisor::seal_recipe(errno_profile))};
        CHECK(answered.action(SYS_connect) == SECCOMP_RET_ERRNO);
        CHECK(answered.errno_of(SYS_connect) == EPERM);
        // default allows AF_UNIX sockets and connect: no seal, nothing let through.
        const pysandbox::Profile normal = load("default");
        CHECK_FALSE(pysandbox::gvisor::needs_seal(normal));
        CHECK(pysandbox::gvisor::seal_argument(normal, "/hook", "/control", "").empty());
        // Without a channel there is nothing to seal.
        CHECK(pysandbox::gvisor::seal_argument(paranoid, "", "", "/sandbox/.packages").empty());
        const std::string argument = pysandbox::gvisor::seal_argument(paranoid, "/hook", "", "");
        CHECK(argument.starts_with("[\"/sandbox/.pysandbox/pysandbox_zygote_helper.so\",["));
        CHECK(argument.ends_with("],\"/hook\",\"\",\"\"]"));
        // What PYTHONPATH would hold beyond the sandbox's own modules goes on sys.path after the
        // seal: before it, a package named as a standard module would run with the calls open.
        CHECK(pysandbox::gvisor::seal_argument(paranoid, "", "/control", "/sandbox/.packages:/x")
                  .ends_with("],\"\",\"/control\",\"/sandbox/.packages:/x\"]"));
        // The caller's PYTHONPATH may not be UTF-8, which JSON cannot hold: refused, clearly.
        CHECK_THROWS_AS(pysandbox::gvisor::seal_argument(paranoid, "/hook", "", "/x\xff"),
                        pysandbox::UsageError);
    }

    TEST_CASE("prctl and personality: the harmless uses only") {
        const Filter f = compiled("default");
        for (unsigned long option : {PR_SET_NAME, PR_GET_NAME, PR_CAPBSET_READ})
            CHECK(f.action(SYS_prctl, {option}) == kAllow);
        for (unsigned long option : {PR_SET_SECCOMP, PR_SET_DUMPABLE, PR_SET_MM,
                                     PR_SET_NO_NEW_PRIVS, PR_SET_PTRACER, PR_CAP_AMBIENT})
            CHECK(f.action(SYS_prctl, {option}) == kNotify);
        CHECK(f.action(SYS_personality, {0xffffffffULL}) == kAllow);
        CHECK(f.action(SYS_personality, {READ_IMPLIES_EXEC}) == kNotify);
        CHECK(f.action(SYS_personality, {ADDR_NO_RANDOMIZE}) == kNotify);
        CHECK(seccomp::denial_errno(AUDIT_ARCH_X86_64, SYS_prctl) == EINVAL);
    }

    TEST_CASE("big allocations are watched, not denied") {
        const Filter f = compiled("default");
        CHECK(f.action(SYS_mmap, {0, kWatch - 1}) == kAllow);
        CHECK(f.action(SYS_mmap, {0, kWatch}) == kNotify);
        CHECK(f.action(SYS_mremap, {0, 4096, kWatch - 1}) == kAllow);
        CHECK(f.action(SYS_mremap, {0, 4096, kWatch}) == kNotify);
        CHECK(seccomp::is_allocation_watch(AUDIT_ARCH_X86_64, SYS_mmap));
        CHECK_FALSE(seccomp::is_allocation_watch(AUDIT_ARCH_X86_64, SYS_read));
    }

    TEST_CASE("a profile's allow and deny change the list") {
        seccomp::Settings settings;
        settings.allow = {"inotify_init1", "ioctl"};
        settings.deny = {"getcwd"};
        const Filter f{seccomp::compile(settings, seccomp::Sockets::unix_only, std::nullopt)};
        CHECK(f.action(SYS_inotify_init1) == kAllow);
        CHECK(f.action(SYS_getcwd) == kNotify);
        CHECK(f.action(SYS_ioctl, {0, TIOCSTI}) == kAllow);    // what widening means
        CHECK(f.action(SYS_mmap, {0, 1ULL << 40}) == kAllow);  // no watch: cgroup mode
    }

    TEST_CASE("the published counts (man page, README) are the shipped profiles'") {
        auto count = [](const char* name, seccomp::Sockets sockets) {
            const auto profile =
                pysandbox::load_profile(name, std::vector<fs::path>{kShippedProfiles});
            return seccomp::allowed_calls(profile.seccomp, sockets).size();
        };
        CHECK(count("strict", seccomp::Sockets::unix_only) == 118);
        CHECK(count("default", seccomp::Sockets::unix_only) == 166);
        CHECK(count("datascience", seccomp::Sockets::unix_only) == 173);
        CHECK(count("network", seccomp::Sockets::unix_and_inet) == 166);
        // The targets the allowlist was made to: under half of Docker's default profile.
        CHECK(count("strict", seccomp::Sockets::unix_only) <= 130);
        CHECK(count("default", seccomp::Sockets::unix_only) <= 200);
        CHECK(count("datascience", seccomp::Sockets::unix_only) <= 220);
    }

    TEST_CASE("every row of the table is a call libseccomp knows, listed once") {
        std::vector<std::string> names;
        for (const auto& row : seccomp::allowlist_table()) {
            CAPTURE(row.name);
            CHECK(seccomp::is_known_syscall(row.name));
            CHECK(std::string(row.reason).size() > 3);
            names.push_back(row.name);
        }
        std::ranges::sort(names);
        CHECK(std::ranges::adjacent_find(names) == names.end());
    }
}

TEST_SUITE("seccomp programs prepared by the build") {
    bool same(const std::vector<sock_filter>& a, const std::vector<sock_filter>& b) {
        return a.size() == b.size() &&
               std::memcmp(a.data(), b.data(), a.size() * sizeof(sock_filter)) == 0;
    }

    TEST_CASE("each shipped profile's program is there, and is the one a run would compile") {
        for (const char* name : {"strict", "default", "datascience", "network"}) {
            const pysandbox::Profile profile =
                pysandbox::load_profile(name, std::vector<fs::path>{kShippedProfiles});
            for (bool memory_cgroup : {false, true}) {
                CAPTURE(name);
                CAPTURE(memory_cgroup);
                const auto recipe = pysandbox::seccomp_recipe(profile, memory_cgroup);
                const auto prepared = seccomp::read_prepared(kPrepared, recipe);
                REQUIRE(prepared);
                CHECK(same(*prepared, seccomp::compile(recipe)));
            }
        }
    }

    TEST_CASE("a program is used only for exactly its recipe") {
        pysandbox::Profile profile =
            pysandbox::load_profile("default", std::vector<fs::path>{kShippedProfiles});
        // --memory moves the allocation watch (which a memory cgroup does without); a profile's
        // allow adds a rule: neither has a prepared program.
        profile.limits.memory *= 2;
        CHECK_FALSE(seccomp::read_prepared(kPrepared, pysandbox::seccomp_recipe(profile, false)));
        CHECK(seccomp::read_prepared(kPrepared, pysandbox::seccomp_recipe(profile, true)));
        profile.seccomp.allow.push_back("mount");
        CHECK_FALSE(seccomp::read_prepared(kPrepared, pysandbox::seccomp_recipe(profile, true)));
    }

    TEST_CASE("a file whose fingerprint or program is not a recipe's own is not used") {
        const pysandbox::test::TempDir dir;
        const pysandbox::Profile profile =
            pysandbox::load_profile("strict", std::vector<fs::path>{kShippedProfiles});
        const auto recipe = pysandbox::seccomp_recipe(profile, true);
        const auto program = seccomp::compile(recipe);
        seccomp::write_prepared(dir.path(), recipe, program);
        REQUIRE(seccomp::read_prepared(dir.path(), recipe));
        const fs::path file = fs::directory_iterator(dir.path())->path();
        const std::string good = [&] {
            std::ifstream in(file, std::ios::binary);
            return std::string(std::istreambuf_iterator<char>(in), {});
        }();
        auto rewrite = [&](const std::string& content) {
            pysandbox::test::write_file(file, content);
            return seccomp::read_prepared(dir.path(), recipe);
        };
        std::string other = good;
        other[good.find("optimize")] = 'O';  // another recipe, under this recipe's file name
        CHECK_FALSE(rewrite(other));
        CHECK_FALSE(rewrite(good.substr(0, good.size() - 3)));  // not whole instructions
        CHECK_FALSE(rewrite(good.substr(0, recipe.fingerprint().size() + 1)));  // no program
        CHECK(rewrite(good));
    }
}

TEST_SUITE("seccomp evaluator") {
    // The evaluator against the kernel: a filter loaded in a child, the same calls made there.
    TEST_CASE("answers what the kernel answers") {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        REQUIRE(ctx != nullptr);
        for (int nr : {SYS_exit_group, SYS_exit, SYS_write})
            REQUIRE(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) == 0);
        REQUIRE(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOTTY), SYS_ioctl, 1,
                                 SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, TIOCSTI)) == 0);
        REQUIRE(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SYS_ioctl, 1,
                                 SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffULL, TCGETS)) == 0);
        REQUIRE(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) == 0);
        int pipe_fds[2];
        REQUIRE(::pipe(pipe_fds) == 0);
        REQUIRE(seccomp_export_bpf(ctx, pipe_fds[1]) == 0);
        ::close(pipe_fds[1]);
        std::vector<sock_filter> program;
        sock_filter insn;
        while (::read(pipe_fds[0], &insn, sizeof insn) == sizeof insn) program.push_back(insn);
        ::close(pipe_fds[0]);
        const Filter f{program};
        CHECK(f.action(SYS_write) == kAllow);
        CHECK(f.action(SYS_getpid) == kErrno);
        CHECK(f.errno_of(SYS_getpid) == EPERM);
        CHECK(f.errno_of(SYS_ioctl, {0, TIOCSTI}) == ENOTTY);
        CHECK(f.action(SYS_ioctl, {0, TCGETS}) == kAllow);

        // The kernel, in a child: the same answers, as the child's exit status tells.
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            // exit_group, not _exit: a sanitizer's _exit runs its leak check, which needs calls
            // this filter refuses.
            const auto leave = [](int code) { ::syscall(SYS_exit_group, code); };
            if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0) leave(90);
            const long pid = ::syscall(SYS_getpid);
            const int pid_errno = errno;
            termios t;
            const long tiocsti = ::syscall(SYS_ioctl, 0, TIOCSTI, &t);
            const int tiocsti_errno = errno;
            leave(pid == -1 && pid_errno == EPERM && tiocsti == -1 && tiocsti_errno == ENOTTY ? 0
                                                                                              : 91);
        }
        seccomp_release(ctx);
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
}

namespace {

// A job's recipe and the recipe of the zygote that nests it, for a shipped profile.
struct Nesting {
    seccomp::Recipe job;
    Filter job_filter;
    Filter outer;
};

Nesting nesting(const std::string& profile_name) {
    const pysandbox::Profile profile =
        pysandbox::load_profile(profile_name, std::vector<fs::path>{kShippedProfiles});
    seccomp::Recipe job = seccomp::recipe(profile.seccomp, seccomp::Sockets::unix_only,
                                          seccomp::AllocationWatch{kWatch});
    Filter job_filter{seccomp::compile(job)};
    Filter outer{seccomp::compile(seccomp::nesting_recipe(job))};
    return {std::move(job), std::move(job_filter), std::move(outer)};
}

constexpr std::uint32_t kTrace = SECCOMP_RET_TRACE;

// The kernel takes the strictest action of a stack: KILL > TRAP > ERRNO > USER_NOTIF > TRACE >
// LOG > ALLOW (seccomp(2)). A smaller number here is stricter.
int strictness(std::uint32_t action) {
    switch (action) {
        case SECCOMP_RET_KILL_PROCESS: return 0;
        case SECCOMP_RET_KILL_THREAD: return 1;
        case SECCOMP_RET_TRAP: return 2;
        case SECCOMP_RET_ERRNO: return 3;
        case SECCOMP_RET_USER_NOTIF: return 4;
        case SECCOMP_RET_TRACE: return 5;
        case SECCOMP_RET_LOG: return 6;
        default: return 7;
    }
}

}  // namespace

TEST_SUITE("seccomp nesting filter (batch --fork's zygote)") {
    TEST_CASE("the job's setup passes; the kernel's other interfaces are refused") {
        for (const char* name : {"strict", "default", "datascience"}) {
            CAPTURE(name);
            const Nesting n = nesting(name);
            const std::uint64_t job_clone = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
                                            CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS |
                                            CLONE_NEWCGROUP | SIGCHLD;
            CHECK(n.outer.action(SYS_clone, {job_clone}) == kAllow);
            for (int nr : {SYS_unshare, SYS_mount, SYS_umount2, SYS_sethostname, SYS_setrlimit,
                           SYS_prlimit64, SYS_capset, SYS_seccomp, SYS_pidfd_open, SYS_wait4,
                           SYS_waitid, SYS_landlock_create_ruleset, SYS_landlock_add_rule,
                           SYS_landlock_restrict_self, SYS_sendmsg, SYS_recvmsg,
                           // A job's read-only binds over /proc, and its CPUs: its own mount
                           // namespace and affinity, before its own filter.
                           442 /* mount_setattr */, SYS_sched_setaffinity})
                CHECK_MESSAGE(n.outer.action(nr) == kAllow, nr);
            for (unsigned long option : {PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP,
                                         PR_CAP_AMBIENT, PR_SET_SECUREBITS})
                CHECK_MESSAGE(n.outer.action(SYS_prctl, {option}) == kAllow, option);
            CHECK(n.outer.action(SYS_ioctl, {3, SIOCSIFFLAGS}) == kAllow);
            // Refused, and below a job's USER_NOTIF, so a job's denial still reaches the
            // supervisor.
            for (int nr :
                 {SYS_setns, SYS_pivot_root, SYS_bpf, SYS_keyctl, SYS_add_key, SYS_perf_event_open,
                  SYS_userfaultfd, SYS_io_uring_setup, SYS_ptrace, SYS_process_vm_readv,
                  SYS_process_vm_writev, SYS_kexec_load, SYS_init_module, SYS_open_tree,
                  SYS_move_mount, SYS_fsopen, SYS_fsmount, SYS_fspick, SYS_chroot})
                CHECK_MESSAGE(n.outer.action(nr) == kTrace, nr);
            CHECK(n.outer.action(SYS_ioctl, {0, TIOCSTI}) == kTrace);
            CHECK(n.outer.action(SYS_read, {}, AUDIT_ARCH_I386) == kKill);
        }
    }

    TEST_CASE("it never refuses what a job may do, nor hides what a job's filter reports") {
        for (const char* name : {"strict", "default", "datascience"}) {
            CAPTURE(name);
            const Nesting n = nesting(name);
            for (int nr = 0; nr < 460; ++nr)
                for (std::uint64_t arg0 :
                     {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{CLONE_THREAD | CLONE_VM},
                      std::uint64_t{AF_UNIX}, std::uint64_t{AF_INET}}) {
                    const std::uint32_t job = n.job_filter.action(nr, {arg0, TCGETS, 1 << 20});
                    const std::uint32_t outer = n.outer.action(nr, {arg0, TCGETS, 1 << 20});
                    CAPTURE(nr);
                    CAPTURE(arg0);
                    // Stacked, the job's own action is what the kernel takes.
                    CHECK(strictness(job) <= strictness(outer));
                }
        }
    }

    TEST_CASE("it has no listener and a fingerprint of its own") {
        const Nesting n = nesting("default");
        const seccomp::Recipe outer = seccomp::nesting_recipe(n.job);
        CHECK(outer.default_action == SCMP_ACT_TRACE(0));
        CHECK(outer.fingerprint() != n.job.fingerprint());
        CHECK(n.job.fingerprint().find("default notify") != std::string::npos);
    }
}
