#pragma once
// A session: one sandboxed interpreter, the cell driver (src/python/pysandbox_driver.py), that
// keeps its state across cells. The engine under `pysandbox session` (fronts/session.cpp) and the
// server's sessions and calls.
//
// One cell at a time. The supervisor keeps each cell's time: at its timeout the script gets SIGINT
// (a plain loop ends in KeyboardInterrupt and the state is kept); if the cell has not answered
// after kInterruptGrace the sandbox is killed, the state is lost, and the next cell runs in a fresh
// sandbox. What the driver says (a cell's end, its value, figures) is the script's word, taken
// only with the cell's token; how the cell ended (timeout, limits, a dead sandbox), its usage and
// "state" are the supervisor's own evidence.
//
// The owner drives the poll loop and calls advance() after each round.

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/artifacts.hpp"
#include "engine/collect.hpp"
#include "engine/sandbox.hpp"
#include "engine/zygote.hpp"
#include "plan/plan.hpp"
#include "report/outcome.hpp"
#include "sys/poller.hpp"
#include "sys/timer_fd.hpp"

namespace pysandbox {

// How long an interrupted cell may take to stop before its sandbox is killed.
inline constexpr std::chrono::milliseconds kInterruptGrace{500};

// The least a cell waits for its sandbox's start (the interpreter, the profile's [python]
// preload) when its timeout is shorter: a start takes milliseconds, a preload seconds on a loaded
// host; a start that takes longer than both has hung, and the cell fails as a setup failure.
inline constexpr std::chrono::milliseconds kStartWait{10'000};

// A file placed in /tmp/work before a cell's code runs.
struct CellFile {
    std::string name;  // a plain name (is_plain_name), checked by the front
    std::string data;
};

struct Cell {
    nlohmann::json id;  // echoed in the result
    std::string code;
    std::chrono::milliseconds timeout{0};  // 0: the profile's wall_time (at most that anyway)
    std::vector<CellFile> files;
    std::vector<std::string> warnings;  // what the front adjusted (for the result)
    // A batch job's: sys.argv and sys.stdin for this cell (else [""] and end of file), and the
    // name its code has in tracebacks (else "<cell-N>").
    std::optional<std::vector<std::string>> argv;
    std::optional<std::string> stdin_data;
    std::string filename;
    // A terminal's REPL: the cell's figures (plt.show(), and those left open) are saved as
    // figure-N.png in /tmp/work, files like any other (copied to DIR/cell-N with --output-dir),
    // rather than returned as PNG in the result.
    bool figures_as_files = false;
    // A Jupyter kernel's (fronts/kernel.cpp): the driver also sends the value's MIME bundle and
    // what the cell passed to display(), as result["rich"]; or, with `query` ({"kind":
    // "complete" or "inspect", "code", "cursor"}), runs no code and answers the question from the
    // namespace, as result["answer"]. Both are the script's word, passed on as the driver sent
    // them (within the channel's bounds): the kernel checks them.
    bool rich = false;
    nlohmann::json query;  // null: a cell to run
    // Shown the cell's output while it runs, as the sandbox keeps it (OutputObserver, stream.hpp):
    // what reaches it, in order, is what the result's stdout and stderr hold. Called until the
    // result is there, or the session drops the cell (close()); never after.
    OutputObserver on_output;
    // A kernel's cell whose client answers input requests (allow_stdin): the driver's input()
    // and getpass.getpass() ask the session, which passes the prompt (at most kMaxInputPrompt
    // bytes, else the cell's input() raises ValueError) and whether it is a password to on_input;
    // the owner answers with answer_input() or refuse_input(), or never (the cell's timeout or an
    // interrupt ends the wait). Without it, input() in a kernel's cell raises
    // StdinNotImplementedError. Called only while the cell runs.
    std::function<void(const std::string& prompt, bool password)> on_input;
};

// A cell's result as the result of a sandbox that ran that one cell only (an MCP call, a batch
// job): without the session's fields (cell, sandbox, state), a timeout said as `run` says it.
nlohmann::ordered_json one_shot_result(nlohmann::ordered_json cell_result);

class Session {
  public:
    // The plan must be the driver's (Program::Kind::driver) and outlive the session. With a
    // zygote (made for that plan, outliving the session), its sandboxes are forked by it.
    Session(const Plan& plan, sys::Poller& poller, Zygote* zygote = nullptr);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Starts a sandbox now, ahead of the first cell: cloned, or forked by its zygote, which it
    // waits for in the loop while it starts (advance() forks it then). Throws UserNamespaceError
    // or SysError.
    void start();
    // The sandbox is started and its driver ready, with no cell running.
    bool ready() const { return phase_ == Phase::idle; }
    // Its sandbox was forked by a zygote that has ended (Sandbox::orphaned).
    bool orphaned() const { return sandbox_ && sandbox_->orphaned(); }
    // No cell is running or waiting: run() may be called.
    bool idle() const { return !cell_ && !result_; }
    // The first sandbox could not start (the outcome says why); the session cannot go on.
    const std::optional<Outcome>& start_failure() const { return start_failure_; }

    // Runs `cell` (when idle()); starts a sandbox first if there is none. Its result comes from
    // take_result() once it is there.
    void run(Cell cell);
    std::optional<nlohmann::ordered_json> take_result();

    // Called after each round of the poll loop: what the sandbox said or did.
    void advance();

    // Interrupts the running cell as its timeout would, without being one: SIGINT, and the kill
    // if the cell has not answered after kInterruptGrace (or at once, or when asked again).
    void interrupt(bool kill_now = false);

    // The answer to the input() the running cell's on_input announced: it returns `value`, or
    // raises ValueError saying `why`. Nothing when no input() waits (it was interrupted, the cell
    // ended).
    void answer_input(const std::string& value);
    void refuse_input(const std::string& why);

    // Output of the sandbox's not yet written to pysandbox's own stdout or stderr (passed through,
    // at a terminal).
    bool output_pending() const { return sandbox_ && sandbox_->output_pending(); }

    // Goes on from `previous` (whose state was lost): its cell and sandbox numbers and output
    // names, in this session's own (warm) sandbox.
    void continue_after(const Session& previous);

    // Names the host copies of this session's cells (--output-dir): DIR/NAME-cell-N, or DIR/NAME
    // for a session that runs one cell only (an MCP call, a batch job). Default: DIR/cell-N.
    void name_output(std::string name, bool per_cell) {
        output_name_ = std::move(name);
        output_per_cell_ = per_cell;
    }

    // Ends the sandbox; closed() once nothing of it is left. A cell that is running (or waiting
    // for its sandbox) when pysandbox got a signal is answered, as `run` answers: killed, by
    // `interrupted_by`; otherwise (0) it is dropped.
    void close(int interrupted_by = 0);
    bool closed() const { return phase_ == Phase::none && !sandbox_; }

  private:
    // forking: no sandbox yet, its zygote is starting (zygote.hpp); starting: its driver is.
    enum class Phase { none, forking, starting, idle, running, interrupting, ending };

    void start_sandbox();
    void await_zygote();
    void fork_when_ready();
    // The step a start failure names: the host refused one, or one was not ready in time.
    static constexpr const char* kStartStep = "start a sandbox";
    static constexpr const char* kStartWaitStep = "wait for the sandbox's start";
    void fail_start(const std::string& why, int error = EAGAIN, const char* step = kStartStep);
    void arm_start_wait();
    void drop_waiting_cell();
    void dispatch();
    void on_timer();
    void take_messages();
    void on_message(const ControlMessage& received);
    void on_sandbox_end();
    void finish(const nlohmann::json* done);
    Outcome cell_outcome(const nlohmann::json* done, Supervised* ended);
    void collect_cell(const LeftBehind& left, Outcome& outcome);
    ArtifactTarget cell_target(sys::UniqueFd& cell_dir, Outcome& outcome);
    std::string cell_name() const;
    int output_parent() const;
    void drop_inputs(Outcome& outcome, int cell_dir) const;
    std::string cell_filename() const;
    nlohmann::ordered_json cell_result(Outcome outcome, const nlohmann::json* done);
    void add_driver_words(nlohmann::ordered_json& result, const nlohmann::json* done);
    void on_input_request(const nlohmann::json& message);
    void reply_input(nlohmann::json answer, bool owner);
    void expect_driver();

    const Plan& plan_;
    sys::Poller& poller_;
    Zygote* zygote_;
    std::size_t zygote_failures_ = 0;  // the zygote's failures when the session began to wait
    bool zygote_lost_ = false;         // the last fork found its zygote ended
    sys::TimerFd timer_;
    std::unique_ptr<Sandbox> sandbox_;
    bool sandbox_used_ = false;  // a cell was sent to it: the script has run there
    Phase phase_ = Phase::none;
    int sandboxes_ = 0;
    std::optional<Outcome> start_failure_;
    std::vector<std::string> warnings_;  // for the next result

    std::optional<Cell> cell_;
    int cells_ = 0;
    std::string token_;
    std::chrono::milliseconds timeout_{0};
    std::chrono::system_clock::time_point deadline_;  // the cell's, as the kernel stamps records
    std::chrono::steady_clock::time_point cell_start_;
    std::chrono::milliseconds cell_setup_{0};  // the sandbox start this cell waited for
    Sandbox::Usage usage_before_;              // the interpreter's, when the cell began
    Sandbox::Usage last_usage_;                // the latest reading, for a sandbox that was killed
    std::uint64_t oom_before_ = 0;
    std::uint64_t dropped_reported_ = 0;  // malformed driver messages already warned about
    std::uint64_t mutes_reported_ = 0;    // the channel's mutes already reported
    bool timed_out_ = false;
    bool start_timed_out_ = false;    // the cell's timeout came while its sandbox was starting
    int interrupted_by_ = 0;          // the signal that closed the session during a cell
    artifacts::Snapshot files_seen_;  // /tmp/work after the previous cell
    sys::UniqueFd output_dir_;        // --output-dir, once made (when the plan found none)
    std::string output_name_;
    bool output_per_cell_ = true;
    std::optional<nlohmann::ordered_json> result_;
    std::optional<std::int64_t> input_asked_;  // the driver's number of the input() waiting
    int inputs_unanswered_ = 0;                // since the cell began or the last answer
};

}  // namespace pysandbox
