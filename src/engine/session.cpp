#include "engine/session.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/collect.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/exit_codes.hpp"
#include "report/incident.hpp"
#include "report/result.hpp"
#include "sys/errors.hpp"
#include "sys/sha256.hpp"
#include "wire/fds.hpp"

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// A value's repr, and a figure, as the driver may send them: more is the script's doing and is
// dropped with a warning.
constexpr std::size_t kMaxValue = 256 * 1024;
constexpr std::size_t kMaxFigures = 32;
// Input requests a cell may make while none is answered (each one a message to the client).
constexpr int kMaxInputsUnanswered = 8;
constexpr std::string_view kPngBase64 = "iVBORw0KGgo";  // the PNG signature, base64
// Members a cell's result has that result_json's body has not (id, cell, sandbox, state, value,
// figures, rich, answer, message, warnings), and then some.
constexpr std::size_t kMembersAdded = 16;

bool is_base64_png(const std::string& text) {
    if (!text.starts_with(kPngBase64) || text.size() % 4 != 0) return false;
    return std::ranges::all_of(
        text, [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '/' || c == '='; });
}

const std::string* string_field(const json& message, const char* name) {
    const auto it = message.find(name);
    return it != message.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

}  // namespace

Session::Session(const Plan& plan, sys::Poller& poller, Zygote* zygote)
    : plan_(plan), poller_(poller), zygote_(zygote) {
    using Interest = sys::Poller::Interest;
    poller_.watch(
        [this] {
            return Interest{timer_.get(), POLLIN};
        },
        [this](short) { on_timer(); }, this);
}

Session::~Session() {
    poller_.forget(this);
}

void Session::start() {
    if (phase_ == Phase::none) start_sandbox();
}

// Cloned now, or forked now by a zygote that is ready. A zygote still starting is waited for in
// the loop, never here (zygote.hpp): the session is forking until advance() sees it ready, or
// sees that it failed. Throws what cloning or forking throws.
void Session::start_sandbox() {
    if (zygote_) {
        zygote_->advance();  // a replacement that is ready is taken on, one is started if none is
        try {
            if (zygote_->ready()) sandbox_ = std::make_unique<Sandbox>(plan_, poller_, *zygote_);
        } catch (const ZygoteEnded&) {
            // It ended between the look and the fork: its replacement is asked, once.
            if (std::exchange(zygote_lost_, true)) throw;
            zygote_->advance();
        }
        if (!sandbox_) {
            await_zygote();
            return;
        }
        zygote_lost_ = false;
    } else {
        sandbox_ = std::make_unique<Sandbox>(plan_, poller_);
    }
    if (cell_) sandbox_->observe_output(cell_->on_output);
    sandbox_->feed_stdin({});  // a cell's input() reads end of file
    phase_ = Phase::starting;
    sandbox_used_ = false;
    ++sandboxes_;
    files_seen_.clear();
    usage_before_ = {};
    last_usage_ = {};
    oom_before_ = 0;
    dropped_reported_ = 0;
    mutes_reported_ = 0;
    sandbox_->control()->expect("ready");
    if (cell_) arm_start_wait();
}

// A cell waits for its sandbox's start (its zygote's, then the interpreter's, the profile's
// [python] preload included) at most its timeout, or kStartWait when that is shorter, from when
// it came; then the cell fails (on_timer). Its own time counts from dispatch().
void Session::arm_start_wait() {
    const Clock::time_point end = cell_start_ + std::max(timeout_, kStartWait);
    timer_.arm(std::max(duration_cast<milliseconds>(end - Clock::now()), milliseconds{1}));
}

// Waits for the zygote to be ready, noting how many had failed: one more is the one it waited for.
// None is starting (the host refused the last one's sandbox, or the next waits out its pause after
// a failure): nothing would end the wait, so the start fails now.
void Session::await_zygote() {
    if (!zygote_->starting()) {
        fail_start("the fork server's zygote did not start (" + zygote_->failure() + ")");
        return;
    }
    if (phase_ != Phase::forking) zygote_failures_ = zygote_->failures();
    phase_ = Phase::forking;
    if (cell_) arm_start_wait();
}

// While forking, after each round: the sandbox is forked once the zygote is ready; the zygote it
// waited for failing ends the wait, as a fork that failed would.
void Session::fork_when_ready() {
    zygote_->advance();
    if (zygote_->ready()) {
        try {
            start_sandbox();
        } catch (const SysError& e) {
            fail_start(e.what(), e.error);
        } catch (const std::exception& e) {
            fail_start(e.what());
        }
    } else if (zygote_->failures() != zygote_failures_) {
        fail_start("the fork server's zygote did not start (" + zygote_->failure() + ")");
    }
}

// No sandbox could be started (the host refused one, its zygote could not fork it): the cell
// waiting for it has that for its result; without one, the session cannot go on.
void Session::fail_start(const std::string& why, int error, const char* step) {
    Outcome outcome;
    outcome.kind = Outcome::Kind::setup_failed;
    outcome.error = error;
    outcome.step = step;
    outcome.detail = why;
    phase_ = Phase::none;
    if (cell_) {
        outcome.setup = outcome.wall = duration_cast<milliseconds>(Clock::now() - cell_start_);
        timer_.arm(std::chrono::nanoseconds{0});  // the owner's next round takes the result
        result_ = cell_result(std::move(outcome), nullptr);
        cell_.reset();
    } else {
        start_failure_ = std::move(outcome);
    }
}

void Session::continue_after(const Session& previous) {
    cells_ = previous.cells_;
    sandboxes_ += previous.sandboxes_;
    output_name_ = previous.output_name_;
    output_per_cell_ = previous.output_per_cell_;
}

void Session::run(Cell cell) {
    cell_ = std::move(cell);
    ++cells_;
    cell_start_ = Clock::now();
    cell_setup_ = milliseconds{0};
    const milliseconds limit = plan_.profile.limits.wall_time;
    timeout_ = cell_->timeout.count() > 0 ? std::min(cell_->timeout, limit) : limit;
    start_timed_out_ = false;
    if (phase_ == Phase::starting || phase_ == Phase::forking)
        arm_start_wait();  // a warm sandbox, not ready yet
    if (phase_ == Phase::none) {
        try {
            start_sandbox();
        } catch (const SysError& e) {  // clone3 or the id maps: the host refused
            fail_start(e.what(), e.error);
            return;
        } catch (const std::exception& e) {
            fail_start(e.what());
            return;
        }
    }
    if (sandbox_) sandbox_->observe_output(cell_->on_output);
    if (phase_ == Phase::idle) dispatch();
}

void Session::dispatch() {
    const bool first = !std::exchange(sandbox_used_, true);
    token_ = encoding::random_hex(16);
    json files = json::array();
    for (const CellFile& file : cell_->files)
        files.push_back({{"name", file.name}, {"data", encoding::base64(file.data)}});
    json message = {{"kind", "cell"},      {"token", token_},
                    {"cell", cells_},      {"filename", cell_filename()},
                    {"code", cell_->code}, {"files", std::move(files)}};
    if (cell_->argv) message["argv"] = *cell_->argv;
    if (cell_->stdin_data) message["stdin"] = encoding::base64(*cell_->stdin_data);
    if (cell_->figures_as_files) message["figure_files"] = true;
    if (cell_->rich) message["rich"] = true;
    if (cell_->on_input) message["input"] = true;
    if (!cell_->query.is_null()) message["query"] = cell_->query;
    sandbox_->control()->send(message);
    input_asked_.reset();
    inputs_unanswered_ = 0;
    expect_driver();
    deadline_ = std::chrono::system_clock::now() + timeout_;
    const Clock::time_point now = Clock::now();
    cell_setup_ = duration_cast<milliseconds>(now - cell_start_);
    cell_start_ = now;
    // Its CPU time only: the cell's peak is the interpreter's, read at its end. A sandbox's
    // first cell counts from its ready (on_message).
    if (!first) usage_before_ = sandbox_->interpreter_usage(false).value_or(usage_before_);
    if (cgroup::RunCgroup* cgroup = sandbox_->cgroup()) oom_before_ = cgroup->oom_kills();
    timed_out_ = false;
    timer_.arm(timeout_);
    phase_ = Phase::running;
    // Written last, the clocks armed: a driver on this CPU runs as soon as the loop sleeps, and
    // nothing of the supervisor's is left to come before it.
    sandbox_->control()->write_now();
}

// The running cell's end, and its input() requests when its owner answers them; each call opens
// the channel's budget anew (one a cell, and one an answered input()).
void Session::expect_driver() {
    if (cell_->on_input)
        sandbox_->control()->expect({"done", "input"}, token_);
    else
        sandbox_->control()->expect("done", token_);
}

// The cell's timeout, then the grace after the interrupt. What the driver sent is read first: a
// cell that answered in time did, however late this loop got round to its channel.
void Session::on_timer() {
    timer_.acknowledge();
    if (phase_ == Phase::forking && cell_) {  // its zygote was not ready in time
        fail_start(
            "the fork server's zygote was not ready after " +
                units::format_duration(duration_cast<milliseconds>(Clock::now() - cell_start_)),
            ETIME, kStartWaitStep);
        return;
    }
    if (phase_ == Phase::starting && cell_ && sandbox_) {
        // A ready that came in time goes first, however late this loop got round to it.
        if (ControlChannel* control = sandbox_->control(); control && control->wants_read())
            control->on_readable();
        take_messages();
        if (phase_ != Phase::starting || !sandbox_) return;
        // The sandbox was not ready in time (a preload that hangs, say).
        start_timed_out_ = true;
        cell_setup_ = duration_cast<milliseconds>(Clock::now() - cell_start_);
        sandbox_->kill();
        return;
    }
    const Phase phase = phase_;
    if ((phase == Phase::running || phase == Phase::interrupting) && sandbox_) {
        if (ControlChannel* control = sandbox_->control(); control && control->wants_read())
            control->on_readable();
        take_messages();
        if (phase_ != phase) return;
    }
    if (phase_ == Phase::running) {
        timed_out_ = true;
        interrupt();
    } else if (phase_ == Phase::interrupting) {
        interrupt(true);
    }
}

void Session::interrupt(bool kill_now) {
    if (cell_ && !start_timed_out_ && (phase_ == Phase::forking || phase_ == Phase::starting)) {
        drop_waiting_cell();
        return;
    }
    if (!sandbox_ || (phase_ != Phase::running && phase_ != Phase::interrupting)) return;
    if (kill_now || phase_ == Phase::interrupting) {
        if (auto usage = sandbox_->interpreter_usage()) last_usage_ = *usage;
        sandbox_->kill();
        return;
    }
    sandbox_->signal(SIGINT);  // init passes it on: KeyboardInterrupt in the cell
    timer_.arm(kInterruptGrace);
    phase_ = Phase::interrupting;
}

// A cell interrupted before it was sent (its sandbox still starting): it never runs; the sandbox
// goes on starting, for the next.
void Session::drop_waiting_cell() {
    timer_.arm(std::chrono::nanoseconds{0});  // the owner's next round takes the result
    Outcome outcome;
    outcome.kind = Outcome::Kind::interrupted;
    outcome.signal = SIGINT;
    outcome.sandbox_kept = true;
    outcome.setup = outcome.wall = duration_cast<milliseconds>(Clock::now() - cell_start_);
    result_ = cell_result(std::move(outcome), nullptr);
    (*result_)["message"] =
        "interrupted before it ran (its sandbox was still starting); the session goes on";
    if (sandbox_) sandbox_->observe_output({});
    cell_.reset();
}

void Session::close(int interrupted_by) {
    if (phase_ == Phase::forking) {  // nothing was forked: nothing to kill
        phase_ = Phase::none;
        if (cell_ && interrupted_by != 0) {
            Supervised never;
            never.outcome.kind = Outcome::Kind::interrupted;
            never.outcome.signal = interrupted_by;
            Outcome outcome = cell_outcome(nullptr, &never);
            result_ = cell_result(std::move(outcome), nullptr);
        }
        cell_.reset();
        return;
    }
    if (!sandbox_) return;
    if (cell_ && interrupted_by != 0) {
        interrupted_by_ = interrupted_by;  // on_sandbox_end answers the cell
    } else {
        cell_.reset();
        sandbox_->observe_output({});
        phase_ = Phase::ending;
    }
    sandbox_->kill();
}

void Session::advance() {
    if (phase_ == Phase::forking) fork_when_ready();
    if (!sandbox_) return;
    take_messages();
    if (sandbox_ && sandbox_->finished()) on_sandbox_end();
}

void Session::take_messages() {
    if (ControlChannel* control = sandbox_ ? sandbox_->control() : nullptr)
        while (auto message = control->receive()) {
            on_message(*message);
            if (!sandbox_) return;
        }
}

void Session::on_message(const ControlMessage& received) {
    const json& message = received.body;
    const std::string* kind = string_field(message, "kind");
    if (kind == nullptr) return;
    if (*kind == "ready" && phase_ == Phase::starting && !start_timed_out_) {
        sandbox_->control()->expect_nothing();
        phase_ = Phase::idle;
        // Read now, while no cell waits for /proc (a pool's sandbox is ready long before its
        // call): the first cell's CPU time counts from here, and nothing of the script's runs
        // before it.
        usage_before_ = sandbox_->interpreter_usage(false).value_or(usage_before_);
        if (const auto failed = message.find("failed");
            failed != message.end() && failed->is_object())
            for (const auto& [module, error] : failed->items())
                warnings_.push_back("python.preload: " + module.substr(0, 200) +
                                    " could not be imported (" +
                                    (error.is_string() ? error.get<std::string>().substr(0, 300)
                                                       : std::string("?")) +
                                    ")");
        if (cell_) dispatch();
        return;
    }
    const bool in_cell = phase_ == Phase::running || phase_ == Phase::interrupting;
    const std::string* token = string_field(message, "token");
    if (*kind == "done" && in_cell && token != nullptr && *token == token_) {
        // Timed out by the cell's own clock: the kernel's stamp of when the driver answered.
        if (received.sent) timed_out_ = *received.sent > deadline_;
        finish(&message);
    } else if (*kind == "input" && in_cell && token != nullptr && *token == token_ &&
               cell_->on_input) {
        on_input_request(message);
    }
}

// The driver's input(): {"kind": "input", "token", "n" (its number), "prompt", "password"}. The
// script's word, and the script can write such requests itself, as fast as it likes, reading none
// of the answers: every one is counted until the owner answers one. The first kMaxInputsUnanswered
// go to the owner; the next as many are refused (the cell's input() raises), and what comes beyond
// is dropped without a word, so that the answers the driver does not read cannot pile up in the
// supervisor. A refusal is the session's own doing: it opens no new budget for the channel.
void Session::on_input_request(const json& message) {
    const auto number = message.find("n");
    if (number == message.end() || !number->is_number_integer()) return;
    if (++inputs_unanswered_ > 2 * kMaxInputsUnanswered) return;
    input_asked_ = number->get<std::int64_t>();
    const std::string* prompt = string_field(message, "prompt");
    if (prompt == nullptr || prompt->size() > kMaxInputPrompt) {
        reply_input({{"error", "the prompt must be a string of at most " +
                                   std::to_string(kMaxInputPrompt) + " bytes"}},
                    false);
        return;
    }
    // A request while one waits: the earlier input() was interrupted. A script that asks again
    // and again without waiting would have the owner send request after request.
    if (inputs_unanswered_ > kMaxInputsUnanswered) {
        reply_input({{"error", "more than " + std::to_string(kMaxInputsUnanswered) +
                                   " input requests went unanswered"}},
                    false);
        return;
    }
    const auto password = message.find("password");
    cell_->on_input(*prompt, password != message.end() && *password == true);
}

void Session::answer_input(const std::string& value) {
    reply_input({{"value", value}}, true);
}

void Session::refuse_input(const std::string& why) {
    reply_input({{"error", why}}, true);
}

// `owner`: the owner answered (its answers are as many as its requests, and each opens the
// channel's budget anew); else the session refused on its own.
void Session::reply_input(json answer, bool owner) {
    if (!input_asked_ || !cell_ || (phase_ != Phase::running && phase_ != Phase::interrupting))
        return;
    json message = {{"kind", "input"}, {"token", token_}, {"n", *input_asked_}};
    message.update(answer);
    input_asked_.reset();
    sandbox_->control()->send(message);
    if (!owner) return;
    inputs_unanswered_ = 0;
    expect_driver();
}

// The cell ended and its sandbox lives on.
void Session::finish(const json* done) {
    timer_.disarm();
    sandbox_->control()->expect_nothing();
    Outcome outcome = cell_outcome(done, nullptr);
    sandbox_->observe_output({});
    result_ = cell_result(std::move(outcome), done);
    cell_.reset();
    phase_ = Phase::idle;
}

void Session::on_sandbox_end() {
    timer_.disarm();
    const bool in_cell = phase_ == Phase::running || phase_ == Phase::interrupting;
    Supervised ended = sandbox_->take(Ending{.timed_out = timed_out_ && in_cell,
                                             .interrupted_by = interrupted_by_,
                                             .due = std::nullopt});
    interrupted_by_ = 0;
    if (start_timed_out_ && phase_ == Phase::starting && cell_) {
        fail_start("it was not ready after " + units::format_duration(cell_setup_) +
                       " (its interpreter, with the profile's [python] preload, was still "
                       "starting) and was killed",
                   ETIME, kStartWaitStep);
    } else if (in_cell || (phase_ == Phase::starting && cell_)) {
        Outcome outcome = cell_outcome(nullptr, &ended);
        result_ = cell_result(std::move(outcome), nullptr);
        cell_.reset();
    } else if (phase_ == Phase::starting) {
        if (sandboxes_ == 1) start_failure_ = std::move(ended.outcome);
    } else if (phase_ == Phase::idle) {
        const std::string why = human_summary(plan_, ended.outcome);
        warnings_.push_back("the sandbox ended between cells" +
                            (why.empty() ? "" : " (" + why + ")") +
                            "; its state is lost: this cell ran in a fresh sandbox");
    }
    if (ended.proxy) ended.proxy->stop();
    sandbox_.reset();
    phase_ = Phase::none;
}

Outcome Session::cell_outcome(const json* done, Supervised* ended) {
    Outcome outcome;
    if (ended != nullptr) {
        outcome = std::move(ended->outcome);
        // The exited report has the interpreter's whole CPU time and peak; without one (the
        // sandbox was killed) the last reading stands.
        const Sandbox::Usage total =
            outcome.cpu_ms > 0 ? Sandbox::Usage{outcome.cpu_ms, outcome.max_rss_kib} : last_usage_;
        outcome.session_cpu_ms = total.cpu_ms;
        outcome.cpu_ms = std::max<std::int64_t>(0, total.cpu_ms - usage_before_.cpu_ms);
        outcome.max_rss_kib = total.max_rss_kib;
        collect_cell({ended->work_dir.get(), ended->proxy.get(), ended->cgroup.get()}, outcome);
    } else {
        CutOutput cut = sandbox_->cut_output();
        outcome.captured = std::move(cut.captured);
        outcome.stdout_bytes = cut.stdout_bytes;
        outcome.stderr_bytes = cut.stderr_bytes;
        outcome.stdout_omitted = cut.stdout_omitted;
        outcome.stderr_omitted = cut.stderr_omitted;
        sandbox_->take_blocks(outcome);
        const Sandbox::Usage now = sandbox_->interpreter_usage().value_or(usage_before_);
        last_usage_ = now;
        outcome.session_cpu_ms = now.cpu_ms;
        outcome.cpu_ms = std::max<std::int64_t>(0, now.cpu_ms - usage_before_.cpu_ms);
        outcome.max_rss_kib = now.max_rss_kib;
        outcome.kind = timed_out_ ? Outcome::Kind::timeout : Outcome::Kind::exited;
        const std::string* how = string_field(*done, "outcome");
        if (how != nullptr && *how == "exception") outcome.exit_code = 1;
        if (how != nullptr && *how == "exit") {
            const auto code = done->find("exit_code");
            outcome.exit_code =
                code != done->end() && code->is_number_integer() ? code->get<int>() & 0xff : 1;
        }
        outcome.sandbox_kept = true;
        collect_cell({sandbox_->work_dir(), sandbox_->proxy(), sandbox_->cgroup()}, outcome);
    }
    outcome.setup = cell_setup_;
    outcome.wall = duration_cast<milliseconds>(Clock::now() - cell_start_);
    return outcome;
}

// What the cell left (collect.hpp): what it changed under /tmp/work, with --output-dir copied to
// DIR/cell-N; the proxy's denials and the OOM kills since the cell began. The sandbox may live on:
// the proxy is not stopped.
void Session::collect_cell(const LeftBehind& left, Outcome& outcome) {
    const Clock::time_point start = Clock::now();
    Gathering how;
    how.unchanged = &files_seen_;
    how.stop_proxy = false;  // the sandbox may live on
    how.oom_before = oom_before_;
    sys::UniqueFd cell_dir;  // made as the walk first needs it (cell_target)
    if (left.work_dir >= 0) how.target = cell_target(cell_dir, outcome);
    artifacts::Snapshot seen = gather(plan_, left, how, outcome);
    if (left.work_dir >= 0) {
        files_seen_ = std::move(seen);
        drop_inputs(outcome, cell_dir.get());
        if (cell_dir && outcome.files.empty())
            ::unlinkat(output_parent(), cell_name().c_str(), AT_REMOVEDIR);
        outcome.collect = duration_cast<milliseconds>(Clock::now() - start);
    }
}

std::string Session::cell_name() const {
    const std::string numbered = "cell-" + std::to_string(cells_);
    return output_name_.empty() ? numbered
           : output_per_cell_   ? output_name_ + "-" + numbered
                                : output_name_;
}

// --output-dir, as the plan found it or as a cell first made it (-1 when neither).
int Session::output_parent() const {
    return plan_.output_dir_fd ? plan_.output_dir_fd.get() : output_dir_.get();
}

// The cell's own directory under --output-dir (`cell_dir`), or nowhere without one. It is made
// when the walk first has something for it: most cells leave no file, and a directory made and
// removed on the host for each would cost a call more than its cell (journaled metadata).
ArtifactTarget Session::cell_target(sys::UniqueFd& cell_dir, Outcome& outcome) {
    if (!plan_.output_dir) return {};
    const std::string name = cell_name();
    ArtifactTarget target{artifacts::kHostDirLater, *plan_.output_dir + "/" + name, {}};
    target.make = [this, &cell_dir, &outcome, name, path = target.path] {
        if (!output_dir_ && !plan_.output_dir_fd)
            output_dir_ = artifacts::make_host_dir(AT_FDCWD, *plan_.output_dir);
        if (const int parent = output_parent(); parent >= 0) {
            if (plan_.ids.privileged)
                cell_dir = artifacts::make_host_dir(parent, name, plan_.ids.outer_uid,
                                                    plan_.ids.outer_gid);
            else
                cell_dir = artifacts::make_host_dir(parent, name);
        }
        if (cell_dir) return cell_dir.get();
        outcome.warnings.push_back("--output-dir: cannot create " + path + ": " +
                                   std::strerror(errno) + "; no artifact was copied");
        return artifacts::kHostDirMissing;
    };
    return target;
}

// The request's own files, as the cell found them, are not something it made: they leave the
// listing (and their copies the cell's directory, `cell_dir`).
void Session::drop_inputs(Outcome& outcome, int cell_dir) const {
    if (!cell_ || cell_->files.empty()) return;
    std::erase_if(outcome.files, [&](const artifacts::Artifact& file) {
        const bool input = std::ranges::any_of(cell_->files, [&](const CellFile& given) {
            return given.name == file.path && file.sha256 == Sha256::of(given.data);
        });
        if (input && cell_dir >= 0 && file.host_path) ::unlinkat(cell_dir, file.path.c_str(), 0);
        return input;
    });
}

ordered_json one_shot_result(ordered_json result) {
    for (const char* field : {"cell", "sandbox", "state"}) result.erase(field);
    // "interrupted" says a sandbox went on after a limit stopped the cell; this one does not.
    for (auto& violation : result["violations"])
        if (violation["action"] == "interrupted") violation["action"] = "killed";
    if (result["status"] == "timeout")
        result["message"] = "wall-clock limit of " +
                            units::format_duration(milliseconds(
                                result["limits"]["wall_time_ms"].get<std::int64_t>())) +
                            " reached; the run was stopped";
    return result;
}

std::string Session::cell_filename() const {
    if (cell_ && !cell_->filename.empty()) return cell_->filename;
    return "<cell-" + std::to_string(cells_) + ">";
}

// What the driver said of the cell (its value, figures, a file it could not place), checked: more
// than the bounds is the script's doing and is dropped with a warning.
void Session::add_driver_words(ordered_json& result, const json* done) {
    json value = nullptr;
    json figures = json::array();
    if (done != nullptr) {
        if (const std::string* repr = string_field(*done, "value")) {
            if (repr->size() <= kMaxValue)
                value = *repr;
            else
                warnings_.push_back("the cell's value was over " + std::to_string(kMaxValue) +
                                    " bytes and was dropped");
        }
        if (const auto pngs = done->find("figures"); pngs != done->end() && pngs->is_array())
            for (const auto& png : *pngs) {
                if (png.is_string() && is_base64_png(png.get_ref<const std::string&>()) &&
                    figures.size() < kMaxFigures)
                    figures.push_back({{"media_type", "image/png"}, {"data", png}});
                else
                    warnings_.push_back("a figure that is not a PNG (or one too many) was dropped");
            }
        const auto omitted = done->find("figures_omitted");
        if (omitted != done->end() && omitted->is_number_unsigned() &&
            omitted->get<std::uint64_t>())
            warnings_.push_back(std::to_string(omitted->get<std::uint64_t>()) +
                                " figures were left out (at most 32 and 16 MiB of PNG a cell)");
        if (const std::string* problem = string_field(*done, "files_error"))
            warnings_.push_back("a file could not be placed in /tmp/work: " +
                                problem->substr(0, 300));
    }
    result["value"] = std::move(value);
    result["figures"] = std::move(figures);
    if (cell_ && cell_->rich)
        result["rich"] = done != nullptr ? done->value("rich", json()) : json();
    if (cell_ && !cell_->query.is_null())
        result["answer"] = done != nullptr ? done->value("answer", json()) : json();
}

ordered_json Session::cell_result(Outcome outcome, const json* done) {
    if (const std::uint64_t mutes =
            sandbox_ && sandbox_->control() ? sandbox_->control()->mutes() : 0;
        mutes > mutes_reported_) {
        outcome.channel_mutes = mutes - mutes_reported_;
        mutes_reported_ = mutes;
    }
    // As run logs a run: each cell in which something was blocked.
    const ordered_json incident =
        incident::cell_entry(plan_, outcome, cell_filename(), cell_ ? cell_->code : "");
    if (!incident.is_null())
        if (std::string problem = incident::append(plan_, incident); !problem.empty())
            warnings_.push_back(problem);
    const bool kept = outcome.sandbox_kept;
    const bool timed_out = outcome.kind == Outcome::Kind::timeout;
    const int exit_code = exit_codes::for_outcome(outcome);
    const std::string file = cell_filename();
    ordered_json body = result_json(plan_, std::move(outcome), exit_code, file);

    ordered_json result = {{"schema", body["schema"]}, {"version", body["version"]}};
    // Room for every member at once: the object's vector would otherwise grow as they are added
    // and copy its members (a pair with a const key has no noexcept move), the cell's output
    // among them, each time.
    result.get_ref<ordered_json::object_t&>().reserve(body.size() + kMembersAdded);
    result["id"] = cell_ ? cell_->id : json(nullptr);
    result["cell"] = cells_;
    result["sandbox"] = sandboxes_;
    result["state"] = kept ? "kept" : "lost";
    for (auto& [key, value] : body.items())
        if (key != "schema" && key != "version") result[key] = std::move(value);
    result["limits"]["wall_time_ms"] = timeout_.count();
    if (timed_out)
        result["message"] =
            "the cell's timeout of " + units::format_duration(timeout_) + " was reached; " +
            (kept ? "it was interrupted (KeyboardInterrupt) and the session's state was kept"
                  : "it did not stop within " + units::format_duration(kInterruptGrace) +
                        " of the interrupt, so the sandbox was killed and the session's state "
                        "is lost");

    add_driver_words(result, done);
    if (const std::uint64_t dropped =
            sandbox_ && sandbox_->control() ? sandbox_->control()->dropped() : 0;
        dropped > dropped_reported_) {
        warnings_.push_back(std::to_string(dropped - dropped_reported_) +
                            " malformed messages on the driver's channel were dropped");
        dropped_reported_ = dropped;
    }
    if (cell_)
        for (const std::string& warning : cell_->warnings) result["warnings"].push_back(warning);
    for (std::string& warning : warnings_) result["warnings"].push_back(std::move(warning));
    warnings_.clear();
    return result;
}

std::optional<ordered_json> Session::take_result() {
    return std::exchange(result_, std::nullopt);
}

}  // namespace pysandbox
