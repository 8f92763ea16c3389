#pragma once
// A fork server (`pysandbox batch --fork`, experimental; docs/forkserver-status.md): one warm
// zygote per profile, itself a pysandbox sandbox built from a Program::Kind::zygote plan, that
// clones one fresh sandbox per job (src/python/pysandbox_zygote.py). The supervisor's side of a
// job is a ForkJob: it sends the job's layers (from the job plan, the same driver plan a warm
// session uses), waits for the job's hello (its pidfd, its /tmp/work, its seccomp listener), sends
// the code, and watches the job as a Sandbox watches a run: deadline, output, denied calls, the
// audit hook's channel. Its result is the one a warm session gives for the same job.
//
// The owner drives the poll loop and calls advance() after each round.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "outcome.hpp"
#include "plan.hpp"
#include "policy_channel.hpp"
#include "sandbox.hpp"
#include "session.hpp"
#include "stream.hpp"
#include "sys/poller.hpp"
#include "sys/timer_fd.hpp"
#include "sys/unique_fd.hpp"
#include "syscall_watch.hpp"

namespace pysandbox {

class ForkServer;

// How long a job may take from its request to its hello before it counts as failed.
inline constexpr std::chrono::seconds kJobSetupTimeout{10};

class ForkJob {
  public:
    ForkJob(ForkServer& server, int id);
    ~ForkJob();
    ForkJob(const ForkJob&) = delete;
    ForkJob& operator=(const ForkJob&) = delete;

    // Queues `cell` with the server; it is sent once the zygote is ready.
    void run(Cell cell);
    // Where --output-dir copies go: DIR/NAME.
    void name_output(std::string name) { output_name_ = std::move(name); }
    // Called after each round of the poll loop.
    void advance();
    std::optional<nlohmann::ordered_json> take_result();

    // The server's side.
    int id() const { return id_; }
    enum class Sent { done, again, failed };  // again: the channel is full, retry on POLLOUT
    Sent send_request(int zygote_channel);
    void on_zygote_message(const nlohmann::json& message);
    void on_zygote_lost(const std::string& why);

  private:
    enum class Phase { queued, starting, running, ended, done };

    nlohmann::json request_json() const;
    bool prepare_request();
    void watch();
    void on_hello();
    void send_code();
    void on_deadline();
    void on_init_report();
    void fail(const std::string& step, int error, const std::string& detail);
    bool finished() const;
    Outcome outcome();
    void finish();
    void list_files(Outcome& outcome);
    void drop_inputs(Outcome& outcome, int job_dir) const;

    ForkServer& server_;
    const Plan& plan_;
    sys::Poller& poller_;
    const int id_;
    Phase phase_ = Phase::queued;
    Cell cell_;
    std::string output_name_ = "job";
    std::chrono::milliseconds timeout_{0};
    std::chrono::steady_clock::time_point requested_at_;
    std::chrono::steady_clock::time_point code_at_;
    std::chrono::steady_clock::time_point ended_at_;
    struct Pending {
        sys::Pipe out;
        sys::Pipe err;
        sys::UniqueFd job_end;
        sys::UniqueFd init_end;
    };
    std::optional<Pending> pending_;  // made, not yet taken by the zygote
    sys::UniqueFd job_socket_;
    sys::UniqueFd pidfd_;
    sys::UniqueFd work_dir_;
    sys::UniqueFd listener_;
    std::unique_ptr<PolicyChannel> policy_;
    bool policy_open_ = false;
    policy::Records policy_records_;
    SyscallWatch syscalls_;
    OutputBudget budget_;
    Transcript transcript_;
    std::optional<Stream> out_;
    std::optional<Stream> err_;
    sys::TimerFd deadline_;
    bool timed_out_ = false;
    bool exited_ = false;                // the pidfd said so
    std::optional<int> wait_status_;     // PID 1's, from the zygote
    sys::UniqueFd init_report_channel_;  // with processes allowed: the job's init reports here
    std::optional<int> init_status_;
    std::int64_t cpu_us_ = 0;
    std::int64_t max_rss_kib_ = 0;
    struct Failure {
        std::string step;
        int error = 0;
        std::string detail;
    };
    std::optional<Failure> failure_;
    std::optional<nlohmann::ordered_json> result_;
};

class ForkServer {
  public:
    // `job_plan`: what each job is (a driver plan, as for a warm session); `zygote_plan`: the
    // zygote's own sandbox (Program::Kind::zygote, same profile). Both outlive the server.
    ForkServer(const Plan& job_plan, const Plan& zygote_plan, sys::Poller& poller);
    ~ForkServer();
    ForkServer(const ForkServer&) = delete;
    ForkServer& operator=(const ForkServer&) = delete;

    std::unique_ptr<ForkJob> take();
    // Starts the zygote when a job waits for it (again, after it died), passes its messages on
    // and sends the waiting jobs once it is ready.
    void advance();
    // Ends the zygote (its jobs die with it: PR_SET_PDEATHSIG) and starts no other.
    void close();
    // Has the zygote kill a job it started that never said hello (or ends the zygote).
    void kill_job(int id);

    const Plan& job_plan() const { return job_plan_; }
    sys::Poller& poller() { return poller_; }
    void enqueue(ForkJob& job) { queue_.push_back(&job); }
    void forget(ForkJob& job);

  private:
    void start_zygote();
    void on_message();
    void lose_zygote(const std::string& why);

    const Plan& job_plan_;
    const Plan& zygote_plan_;
    sys::Poller& poller_;
    std::unique_ptr<Sandbox> zygote_;
    sys::UniqueFd channel_;
    bool ready_ = false;
    bool closed_ = false;
    int next_id_ = 0;
    std::deque<ForkJob*> queue_;
    std::map<int, ForkJob*> sent_;
    std::chrono::steady_clock::time_point next_start_{};
    sys::TimerFd restart_timer_;
};

// The zygote's plan for a job plan's profile: the same profile and overrides, Program::Kind::
// zygote. Throws what make_plan throws, and UsageError for what the fork path cannot do yet
// (network mode "proxy", --workdir, --input, --output-dir).
std::unique_ptr<const Plan> plan_zygote(const std::string& profile, const Overrides& overrides,
                                        const std::vector<std::string>& host_env);

}  // namespace pysandbox
