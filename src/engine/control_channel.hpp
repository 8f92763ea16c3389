#pragma once
// The channel between the supervisor and the cell driver inside the sandbox
// (src/python/pysandbox_driver.py): a SOCK_SEQPACKET socket pair whose other end the interpreter
// holds at kControlFd. A message is one JSON object, its text split into records of at most
// kControlRecord bytes, each starting with '+' (more follows) or '.' (the last one) and eight hex
// digits numbering it within its message.
//
// The driver shares its process with the script, so what arrives here is the script's word: a
// message over kMaxControlMessage bytes, one that is not a JSON object, or one shaped unlike any
// the driver sends (over kMaxControlValues values or kMaxControlDepth deep: such a tree parses
// into many times its size, in this process, outside the sandbox's limits) is dropped whole and
// counted; a descriptor sent along is closed unread. Whoever reads a message decides what to
// believe of it (engine/session.cpp checks each cell's token).
//
// One supervisor serves many sandboxes, so no channel may take its time from the others. The
// driver writes its messages head first: `{"kind":"ready"`, `{"kind":"done","token":"T"` and
// `{"kind":"input","token":"T"`. Once the reader says what it waits for (expect), a message whose
// first record does not begin with such a head is skipped record by record, never kept or parsed.
// And each expect() opens a budget: the bytes read, and the supervisor thread's CPU spent on the
// channel beyond parsing the message it takes. Past either the channel is muted (nothing more is
// read until the next expect()) and counted (mutes): the script's doing, which the cell's result
// reports.

#include <time.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sys/unique_fd.hpp"
#include "wire/fds.hpp"

namespace pysandbox {

// A flat object: a cell's figures are at most 32 strings, a preload failure is one per module.
inline constexpr std::size_t kMaxControlValues = 4096;
inline constexpr std::size_t kMaxControlDepth = 8;

// What one cell's channel may cost the supervisor: the driver's largest message (a cell's
// figures) twice over, and its CPU at a quarter of a second; receiving and parsing the message
// taken is not counted (its size bounds it).
struct ControlBudget {
    std::uint64_t bytes = 2 * kMaxControlMessage;
    std::chrono::nanoseconds cpu = std::chrono::milliseconds{250};
};

struct ControlMessage {
    nlohmann::json body;  // a JSON object
    // When the driver sent the message's last record, by the kernel's clock (the script cannot
    // set it): a cell that answered by its deadline did, however late the supervisor reads it.
    std::optional<std::chrono::system_clock::time_point> sent;
};

//
// Under gVisor (plan/gvisor.hpp), where the interpreter inherits no descriptor, the channel is
// `listening`, as the policy channel is (policy_channel.hpp): the sandbox's setup binds the
// supervisor's socket at kGvisorControlSocket and listens on it; the driver connects first thing
// (where the channels are sealed, sitecustomize does it for the driver, before the seal); the
// supervisor takes that one connection, closes the listener, and the channel is then the
// pair's: records kept whole, stamped by the kernel, read by the supervisor alone.
class ControlChannel {
  public:
    enum class Mode { pair, listening };
    // Throws SysError.
    explicit ControlChannel(ControlBudget budget = {}, Mode mode = Mode::pair);

    // What to poll: the supervisor's end; while listening, the listener once the sandbox listens
    // on it (before, a socket not listening polls as hung up), else -1.
    int fd();
    // The interpreter's end (the socket to bind and listen on, when listening); the supervisor
    // closes its copy of a pair's once the child has one.
    int child_fd() const { return listening_ ? own_.get() : child_.get(); }
    void close_child_end() { child_.reset(); }
    // Everything in the sandbox has exited: a listening channel that took no connection is
    // closed, as nobody is left to connect.
    void sandbox_gone();

    // Queues a message; it goes out as the socket takes it (wants_write, on_writable).
    void send(const nlohmann::json& message);
    bool wants_write() const { return !outbox_.empty() && !closed_ && !listening_; }
    void on_writable();
    // Writes now what the socket takes without waiting, rather than in the loop's next round: a
    // cell waits for nothing else.
    void write_now() {
        if (wants_write()) on_writable();
    }

    // Takes only messages of `kind` (with `token`, when given), and starts a new budget; until the
    // first call every message is taken. expect_nothing: none, in the same budget.
    void expect(std::string_view kind, std::string_view token = {});
    // Messages of any of `kinds` (a kernel's cell: "done", or the driver asking for input()).
    void expect(std::initializer_list<std::string_view> kinds, std::string_view token);
    void expect_nothing();

    // Reads the records that are waiting (a bounded number per call); called while muted (for
    // POLLHUP or POLLERR alone), it takes the driver's end as gone.
    void on_readable();
    bool wants_read() const { return !closed_ && !muted_; }
    // The next complete message, oldest first.
    std::optional<ControlMessage> receive();

    // The driver's end is gone (the interpreter exited or closed it).
    bool closed() const { return closed_; }
    // Messages dropped: too big, not a JSON object, or records that break the framing.
    std::uint64_t dropped() const { return dropped_; }
    // The budget ran out: nothing is read until the next expect(). mutes() counts the times.
    bool muted() const { return muted_; }
    std::uint64_t mutes() const { return mutes_; }

  private:
    enum class Filter { any, head, none };

    void add_record(const char* data, std::size_t size, const timespec& sent);
    bool wanted(std::string_view text) const;
    void take(const timespec& sent);
    void lose_message();
    void mute();
    // While listening: takes the driver's connection, when it is waiting; then no other.
    void accept_connection();

    sys::UniqueFd own_;
    bool listening_ = false;  // own_ is the listener, no connection taken yet
    bool listens_ = false;    // and the sandbox listens on it
    sys::UniqueFd child_;
    std::deque<std::string> outbox_;  // records, each sent with one send()
    std::deque<ControlMessage> inbox_;
    std::string partial_;         // the message being received
    std::uint32_t expected_ = 0;  // the number of its next record
    bool discarding_ = false;     // the rest of a message that was lost
    std::string previous_;        // the last record taken, to recognise it sent again
    bool closed_ = false;
    std::uint64_t dropped_ = 0;

    Filter filter_ = Filter::any;
    std::vector<std::string> heads_;  // Filter::head: what a wanted message's text begins with
    const ControlBudget budget_;
    std::uint64_t bytes_ = 0;                 // read since expect()
    std::chrono::nanoseconds cpu_{};          // spent since expect(), but on messages taken
    std::chrono::nanoseconds taken_cpu_{};    // in this on_readable(), on messages taken
    std::chrono::nanoseconds message_cpu_{};  // on the message under way
    bool just_taken_ = false;
    bool muted_ = false;
    std::uint64_t mutes_ = 0;
};

}  // namespace pysandbox
