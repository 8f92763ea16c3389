#pragma once
// What happened in one run, as facts: how the sandbox ended, what it printed, what it used, what
// was blocked and what it left. The supervisor fills what it saw while the sandbox ran, collection
// (collect.hpp) what the run left behind; result, incident and exit codes are read from it.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plan/policy.hpp"
#include "report/artifact.hpp"

namespace pysandbox {

// A stretch of captured output: which stream, how many bytes (engine/stream.hpp, Transcript).
struct OutputSegment {
    enum Channel { kStdout = 0, kStderr = 1 };
    Channel channel;
    std::uint64_t length;
};

struct Outcome {
    enum class Kind {
        exited,            // the script exited: exit_code
        signaled,          // the script was killed by `signal` (CPU limit included)
        timeout,           // the wall-clock deadline passed; the sandbox was killed
        interrupted,       // pysandbox got `signal` (SIGINT, SIGTERM, SIGHUP) and ended the sandbox
        setup_failed,      // a child step failed: step, error, detail
        exec_failed,       // the interpreter could not be executed: error, detail
        lost,              // the sandbox's init died without a report (killed from outside)
        zygote_lost,       // a forked sandbox died with the zygote it was forked from
        policy_violation,  // a denied system call ended the sandbox (seccomp action "kill")
    };
    Kind kind = Kind::lost;
    // A session cell after which the sandbox lives on: a limit it reached interrupted the cell
    // (KeyboardInterrupt, MemoryError) rather than killing anything.
    bool sandbox_kept = false;
    int exit_code = 0;
    int signal = 0;
    int error = 0;
    std::string step;
    std::string detail;
    std::chrono::milliseconds setup{0};    // clone to execve of the interpreter
    std::chrono::milliseconds wall{0};     // execve to the end of the script
    std::chrono::milliseconds collect{0};  // the end of the script to the end of collection
    std::int64_t cpu_ms = 0;
    // A session cell's: the CPU time of every cell so far, which the session's CPU limit counts.
    std::optional<std::int64_t> session_cpu_ms;
    std::int64_t max_rss_kib = 0;
    std::uint64_t stdout_bytes = 0;
    std::uint64_t stderr_bytes = 0;
    std::uint64_t stdout_omitted = 0;  // cut from the middle by the output limit
    std::uint64_t stderr_omitted = 0;
    // The caller's reader of the passed-through stdout went away (EPIPE), as `| head` does: the
    // script's failing status is the caller's doing, not news to report.
    bool stdout_reader_gone = false;
    std::map<std::string, std::uint64_t> blocked_syscalls;  // name -> times denied
    std::string killing_syscall;                            // for policy_violation
    std::uint64_t oom_kills = 0;  // from the cgroup's memory.events, when one was used
    // An allocation the kernel refused at the memory limit, as the supervisor measured it
    // (seccomp.hpp, AllocationWatch).
    bool allocation_refused = false;
    // The supervisor ended the sandbox at the CPU limit, measured by itself (sandbox.kernel =
    // "gvisor": engine/sandbox.cpp, on_cpu_watch).
    bool cpu_limit_reached = false;
    // A session cell's: the times its driver's channel ran past its budget and was muted
    // (engine/control_channel.hpp), the script's flooding.
    std::uint64_t channel_mutes = 0;

    // --trace-syscalls: every call the script made, by name, and what the profile does with it
    // ("allowed", "denied", "errno ENOSYS", "killed").
    struct TracedCall {
        std::uint64_t count = 0;
        std::string verdict;
    };
    std::optional<std::map<std::string, TracedCall>> traced_syscalls;

    // With --json the script's output is kept here (capped) instead of passed through: each
    // stream once, and the order the bytes arrived in.
    struct Captured {
        std::string stdout_text;
        std::string stderr_text;
        std::vector<OutputSegment> order;
        // encoding::is_text of each, when the capture already knows it (Transcript::is_text).
        std::optional<bool> stdout_is_text;
        std::optional<bool> stderr_is_text;
    };
    std::optional<Captured> captured;
    // Without --json the script's stderr passes through, and only its last bytes are kept here
    // (the output limit's cut tail included): where the exception it ended with is read from.
    static constexpr std::size_t kStderrTail = 64 * 1024;
    std::string stderr_tail;
    std::map<std::string, std::uint64_t> blocked_connections;  // "host:port" -> times denied
    std::vector<artifacts::Artifact> files;                    // what the run left in /tmp/work
    std::uint64_t files_omitted = 0;    // artifacts past the listing's bounds (artifacts.hpp)
    std::vector<std::string> warnings;  // what pysandbox could not do for the caller
    policy::Records policy;             // what the audit hook reported (the script's own word)
};

// "SIGKILL" for 9.
std::string signal_name(int sig);

}  // namespace pysandbox
