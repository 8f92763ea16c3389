#include "fronts/session.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <optional>
#include <variant>

#include "engine/pool.hpp"
#include "engine/session.hpp"
#include "fronts/env.hpp"
#include "fronts/front_loop.hpp"
#include "fronts/output_events.hpp"
#include "fronts/requests.hpp"
#include "plan/plan.hpp"
#include "plan/profile.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/exit_codes.hpp"
#include "report/result.hpp"
#include "sys/timer_fd.hpp"

namespace pysandbox {
namespace {

// A terminal user's cells, as Python's own REPL reads them: one line, or a block that a line
// ending in ':' or '\\' or leaving a bracket open begins. A compound statement's block ends with
// an empty line; a bracket's or a backslash's where the statement does.
class ReplInput {
  public:
    // The cell, once `line` completes one.
    std::optional<std::string> add(const std::string& line) {
        const bool blank = is_blank(line);
        if (block_.empty() && blank) return std::nullopt;
        if (!block_.empty() && blank && depth_ <= 0 && !continued_) return take();
        block_ += line + "\n";
        depth_ += open_brackets(line);
        const std::size_t last = line.find_last_not_of(" \t\r");
        continued_ = last != std::string::npos && line[last] == '\\';
        if (depth_ <= 0 && last != std::string::npos && line[last] == ':') compound_ = true;
        if (!compound_ && depth_ <= 0 && !continued_) return take();
        return std::nullopt;
    }
    bool in_block() const { return !block_.empty(); }
    void clear() { take(); }

  private:
    std::string take() {
        std::string cell = std::move(block_);
        block_.clear();
        depth_ = 0;
        continued_ = compound_ = false;
        return cell;
    }

    std::string block_;
    int depth_ = 0;
    bool continued_ = false;
    bool compound_ = false;
};

class SessionFront {
  public:
    SessionFront(const Plan& plan, bool repl, std::size_t pool)
        : plan_(plan),
          repl_(repl),
          loop_(plan.ids.privileged, STDIN_FILENO, kMaxRequestLine),
          pool_(plan, loop_.poller(), pool),
          pooled_(pool > 0),
          session_(pool_.take()) {
        using Interest = sys::Poller::Interest;
        loop_.watch_signals([this](int sig) { on_signal(sig); });
        loop_.poller().watch(
            [this] {
                return Interest{lifetime_.get(), POLLIN};
            },
            [this](short) { on_lifetime(); });
        loop_.poller().watch(
            [this] {
                return Interest{idle_.get(), POLLIN};
            },
            [this](short) { on_idle(); });
        loop_.watch_lines([this] { return !loop_.stopping(); });
    }

    int run() {
        session_->start();
        lifetime_.arm(plan_.profile.limits.lifetime);
        touch();
        for (;;) {
            loop_.poller().poll_once();
            pool_.advance();
            session_->advance();
            if (const auto& failure = session_->start_failure()) {
                say(human_summary(plan_, *failure));
                return exit_codes::for_outcome(*failure);
            }
            send_output(false);
            while (auto result = session_->take_result()) {
                send_output(true);
                streaming_.reset();
                const bool lost = (*result)["state"] == "lost";
                show(std::move(*result));
                if (lost && pooled_) take_warm_sandbox();
            }
            if (!loop_.stopping()) take_input();
            if (loop_.output().broken()) stop(exit_codes::kSignalBase + SIGPIPE, "", true);
            if (!loop_.stopping() && loop_.input().exhausted() && session_->idle())
                stop(0, "", false);
            if (loop_.stopping() && session_->idle() && !closing_) {
                session_->close();
                closing_ = true;
            }
            if (closing_ && session_->closed() && loop_.output().flushed())
                return loop_.exit_code();
        }
    }

  private:
    // The state is gone anyway: the next cell runs in a sandbox the pool started ahead, not in one
    // started when it arrives.
    void take_warm_sandbox() {
        std::unique_ptr<Session> next = pool_.take();
        next->continue_after(*session_);
        pool_.retire(std::exchange(session_, std::move(next)));
    }

    void touch() { idle_.arm(plan_.profile.limits.idle_timeout); }

    void prompt() {
        if (repl_ && !loop_.stopping())
            std::cerr << (repl_input_.in_block() ? "... " : ">>> ") << std::flush;
    }

    void take_input() {
        if (!ready_) {
            if (!session_->ready()) return;
            ready_ = true;
            if (repl_) {
                std::cerr << "pysandbox session (profile " << plan_.profile.name
                          << "); Ctrl-D ends it" << std::endl;
                prompt();
            }
        }
        while (session_->idle()) {
            auto line = loop_.input().next();
            if (!line) return;
            touch();
            if (repl_) {
                if (auto code = repl_input_.add(line->text)) {
                    Cell cell;
                    cell.code = std::move(*code);
                    cell.figures_as_files = true;
                    session_->run(std::move(cell));
                    return;
                }
                prompt();
                continue;
            }
            if (line->too_long) {
                show_bad(BadRequest{
                    nullptr, "the request line is over " + units::format_size(kMaxRequestLine)});
                continue;
            }
            if (is_blank(line->text)) continue;
            auto parsed = parse_cell_request(line->text, plan_.profile.limits);
            line.reset();  // the cell holds what it needs of it: not two copies of the code
            if (auto* bad = std::get_if<BadRequest>(&parsed)) {
                show_bad(*bad);
                continue;
            }
            CellRequest& request = std::get<CellRequest>(parsed);
            if (request.stream) {
                streaming_ = request.cell.id;
                request.cell.on_output = output_.observer();
            }
            session_->run(std::move(request.cell));
            return;
        }
    }

    // A streamed cell's output since the last round, as lines {"id", "event", "data"} ahead of
    // its result (`final`: the result is next). Each round's, so that what the cell flushed
    // reaches the client at once; a stream's bytes that are not text go as base64, as in the
    // result, with "encoding": "base64".
    void send_output(bool final) {
        if (!streaming_) return;
        for (OutputEvents::Piece& piece : output_.take(final)) {
            nlohmann::ordered_json event = {
                {"id", *streaming_},
                {"event", piece.channel == OutputSegment::kStdout ? "stdout" : "stderr"},
                {"data", piece.text ? std::move(piece.bytes) : encoding::base64(piece.bytes)}};
            if (!piece.text) event["encoding"] = "base64";
            loop_.send(event);
        }
    }

    void show_bad(const BadRequest& bad) { loop_.send(bad_request_json(bad)); }

    void show(nlohmann::ordered_json result) {
        touch();
        if (lifetime_reached_) {
            result["message"] = "the session's lifetime of " +
                                units::format_duration(plan_.profile.limits.lifetime) +
                                " was reached; the sandbox was killed";
        }
        if (!repl_) {
            loop_.send(result);
            return;
        }
        // The cell's own output went to the terminal as it came; it is written before this.
        while (session_->output_pending()) loop_.poller().poll_once(100);
        if (result["value"].is_string())
            loop_.output().write(result["value"].get<std::string>() + "\n");
        loop_.flush(100);
        const std::string status = result["status"].get<std::string>();
        if (status != "ok" && status != "exception" && result["message"].is_string())
            say(result["message"].get<std::string>());
        tell_figures(result["files"]);
        if (result["state"] == "lost")
            say("the session's state was lost; the next cell starts afresh");
        prompt();
    }

    // The REPL's figures are files (Cell::figures_as_files): where each one is, on the host with
    // --output-dir, else in /tmp/work with how to have it on the host.
    void tell_figures(const nlohmann::ordered_json& files) const {
        for (const auto& file : files) {
            const std::string path = file.value("path", "");
            if (!path.starts_with("figure-") || !path.ends_with(".png")) continue;
            if (file["host_path"].is_string())
                say("figure saved: " + file["host_path"].get<std::string>());
            else
                say("figure saved: /tmp/work/" + path +
                    " (inside; start the session with --output-dir DIR to have it on the host)");
        }
    }

    void on_signal(int sig) {
        if (repl_ && sig == SIGINT && !loop_.stopping()) {
            if (!session_->idle()) {
                session_->interrupt();  // KeyboardInterrupt in the cell; asked again, the kill
            } else {
                repl_input_.clear();
                std::cerr << "\nKeyboardInterrupt" << std::endl;
                prompt();
            }
            return;
        }
        stop(exit_codes::kSignalBase + sig, "", true, sig);
    }

    void on_lifetime() {
        lifetime_.acknowledge();
        if (loop_.stopping()) return;
        lifetime_reached_ = !session_->idle();
        if (lifetime_reached_) session_->interrupt(true);
        stop(0,
             "the session's lifetime of " + units::format_duration(plan_.profile.limits.lifetime) +
                 " was reached; it ended",
             false);
    }

    void on_idle() {
        idle_.acknowledge();
        if (loop_.stopping() || !session_->idle()) return;
        stop(0,
             "no request for " + units::format_duration(plan_.profile.limits.idle_timeout) +
                 " (limits.idle_timeout); the session ended",
             false);
    }

    // Ends the session: at once (`now`: a signal, the reader gone), else once the cell running
    // has its result. A cell running when pysandbox got a signal is answered, killed by it
    // (`interrupted_by`), as `run --json` answers.
    void stop(int exit_code, const std::string& why, bool now, int interrupted_by = 0) {
        if (!loop_.stop(exit_code)) return;
        if (!why.empty()) say(why);
        if (now) {
            session_->close(interrupted_by);
            closing_ = true;
        }
    }

    const Plan& plan_;
    const bool repl_;
    FrontLoop loop_;  // first: the signals are blocked before the first sandbox is cloned
    Pool pool_;       // with --pool: sandboxes started ahead, for after a lost state
    const bool pooled_;
    std::unique_ptr<Session> session_;
    ReplInput repl_input_;
    OutputEvents output_;                      // the running cell's, when it streams
    std::optional<nlohmann::json> streaming_;  // the id of the running cell, when it streams
    sys::TimerFd lifetime_;
    sys::TimerFd idle_;
    bool ready_ = false;
    bool closing_ = false;
    bool lifetime_reached_ = false;
};

}  // namespace

int run_session(const SessionInvocation& invocation, const std::vector<std::string>& host_env) {
    Profile profile = load_profile(invocation.profile, profile_search_dirs());
    const bool repl = ::isatty(STDIN_FILENO) && !invocation.ndjson;
    Request request;
    request.program.kind = Program::Kind::driver;
    request.overrides = invocation.overrides;
    // Installed before the first cell is read: every sandbox of the session mounts them.
    if (const auto failed = env::profile_packages(invocation.profile, request.overrides,
                                                  invocation.verbose, host_env))
        return *failed;
    request.capture_output = !repl;
    request.verbose = invocation.verbose;
    std::unique_ptr<const Plan> plan = make_plan(std::move(profile), request, host_env);
    SessionFront front(*plan, repl, invocation.pool);
    return front.run();
}

}  // namespace pysandbox
