#include "engine/zygote.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "engine/sandbox.hpp"
#include "inside/job_spec.hpp"
#include "plan/profile.hpp"
#include "sys/errors.hpp"
#include "sys/records.hpp"
#include "sys/timer_fd.hpp"
#include "wire/zygote_protocol.hpp"

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A zygote imports the profile's preload before it is ready: a second or two for datascience's,
// much more on a loaded host. Counted from its start, in the loop (Process).
constexpr milliseconds kStartTimeout{60'000};
// A fork is a clone3 and two small writes.
constexpr milliseconds kForkTimeout{10'000};

// Waits until `fd` is readable; false when `timeout` passed first.
bool wait_readable(int fd, milliseconds timeout) {
    const Clock::time_point end = Clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
        pollfd watched{fd, POLLIN, 0};
        const int n = ::poll(&watched, 1, static_cast<int>(std::max<long>(left.count(), 0)));
        if (n > 0) return true;
        if (n == 0) return false;
        if (errno != EINTR) throw SysError("poll(zygote channel)", errno);
    }
}

// A pidfd's process number as this process sees it (/proc/self/fdinfo, "Pid:").
pid_t pid_of(int pidfd) {
    const std::string path = "/proc/self/fdinfo/" + std::to_string(pidfd);
    sys::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    char text[1024];
    const ssize_t n = fd ? ::read(fd.get(), text, sizeof text - 1) : -1;
    if (n <= 0) throw SysError("read(" + path + ")", errno);
    const std::string_view info(text, static_cast<std::size_t>(n));
    const std::size_t at = info.find("\nPid:\t");
    pid_t pid = 0;
    if (at != std::string_view::npos)
        std::from_chars(info.data() + at + 6, info.data() + info.size(), pid);
    if (pid <= 0) throw SysError("the forked sandbox's pid (" + path + ")", ESRCH);
    return pid;
}

}  // namespace

// One zygote: its sandbox, its channel, and what it said. While it starts, the loop watches for
// its Ready record (or the channel's end) and for kStartTimeout: nothing waits for it.
class Zygote::Process : public ZygoteLife {
  public:
    Process(const Plan& plan, sys::Poller& poller)
        : poller_(poller), sandbox_(plan, poller), channel_(sandbox_.take_zygote_channel()) {
        using Interest = sys::Poller::Interest;
        start_timer_.arm(kStartTimeout);
        poller_.watch(
            [this] {
                return Interest{state_ == State::starting ? channel_.get() : -1, POLLIN};
            },
            [this](short) { ready(); }, this);
        poller_.watch(
            [this] {
                return Interest{state_ == State::starting ? start_timer_.get() : -1, POLLIN};
            },
            [this](short) {
                start_timer_.acknowledge();
                if (state_ != State::starting) return;
                state_ = State::ended;
                failure_ = "it was not ready within " +
                           std::to_string(kStartTimeout.count() / 1000) + " s";
                sandbox_.kill();
            },
            this);
    }
    ~Process() override { poller_.forget(this); }
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    // Reads its Ready record if it is there; true once ready. Never waits.
    bool ready() {
        if (state_ != State::starting) return state_ == State::ready;
        if (!wait_readable(channel_.get(), milliseconds{0})) return false;
        zygote::Ready record;
        int fd = -1;
        const ssize_t n = sys::receive_record(channel_.get(), &record, sizeof record, fd);
        self_.reset(fd);
        if (n == sizeof record && record.magic == zygote::kMagic && record.error == 0 && self_) {
            state_ = State::ready;
            was_ready_ = true;
            start_timer_.disarm();
            return true;
        }
        state_ = State::ended;
        if (n == sizeof record && record.magic == zygote::kMagic)
            failure_ = std::string(record.detail, strnlen(record.detail, sizeof record.detail)) +
                       ": " + std::strerror(record.error);
        else
            failure_ = "it ended before it was ready";
        sandbox_.kill();
        return false;
    }
    // It was ready once (it may have ended since): an ending that is no failure to start.
    bool was_ready() const { return was_ready_; }

    // Its sandbox ended, or the zygote itself: the kernel makes its pidfd readable before its
    // jobs, whose death signal it sends as it exits, can be seen to end.
    bool ended() override {
        if (state_ == State::ended) return true;
        pollfd self{self_.get(), POLLIN, 0};
        if (!sandbox_.running() || (self_ && ::poll(&self, 1, 0) > 0)) {
            state_ = State::ended;
            if (failure_.empty()) failure_ = "it ended";
        }
        return state_ == State::ended;
    }
    const std::string& failure() const { return failure_; }
    std::size_t forks() const { return forks_; }

    // None when the channel failed: this zygote serves no more, and the sandbox may be asked of
    // another. Throws SysError when the zygote could not fork it.
    std::optional<Forked> fork(const ChildFds& ends, std::shared_ptr<ZygoteLife> self) {
        zygote::SpawnRequest request;
        int fds[6] = {ends.report_write, ends.stdin_read, ends.stdout_write, ends.stderr_write};
        std::size_t count = 4;
        if (ends.policy_write >= 0) {
            request.fds |= zygote::kPolicyEnd;
            fds[count++] = ends.policy_write;
        }
        if (ends.control >= 0) {
            request.fds |= zygote::kControlEnd;
            fds[count++] = ends.control;
        }
        if (sys::send_record_fds(channel_.get(), &request, sizeof request, fds, count) < 0)
            return lost("send(zygote channel)", errno);
        if (!wait_readable(channel_.get(), kForkTimeout))
            return lost("the zygote's answer", ETIMEDOUT);
        zygote::SpawnReply reply;
        int pidfd = -1;
        const ssize_t n = sys::receive_record(channel_.get(), &reply, sizeof reply, pidfd);
        sys::UniqueFd owned(pidfd);
        if (n != sizeof reply || reply.magic != zygote::kMagic)
            return lost("receive(zygote channel)", n < 0 ? errno : EPROTO);
        if (reply.error != 0)
            throw SysError(
                "the zygote could not fork the sandbox: " +
                    std::string(reply.detail, strnlen(reply.detail, sizeof reply.detail)),
                reply.error);
        if (!owned) return lost("the zygote's answer carried no pidfd", EPROTO);
        ++forks_;
        Forked forked;
        forked.pid = pid_of(owned.get());
        forked.pidfd = std::move(owned);
        forked.zygote = std::move(self);
        return forked;
    }

  private:
    enum class State { starting, ready, ended };

    std::optional<Forked> lost(const std::string& what, int error) {
        state_ = State::ended;
        failure_ = what + ": " + std::strerror(error);
        sandbox_.kill();
        return std::nullopt;
    }

    sys::Poller& poller_;
    Sandbox sandbox_;
    sys::UniqueFd channel_;
    sys::UniqueFd self_;  // the zygote's pidfd, from its Ready record
    sys::TimerFd start_timer_;
    State state_ = State::starting;
    bool was_ready_ = false;
    std::string failure_;
    std::size_t forks_ = 0;
};

Zygote::Zygote(const Plan& job_plan, const Plan& zygote_plan, sys::Poller& poller)
    : job_plan_(job_plan), zygote_plan_(zygote_plan), poller_(poller), current_(start()) {}

Zygote::~Zygote() = default;

std::shared_ptr<Zygote::Process> Zygote::start() {
    return std::make_shared<Process>(zygote_plan_, poller_);
}

bool Zygote::ready() const {
    return current_ && !current_->ended() && current_->ready();
}

bool Zygote::starting() const {
    return (current_ && !current_->ended()) || (next_ && !next_->ended());
}

// A zygote that ended before it was ready: the sandboxes waiting for it give up, saying why.
void Zygote::count_failure(const Process& process) {
    if (!process.was_ready()) note_failure(process.failure());
}

void Zygote::note_failure(const std::string& why) {
    ++failures_;
    failure_ = why;
    pause_.failed();
}

void Zygote::advance() {
    if (current_ && current_->ended()) {
        count_failure(*current_);
        current_.reset();
    }
    if (next_ && next_->ended()) {
        count_failure(*next_);
        next_.reset();
    }
    // The pause is over once a zygote becomes ready (not while the one that forks is).
    if (next_ && next_->ready()) {
        current_ = std::move(next_);
        pause_.succeeded();
    }
    if (current_ && !current_->was_ready() && current_->ready()) pause_.succeeded();
    if (!next_ && (!current_ || current_->forks() >= kForksPerZygote) && pause_.may_try()) {
        try {
            next_ = start();
        } catch (const std::exception& e) {  // the host refused its sandbox (clone3, id maps)
            note_failure(e.what());
        }
    }
}

Forked Zygote::fork(const ChildFds& ends) {
    // The caller saw it ready: it may have ended since, and it may end before it answers.
    if (current_ && !current_->ended() && current_->ready())
        if (auto forked = current_->fork(ends, current_)) return std::move(*forked);
    if (current_ && current_->ended())
        throw ZygoteEnded("the fork server's zygote ended (" + current_->failure() + ")", ECHILD);
    throw SysError("the fork server's zygote is not ready", EAGAIN);
}

std::unique_ptr<const Plan> plan_zygote(const Plan& job_plan, const std::string& profile,
                                        const Overrides& overrides,
                                        const std::vector<std::string>& host_env) {
    if (overrides.workdir || !overrides.inputs.empty())
        throw UsageError("--fork: --workdir and --input are not supported with a fork server");
    Request request;
    request.program.kind = Program::Kind::zygote;
    request.program.text = write_job_spec(job_plan);
    request.overrides = overrides;
    request.capture_output = true;
    return make_plan(load_profile(profile, profile_search_dirs()), request, host_env);
}

}  // namespace pysandbox
