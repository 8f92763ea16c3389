#include "fronts/batch.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>

#include "engine/pool.hpp"
#include "plan/plan.hpp"
#include "plan/request.hpp"
#include "plan/units.hpp"
#include "report/exit_codes.hpp"
#include "report/json_text.hpp"
#include "sys/errors.hpp"
#include "sys/line_io.hpp"
#include "sys/poller.hpp"
#include "sys/signal_fd.hpp"
#include "sys/timer_fd.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kFields = "id, code, script, args, stdin, timeout, profile, inputs";
constexpr std::chrono::milliseconds kProgressEvery{250};

std::string type_of(const json& value) {
    return value.type_name();
}

// A host file named by a job, read now as the caller, at most `cap` bytes.
std::string read_host_file(const std::string& what, const std::string& path, std::uint64_t cap) {
    const sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (!fd) throw std::invalid_argument(what + " \"" + path + "\": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
        throw std::invalid_argument(what + " \"" + path + "\" is not a regular file");
    if (static_cast<std::uint64_t>(st.st_size) > cap)
        throw std::invalid_argument(what + " \"" + path + "\" is over " + units::format_size(cap));
    std::string data(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t got = 0;
    while (got < data.size()) {
        const ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw std::invalid_argument(what + " \"" + path + "\": " + std::strerror(errno));
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    data.resize(got);
    return data;
}

std::vector<std::string> string_list(const json& value, const std::string& what) {
    if (!value.is_array())
        throw std::invalid_argument("\"" + what + "\" must be an array of strings, not " +
                                    type_of(value));
    std::vector<std::string> list;
    for (const json& item : value) {
        if (!item.is_string())
            throw std::invalid_argument("\"" + what + "\" must be an array of strings");
        list.push_back(item.get<std::string>());
    }
    return list;
}

// "inputs": host files as for --input ("FILE" or "FILE=NAME"), read now, at most `max_bytes`
// together.
std::vector<CellFile> read_inputs(const json& inputs, std::uint64_t max_bytes) {
    std::vector<CellFile> files;
    std::uint64_t total = 0;
    for (const std::string& text : string_list(inputs, "inputs")) {
        InputSpec spec;
        try {
            spec = parse_input_spec(text);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("inputs: \"" + text + "\": " + e.what());
        }
        if (std::ranges::any_of(files, [&](const CellFile& f) { return f.name == spec.name; }))
            throw std::invalid_argument("inputs: the name \"" + spec.name + "\" is given twice");
        std::string data = read_host_file("input", spec.source, max_bytes - total);
        total += data.size();
        files.push_back({spec.name, std::move(data)});
    }
    return files;
}

Job parse_job_fields(const json& request, std::span<const std::string> profiles,
                     std::span<const Limits* const> limits) {
    static constexpr std::string_view kKnown[] = {"id",    "code",    "script",  "args",
                                                  "stdin", "timeout", "profile", "inputs"};
    for (const auto& [key, _] : request.items())
        if (std::ranges::find(kKnown, key) == std::end(kKnown))
            throw std::invalid_argument("unknown field \"" + key +
                                        "\" (fields: " + std::string(kFields) + ")");
    Job job;
    if (const auto profile = request.find("profile"); profile != request.end()) {
        if (!profile->is_string())
            throw std::invalid_argument("\"profile\" must be a string, not " + type_of(*profile));
        const auto it = std::ranges::find(profiles, profile->get<std::string>());
        if (it == profiles.end()) {
            std::string offered;
            for (const auto& name : profiles) offered += (offered.empty() ? "" : ", ") + name;
            throw std::invalid_argument("profile \"" + profile->get<std::string>() +
                                        "\" is not one this batch allows (-p: " + offered + ")");
        }
        job.profile = static_cast<std::size_t>(it - profiles.begin());
    }
    const Limits& limit = *limits[job.profile];
    const auto code = request.find("code");
    const auto script = request.find("script");
    if ((code == request.end()) == (script == request.end()))
        throw std::invalid_argument("a job needs exactly one of \"code\" and \"script\"");
    std::string argv0 = "-c";
    if (code != request.end()) {
        if (!code->is_string())
            throw std::invalid_argument("\"code\" must be a string, not " + type_of(*code));
        job.cell.code = code->get<std::string>();
    } else {
        if (!script->is_string())
            throw std::invalid_argument("\"script\" must be a string, not " + type_of(*script));
        const std::string path = script->get<std::string>();
        job.cell.code = read_host_file("script", path, kMaxRequestLine);
        argv0 = std::filesystem::path(path).filename().string();
        job.cell.filename = argv0;
    }
    std::vector<std::string> argv{argv0};
    if (const auto args = request.find("args"); args != request.end())
        for (std::string& arg : string_list(*args, "args")) argv.push_back(std::move(arg));
    job.cell.argv = std::move(argv);
    if (const auto input = request.find("stdin"); input != request.end()) {
        if (!input->is_string())
            throw std::invalid_argument("\"stdin\" must be a string, not " + type_of(*input));
        job.cell.stdin_data = input->get<std::string>();
    }
    if (const auto timeout = request.find("timeout"); timeout != request.end())
        job.cell.timeout = capped_timeout(*timeout, limit, job.cell.warnings);
    if (const auto inputs = request.find("inputs"); inputs != request.end())
        job.cell.files = read_inputs(*inputs, limit.tmp_size);
    return job;
}

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
    std::size_t offer = 0;
    std::unique_ptr<Session> session;
};

class Batch {
  public:
    Batch(std::vector<Offer> offers, const BatchInvocation& invocation, int jobs_fd,
          sys::SignalFd& signals)
        : offers_(std::move(offers)),
          parallel_(invocation.jobs),
          keep_order_(invocation.keep_order),
          signals_(signals),
          input_(jobs_fd, kMaxRequestLine),
          output_(STDOUT_FILENO),
          progress_shown_(::isatty(STDERR_FILENO) == 1) {
        for (const Offer& offer : offers_) {
            names_.push_back(offer.name);
            limits_.push_back(&offer.plan->profile.limits);
        }
        if (progress_shown_) total_ = count_lines(jobs_fd);
        using Interest = sys::Poller::Interest;
        poller_.watch(
            [this] {
                return Interest{signals_.get(), POLLIN};
            },
            [this](short) { on_signal(); });
        poller_.watch(
            [this] {
                return Interest{progress_timer_.get(), POLLIN};
            },
            [this](short) {
                progress_timer_.acknowledge();
                show_progress(false);
                progress_timer_.arm(kProgressEvery);
            });
        // Read ahead (the reader's own cap bounds it), so that the end of the input is seen as it
        // comes: the last job then takes the last warm sandbox.
        watch_lines(poller_, input_, output_, [] { return true; });
        for (Offer& offer : offers_) {
            if (offer.zygote_plan)
                offer.zygote = std::make_unique<Zygote>(*offer.plan, *offer.zygote_plan, poller_);
            offer.pool =
                std::make_unique<Pool>(*offer.plan, poller_, parallel_, offer.zygote.get());
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
            poller_.poll_once();
            stop_warming_if_done();
            for (Offer& offer : offers_) offer.pool->advance();
            collect();
            start_jobs();
            stop_warming_if_done();
            if (output_.broken()) return finish(exit_codes::kSignalBase + SIGPIPE);
            if (stop_signal_ != 0) return finish(exit_codes::kSignalBase + stop_signal_);
            if (input_.exhausted() && running_.empty()) return finish(setup_failed_ ? 125 : 0);
        }
    }

  private:
    // Every job has its sandbox: the warm ones left would serve nobody, and with every core busy
    // their start (the preload included) is taken from the last jobs. A one-job batch (a Dask
    // task) starts one sandbox, not two.
    void stop_warming_if_done() {
        if (pools_closed_ || !input_.exhausted()) return;
        for (Offer& offer : offers_) offer.pool->close();
        pools_closed_ = true;
    }

    void start_jobs() {
        while (running_.size() < parallel_) {
            auto line = input_.next();
            if (!line) return;
            const std::size_t number = ++lines_;
            if (line->text.find_first_not_of(" \t\r") == std::string::npos && !line->too_long) {
                skipped_.push_back(number);  // a blank line is no job
                emit_in_order();
                continue;
            }
            std::variant<Job, BadRequest> parsed =
                line->too_long
                    ? std::variant<Job, BadRequest>(BadRequest{
                          nullptr, "the job line is over " + units::format_size(kMaxRequestLine)})
                    : parse_job(line->text, names_, limits_);
            if (auto* bad = std::get_if<BadRequest>(&parsed)) {
                count("bad_request");
                emit(number, bad_request_json(*bad));
                continue;
            }
            Job& job = std::get<Job>(parsed);
            Running run{number, job.profile, offers_[job.profile].pool->take()};
            run.session->name_output("job-" + std::to_string(number), false);
            run.session->run(std::move(job.cell));
            running_.push_back(std::move(run));
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
            offers_[it->offer].pool->retire(std::move(it->session));
            it = running_.erase(it);
        }
    }

    void count(const std::string& status) {
        ++done_;
        if (status != "ok") ++failures_[status];
    }

    void emit(std::size_t line, const ordered_json& result) {
        std::string text = dump_line(result) + "\n";
        if (!keep_order_) {
            output_.write(text);
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
            output_.write(it->second);
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

    void on_signal() {
        if (const int sig = signals_.take(); sig != 0 && stop_signal_ == 0) stop_signal_ = sig;
    }

    void close_sandboxes() {
        running_.clear();
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
            for (auto& [line, text] : finished_) output_.write(text);
            finished_.clear();
        }
        while (!output_.flushed()) poller_.poll_once(1000);
        show_progress(true);
        return exit_code;
    }

    std::vector<Offer> offers_;
    std::vector<std::string> names_;
    std::vector<const Limits*> limits_;
    const std::size_t parallel_;
    bool pools_closed_ = false;  // the input is exhausted: no sandbox is started ahead any more
    const bool keep_order_;
    sys::SignalFd& signals_;
    sys::Poller poller_;
    LineReader input_;
    LineWriter output_;
    sys::TimerFd progress_timer_;
    const bool progress_shown_;
    std::optional<std::size_t> total_;
    Clock::time_point start_;
    std::vector<Running> running_;
    std::size_t lines_ = 0;
    std::size_t next_line_ = 1;
    std::map<std::size_t, std::string> finished_;
    std::vector<std::size_t> skipped_;
    std::size_t done_ = 0;
    std::map<std::string, std::size_t> failures_;
    bool setup_failed_ = false;
    int stop_signal_ = 0;
};

}  // namespace

std::variant<Job, BadRequest> parse_job(std::string_view line,
                                        std::span<const std::string> profiles,
                                        std::span<const Limits* const> limits) {
    if (line.size() > kMaxRequestLine)
        return BadRequest{nullptr, "the job line is over " + units::format_size(kMaxRequestLine)};
    json request = json::parse(line, nullptr, false);
    if (request.is_discarded()) return BadRequest{nullptr, "the job is not valid JSON"};
    if (!request.is_object())
        return BadRequest{nullptr, "a job must be a JSON object, not " + type_of(request)};
    json id = request.contains("id") ? request["id"] : json(nullptr);
    try {
        Job job = parse_job_fields(request, profiles, limits);
        job.cell.id = id;
        return job;
    } catch (const std::invalid_argument& e) {
        return BadRequest{std::move(id), e.what()};
    }
}

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
    std::vector<Offer> offers =
        plan_offers(options.profiles, options.overrides, options.verbose, host_env, options.fork);
    sys::SignalFd signals{SIGINT, SIGTERM, SIGHUP};
    if (offers.front().plan->ids.privileged) check_sys(::setgroups(0, nullptr), "setgroups(0, {})");
    Batch batch(std::move(offers), options, jobs_fd, signals);
    return batch.run();
}

}  // namespace pysandbox
