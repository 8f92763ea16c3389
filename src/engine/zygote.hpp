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
// A zygote starts beside its owner's poll loop, never in its way: the loop watches its channel for
// the Ready record and a timer for kStartTimeout, so a sandbox that waits for a zygote still
// starting waits in the loop (Session's forking phase), as a cloned sandbox waits for its driver,
// while the front serves its signals, its input and its other sandboxes. A front that stops on a
// signal meanwhile stops as promptly as at any other time, and the waiting sandbox, never forked,
// is dropped with its job. The one exchange that blocks is the fork itself, with a zygote that is
// ready: a clone3 and two small writes, bounded by kForkTimeout. (A blocking wait that also
// watched for the front's signals would have had to give up with an error, which the front
// would answer as the job's result, and it would still hold up every other sandbox's output,
// deadlines and requests for as long as the preload takes.)
//
// The owner drives the poll loop and calls advance() after each round.

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

#include "inside/child.hpp"
#include "plan/plan.hpp"
#include "sys/errors.hpp"
#include "sys/poller.hpp"
#include "sys/retry_pause.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {

// What a forked sandbox keeps of its zygote: the zygote lives as long as the sandbox does (a job
// dies with its zygote), and can say whether it ended.
class ZygoteLife {
  public:
    virtual ~ZygoteLife() = default;
    virtual bool ended() = 0;
};

// The zygote asked for a fork ended before it answered: a replacement is starting, and the sandbox
// may be asked of it once it is ready.
struct ZygoteEnded : SysError {
    using SysError::SysError;
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
    // One is ready or starting: its Ready record, its end or its start's limit will wake the
    // loop. After advance(), false only when the host refused the last one's sandbox or the next
    // waits out its pause after a failure.
    bool starting() const;

    // Zygotes that ended before they were ready (or could not be started), so far, and the last
    // one's reason. A sandbox that waits for a zygote notes the count as it begins to wait: once
    // the count has grown, the zygote it waited for failed.
    std::size_t failures() const { return failures_; }
    const std::string& failure() const { return failure_; }

    // Forks a sandbox with these ends of its pipes (release_read is not used: the zygote makes
    // its own), when ready(): it never waits for a zygote that is still starting. Throws
    // ZygoteEnded when the zygote ended before it answered, SysError when it could not fork or
    // none is ready.
    Forked fork(const ChildFds& ends);

    // Takes on a replacement that is ready; starts one for a zygote that ended or forked its
    // share, so that one is starting while none is ready; counts those that failed. After a
    // failure the next start waits (sys::RetryPause: 100 ms, doubling up to a minute, until one
    // is ready), so that a zygote that cannot start is not restarted in a loop: meanwhile
    // starting() is false and the sandboxes asked for fail at once, saying why.
    // Called after each round, and by a sandbox that waits for a zygote before it looks.
    void advance();

  private:
    class Process;

    std::shared_ptr<Process> start();
    void count_failure(const Process& process);
    void note_failure(const std::string& why);

    const Plan& job_plan_;
    const Plan& zygote_plan_;
    sys::Poller& poller_;
    std::shared_ptr<Process> current_;  // the one that forks
    std::shared_ptr<Process> next_;     // its replacement, while it starts
    std::size_t failures_ = 0;
    std::string failure_;
    sys::RetryPause pause_;  // before the next start, after a failure
};

// The plan of a zygote for the sandboxes of `job_plan`: the same profile and overrides, the
// nesting seccomp filter, and the helper library with the job plan written into its root. Throws
// UsageError for what forked sandboxes cannot have yet (--input, --workdir).
std::unique_ptr<const Plan> plan_zygote(const Plan& job_plan, const std::string& profile,
                                        const Overrides& overrides,
                                        const std::vector<std::string>& host_env);

}  // namespace pysandbox
