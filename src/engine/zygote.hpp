#pragma once
// A fork server: a warm interpreter, itself in a sandbox of the profile (Program::Kind::zygote,
// with the nesting filter, plan.cpp), that has imported the profile's [python] preload once and
// forks one sandbox per request. Each forked sandbox is what Sandbox clones (its own user, mount,
// PID, network, IPC, UTS and cgroup namespaces, /tmp, /proc, Landlock, capabilities dropped, the
// job's own seccomp filter with its listener) set up by the same steps (child.cpp,
// Birth::forked), but starts without a new interpreter: its cell driver is ready in a few
// milliseconds, with the preload already imported.
//
// What forked sandboxes share that cloned ones do not, and so what bounds the use: they are
// copies of one process, so they share its address-space layout, its stack canary and its str
// hash secret. A zygote therefore forks at most kForksPerZygote sandboxes, then is replaced; and
// it is one front's (a batch's) alone. They have no cgroup of their own yet: their limits are the
// rlimits (the plan says so, and the result too). The fork is a raw clone (it must create the
// namespaces), so pthread_atfork handlers do not run, and every job's interpreter is PID 2, as
// the zygote's is: CPython's own fork hooks run (`random` is reseeded) and the job reseeds numpy,
// but a generator a preloaded module seeded at import, in a library that detects forks by either
// (OpenSSL's), would give every job of a zygote the same stream. No shipped profile's preload
// does; os.urandom and `secrets` are unaffected.
//
// The owner drives the poll loop and calls advance() after each round.

#include <sys/types.h>

#include <cstddef>
#include <memory>

#include "inside/child.hpp"
#include "plan/plan.hpp"
#include "sys/poller.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {

// What a forked sandbox keeps of its zygote: the zygote lives as long as the sandbox does (a job
// dies with its zygote), and can say whether it ended.
class ZygoteLife {
  public:
    virtual ~ZygoteLife() = default;
    virtual bool ended() = 0;
};

// A forked sandbox's init, for its Sandbox.
struct Forked {
    sys::UniqueFd pidfd;
    pid_t pid = 0;  // in pysandbox's PID namespace
    std::shared_ptr<ZygoteLife> zygote;
};

class Zygote {
  public:
    // How many sandboxes one zygote forks before a new one replaces it.
    static constexpr std::size_t kForksPerZygote = 256;

    // `job_plan` is the plan of the sandboxes to fork (made with Request::forked), `zygote_plan`
    // the zygote's own (plan_zygote). Both must outlive it. Starts a zygote now.
    Zygote(const Plan& job_plan, const Plan& zygote_plan, sys::Poller& poller);
    ~Zygote();
    Zygote(const Zygote&) = delete;
    Zygote& operator=(const Zygote&) = delete;

    const Plan& job_plan() const { return job_plan_; }

    // A zygote is ready to fork now.
    bool ready() const;

    // Forks a sandbox with these ends of its pipes (release_read is not used: the zygote makes
    // its own). Waits for a zygote that is still starting. Throws SysError when none can fork.
    Forked fork(const ChildFds& ends);

    // Starts a replacement for a zygote that ended or forked its share, and takes it on once it
    // is ready.
    void advance();

  private:
    class Process;

    std::shared_ptr<Process> start();

    const Plan& job_plan_;
    const Plan& zygote_plan_;
    sys::Poller& poller_;
    std::shared_ptr<Process> current_;  // the one that forks
    std::shared_ptr<Process> next_;     // its replacement, while it starts
};

// The plan of a zygote for the sandboxes of `job_plan`: the same profile and overrides, the
// nesting seccomp filter, and the helper library with the job plan written into its root. Throws
// UsageError for what forked sandboxes cannot have yet (--input, --workdir).
std::unique_ptr<const Plan> plan_zygote(const Plan& job_plan, const std::string& profile,
                                        const Overrides& overrides,
                                        const std::vector<std::string>& host_env);

}  // namespace pysandbox
