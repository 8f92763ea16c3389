#include "fronts/batch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>

#include "engine/pool.hpp"
#include "fronts/env.hpp"
#include "fronts/env_requests.hpp"
#include "fronts/front_loop.hpp"
#include "fronts/junit.hpp"
#include "plan/plan.hpp"
#include "plan/units.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "sys/errors.hpp"
#include "sys/timer_fd.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kProgressEvery{250};

// Lines in a regular file, for the progress line's total (none for a pipe).
std::optional<std::size_t> count_lines(int fd) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    std::size_t lines = 0;
    char chunk[65536];
    off_t at = 0;
    bool last_newline = true;
    for (ssize_t n; (n = ::pread(fd, chunk, sizeof chunk, at)) > 0; at += n) {
        lines += static_cast<std::size_t>(std::count(chunk, chunk + n, '\n'));
        last_newline = chunk[n - 1] == '\n';
    }
    return lines + (last_newline ? 0 : 1);
}

struct Running {
    std::size_t line = 0;  // 1-based, the job's place in the input
    Offer* offer = nullptr;
    std::shared_ptr<Offer> environment;  // the offer, when it is that of the job's packages
    std::unique_ptr<Session> session;
};

// A job whose packages are being installed (RequestEnvironments): it starts once they are.
struct Installing {
    std::size_t line = 0;
    Job job;
    std::shared_ptr<const AskedEnvironment> environment;
};

// Jobs held while their packages install: past that, the batch reads no further line until
// one of them starts (each holds its code, stdin and input files).
constexpr std::size_t kMaxInstallingJobs = 256;

class Batch {
  public:
    Batch(std::vector<Offer> offers, const BatchInvocation& invocation, int jobs_fd,
          JunitReport* junit, const std::vector<std::string>& host_env)
        : loop_(offers.front().plan->ids.privileged, jobs_fd, kMaxRequestLine),
          offers_(std::move(offers)),
          environments_(offers_,
                        {invocation.overrides, invocation.verbose, host_env, invocation.jobs,
                         invocation.fork, "batch"},
                        loop_.poller()),
          parallel_(invocation.jobs),
          keep_order_(invocation.keep_order),
          fail_on_error_(invocation.fail_on_error),
          summary_shown_(!invocation.quiet),
          progress_shown_(!invocation.quiet && ::isatty(STDERR_FILENO) == 1),
          junit_(junit) {
        for (const Offer& offer : offers_) {
            names_.push_back(offer.name);
            limits_.push_back(&offer.plan->profile.limits);
        }
        if (progress_shown_) total_ = count_lines(jobs_fd);
        loop_.watch_signals([this](int sig) { loop_.stop(exit_codes::kSignalBase + sig); });
        loop_.poller().watch(
            [this] {
                return sys::Poller::Interest{progress_timer_.get(), POLLIN};
            },
            [this](short) {
                progress_timer_.acknowledge();
                show_progress(false);
                progress_timer_.arm(kProgressEvery);
            });
        // Read ahead (the reader's own cap bounds it), so that the end of the input is seen as it
        // comes: the last job then takes the last warm sandbox.
        loop_.watch_lines([] { return true; });
        for (Offer& offer : offers_) {
            if (offer.zygote_plan)
                offer.zygote =
                    std::make_unique<Zygote>(*offer.plan, *offer.zygote_plan, loop_.poller());
            offer.pool =
                std::make_unique<Pool>(*offer.plan, loop_.poller(), parallel_, offer.zygote.get());
        }
        if (progress_shown_) progress_timer_.arm(kProgressEvery);
        start_ = Clock::now();
    }

    // The sandboxes (and the zygotes whose forks they are) watch the poller: they go first.
    ~Batch() { close_sandboxes(); }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

    int run() {
        for (;;) {
            loop_.poller().poll_once();
            stop_warming_if_done();
            environments_.advance();
            for (Offer& offer : offers_) offer.pool->advance();
            for (Offer* offer : environments_.offers()) offer->pool->advance();
            collect();
            start_installed();
            start_jobs();
            stop_warming_if_done();
            if (loop_.output().broken()) return finish(exit_codes::kSignalBase + SIGPIPE);
            if (loop_.stopping()) return finish(loop_.exit_code());  // a signal
            if (loop_.input().exhausted() && running_.empty() && installing_.empty())
                return finish(setup_failed_ ? 125 : 0);
        }
    }

  private:
    // Every job has its sandbox: the warm ones left would serve nobody, and with every core busy
    // their start (the preload included) is taken from the last jobs. A one-job batch (a Dask
    // task) starts one sandbox, not two.
    void stop_warming_if_done() {
        if (pools_closed_ || !loop_.input().exhausted()) return;
        for (Offer& offer : offers_) offer.pool->close();
        environments_.close_pools();
        pools_closed_ = true;
    }

    // The jobs whose packages were installed (or failed to be), in the input's order, as far as
    // there is room.
    void start_installed() {
        for (auto it = installing_.begin();
             it != installing_.end() && running_.size() < parallel_;) {
            const AskedEnvironment& environment = *it->environment;
            if (environment.state == AskedEnvironment::State::installing) {
                ++it;
                continue;
            }
            if (environment.state == AskedEnvironment::State::failed) {
                ordered_json failure = environment.failure;
                failure["id"] = it->job.cell.id;
                count("install_error");
                emit(it->line, std::move(failure));
            } else {
                try {
                    std::shared_ptr<Offer> offer = environments_.offer(environment);
                    Offer& chosen = *offer;  // before the pointer is moved into the job
                    start(it->line, chosen, std::move(offer), std::move(it->job.cell));
                } catch (const std::runtime_error& e) {  // its plan (the store changed)
                    count("bad_request");
                    emit(it->line,
                         bad_request_json(
                             {it->job.cell.id, std::string("the job's packages were installed, but "
                                                           "its sandbox cannot be planned: ") +
                                                   e.what()}));
                }
            }
            it = installing_.erase(it);
        }
    }

    void start(std::size_t line, Offer& offer, std::shared_ptr<Offer> environment, Cell cell) {
        Running run{line, &offer, std::move(environment), offer.pool->take()};
        run.session->name_output("job-" + std::to_string(line), false);
        run.session->run(std::move(cell));
        running_.push_back(std::move(run));
    }

    void start_jobs() {
        while (running_.size() < parallel_ && installing_.size() < kMaxInstallingJobs) {
            auto line = loop_.input().next();
            if (!line) return;
            const std::size_t number = ++lines_;
            if (is_blank(line->text) && !line->too_long) {
                skipped_.push_back(number);  // a blank line is no job
                emit_in_order();
                continue;
            }
            std::variant<Job, BadRequest> parsed =
                line->too_long
                    ? std::variant<Job, BadRequest>(BadRequest{
                          nullptr, "the job line is over " + units::format_size(kMaxRequestLine)})
                    : parse_job(line->text, names_, limits_);
            line.reset();  // the job holds what it needs of it: not two copies of the code
            if (auto* bad = std::get_if<BadRequest>(&parsed)) {
                count("bad_request");
                emit(number, bad_request_json(*bad));  // a line that is not a job: its number
                continue;
            }
            Job& job = std::get<Job>(parsed);
            if (job.requirements.empty()) {
                start(number, offers_[job.profile], nullptr, std::move(job.cell));
                continue;
            }
            try {
                auto environment = environments_.ask(job.profile, job.requirements);
                installing_.push_back({number, std::move(job), std::move(environment)});
            } catch (const std::invalid_argument& e) {  // --with-env: one environment for all
                count("bad_request");
                emit(number, bad_request_json({job.cell.id, e.what()}));
            }
            start_installed();  // one found ready starts now, in its turn
        }
    }

    void collect() {
        for (auto it = running_.begin(); it != running_.end();) {
            it->session->advance();
            auto result = it->session->take_result();
            if (!result) {
                ++it;
                continue;
            }
            const std::string status = (*result)["status"].get<std::string>();
            if (status == "sandbox_error") setup_failed_ = true;
            count(status);
            emit(it->line, one_shot_result(std::move(*result)));
            it->offer->pool->retire(std::move(it->session));
            it = running_.erase(it);
        }
    }

    void count(const std::string& status) {
        ++done_;
        ++statuses_[status];
        if (status != "ok") ++failures_[status];
    }

    // Every result says which input line it answers.
    void emit(std::size_t line, ordered_json result) {
        result["line"] = line;
        if (junit_ != nullptr) junit_->add(line, result);
        std::string text = dump_line(result) + "\n";
        if (!keep_order_) {
            loop_.output().write(text);
            return;
        }
        finished_.emplace(line, std::move(text));
        emit_in_order();
    }

    void emit_in_order() {
        for (;;) {
            if (const auto skip = std::ranges::find(skipped_, next_line_); skip != skipped_.end()) {
                skipped_.erase(skip);
                ++next_line_;
                continue;
            }
            const auto it = finished_.find(next_line_);
            if (it == finished_.end()) return;
            loop_.output().write(it->second);
            finished_.erase(it);
            ++next_line_;
        }
    }

    void show_progress(bool last) {
        if (!progress_shown_) return;
        const double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
        const double rate = seconds > 0 ? static_cast<double>(done_) / seconds : 0;
        char line[512];
        int n = std::snprintf(line, sizeof line, "\r\033[Kpysandbox batch: %zu", done_);
        if (total_) n += std::snprintf(line + n, sizeof line - n, "/%zu", *total_);
        n += std::snprintf(line + n, sizeof line - n, " done, %.1f/s", rate);
        for (const auto& [status, failed] : failures_)
            n += std::snprintf(line + n, sizeof line - n, ", %s %zu", status.c_str(), failed);
        if (total_ && rate > 0 && *total_ > done_)
            n += std::snprintf(line + n, sizeof line - n, ", ETA %s",
                               units::format_duration(std::chrono::milliseconds(static_cast<long>(
                                                          1000 * (*total_ - done_) / rate)))
                                   .c_str());
        std::cerr << line << (last ? "\n" : "") << std::flush;
    }

    void close_sandboxes() {
        running_.clear();
        installing_.clear();
        for (Offer* offer : environments_.offers()) offer->pool->close();
        for (Offer& offer : offers_) {
            if (offer.pool) offer.pool->close();
            offer.pool.reset();
            offer.zygote.reset();
        }
    }

    // The jobs still running are killed; the results of those that finished are written.
    int finish(int exit_code) {
        close_sandboxes();
        if (keep_order_) {  // what finished, in order, past any gap a stopped job left
            for (auto& [line, text] : finished_) loop_.output().write(text);
            finished_.clear();
        }
        loop_.flush(1000);
        const std::chrono::duration<double> elapsed = Clock::now() - start_;
        if (junit_ != nullptr) junit_->finish(elapsed);
        show_progress(true);
        show_summary(elapsed);
        if (exit_code == 0 && fail_on_error_ && !failures_.empty()) return 1;
        return exit_code;
    }

    // One line at the end, at a terminal or not (below the progress line's last state): the jobs
    // by status and the time taken.
    void show_summary(std::chrono::duration<double> elapsed) {
        if (!summary_shown_) return;
        char line[128];
        std::snprintf(line, sizeof line, "pysandbox batch: %zu job%s in %.2fs", done_,
                      done_ == 1 ? "" : "s", elapsed.count());
        std::string text = line;
        const char* separator = ": ";
        for (const auto& [status, jobs] : statuses_) {
            text += separator + status + " " + std::to_string(jobs);
            separator = ", ";
        }
        std::cerr << text << "\n" << std::flush;
    }

    FrontLoop loop_;  // first: the signals are blocked before the first sandbox is cloned
    std::vector<Offer> offers_;
    // The offers of the jobs' own packages, and their installs (killed when the batch ends).
    RequestEnvironments environments_;
    std::vector<std::string> names_;
    std::vector<const Limits*> limits_;
    const std::size_t parallel_;
    bool pools_closed_ = false;  // the input is exhausted: no sandbox is started ahead any more
    const bool keep_order_;
    const bool fail_on_error_;
    const bool summary_shown_;
    sys::TimerFd progress_timer_;
    const bool progress_shown_;
    JunitReport* junit_;  // none without --junit
    std::optional<std::size_t> total_;
    Clock::time_point start_;
    std::vector<Running> running_;
    std::deque<Installing> installing_;
    std::size_t lines_ = 0;
    std::size_t next_line_ = 1;
    std::map<std::size_t, std::string> finished_;
    std::vector<std::size_t> skipped_;
    std::size_t done_ = 0;
    std::map<std::string, std::size_t> failures_;
    std::map<std::string, std::size_t> statuses_;  // every job's, ok included
    bool setup_failed_ = false;
};

}  // namespace

int run_batch(const BatchInvocation& invocation, const std::vector<std::string>& host_env) {
    BatchInvocation options = invocation;
    if (options.jobs == 0) options.jobs = online_cpus();
    sys::UniqueFd jobs_file;
    int jobs_fd = STDIN_FILENO;
    if (options.jobs_file != "-") {
        jobs_file.reset(::open(options.jobs_file.c_str(), O_RDONLY | O_CLOEXEC));
        if (!jobs_file)
            throw UsageError("batch: " + options.jobs_file + ": " + std::strerror(errno));
        jobs_fd = jobs_file.get();
    }
    // Installed before the first job is read: every sandbox (and zygote) of a profile mounts
    // the environment of its python.requirements.
    auto environments =
        env::profile_environments(options.profiles, options.overrides, options.verbose, host_env);
    if (const auto* failed = std::get_if<env::InstallFailure>(&environments))
        return failed->exit_code;
    std::vector<Offer> offers = plan_offers(options.profiles, options.overrides,
                                            std::get<env::ProfileEnvironments>(environments),
                                            options.verbose, host_env, options.fork);
    // Made before any job runs: a report that cannot be written stops the batch at the start.
    std::optional<JunitReport> junit;
    if (!options.junit.empty())
        junit.emplace(options.junit,
                      options.jobs_file == "-"
                          ? std::string("stdin")
                          : std::filesystem::path(options.jobs_file).filename().string());
    Batch batch(std::move(offers), options, jobs_fd, junit ? &*junit : nullptr, host_env);
    return batch.run();
}

}  // namespace pysandbox
