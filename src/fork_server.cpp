#include "fork_server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "collect.hpp"
#include "errors.hpp"
#include "exit_codes.hpp"
#include "incident.hpp"
#include "profile.hpp"
#include "result.hpp"
#include "sha256.hpp"
#include "sys/records.hpp"

namespace pysandbox {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr std::size_t kMaxZygoteMessage = 64 * 1024;
constexpr std::size_t kMaxFds = 5;
constexpr milliseconds kRestartBackoff{500};

// One message with up to kMaxFds descriptors (SCM_RIGHTS).
bool send_with_fds(int socket, const std::string& data, const std::vector<int>& fds) {
    iovec part{const_cast<char*>(data.data()), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    ssize_t sent;
    while ((sent = ::sendmsg(socket, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    return sent == static_cast<ssize_t>(data.size());
}

// One message and the descriptors sent with it (close-on-exec, owned by the caller).
ssize_t receive_with_fds(int socket, std::string& data, std::vector<sys::UniqueFd>& fds) {
    data.resize(kMaxZygoteMessage);
    iovec part{data.data(), data.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    data.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&message); n >= 0 && cmsg != nullptr;
         cmsg = CMSG_NXTHDR(&message, cmsg)) {
        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof fd);
            fds.emplace_back(fd);
        }
    }
    return n;
}

sys::Pipe output_pipe() {
    sys::Pipe pipe = sys::Pipe::create();
    ::fcntl(pipe.read.get(), F_SETPIPE_SZ, 1 << 20);
    ::fcntl(pipe.read.get(), F_SETFL, O_NONBLOCK);
    return pipe;
}

std::string hex(const void* data, std::size_t size) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text;
    text.reserve(size * 2);
    for (const auto* byte = static_cast<const unsigned char*>(data); size-- > 0; ++byte) {
        text.push_back(kDigits[*byte >> 4]);
        text.push_back(kDigits[*byte & 15]);
    }
    return text;
}

// Python's resource module spells "no limit" -1.
json rlimit_value(rlim_t value) {
    return value == RLIM_INFINITY ? json(-1) : json(static_cast<std::uint64_t>(value));
}

}  // namespace

// ---------------------------------------------------------------- one job

ForkJob::ForkJob(ForkServer& server, int id)
    : server_(server),
      plan_(server.job_plan()),
      poller_(server.poller()),
      id_(id),
      syscalls_(server.job_plan()),
      budget_(OutputBudget::for_limit(server.job_plan().profile.limits.output_limit)),
      transcript_(0) {
    watch();
}

ForkJob::~ForkJob() {
    poller_.forget(this);
    server_.forget(*this);
    if (pidfd_ && !exited_) ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
}

void ForkJob::run(Cell cell) {
    cell_ = std::move(cell);
    const milliseconds wall = plan_.profile.limits.wall_time;
    timeout_ = cell_.timeout.count() > 0 ? std::min(cell_.timeout, wall) : wall;
    requested_at_ = Clock::now();
    server_.enqueue(*this);
}

// The job's layers, all decided by its plan (the zygote decides nothing).
json ForkJob::request_json() const {
    json request;
    request["job"] = id_;
    request["bpf"] =
        hex(plan_.seccomp_program.data(), plan_.seccomp_program.size() * sizeof(sock_filter));
    json rlimits = json::array();
    for (const Rlimit& limit : plan_.rlimits)
        rlimits.push_back({limit.resource, rlimit_value(limit.soft), rlimit_value(limit.hard)});
    request["rlimits"] = std::move(rlimits);
    json rules = json::array();
    for (const auto& rule : plan_.landlock.rules) rules.push_back({rule.path, rule.access});
    request["landlock"] = {
        {"abi", plan_.landlock.abi}, {"handled", plan_.landlock.handled}, {"rules", rules}};
    request["proc_masked"] = plan_.proc_masked;
    request["proc_readonly"] = plan_.proc_readonly;
    request["tmp"] = plan_.tmp_mount_options;
    request["shm"] = plan_.shm_mount_options;
    request["workdir"] = plan_.workdir;
    request["hostname"] = plan_.hostname;
    request["loopback"] = plan_.profile.network.mode == NetMode::loopback;
    request["env"] = plan_.envp;
    request["policy"] = policy_ != nullptr;
    request["init"] = static_cast<bool>(init_report_channel_);
    return request;
}

// The job's descriptors, made once: a request the zygote's channel could not take yet (EAGAIN)
// is sent again with the same ones.
bool ForkJob::prepare_request() {
    if (pending_) return true;
    Pending pending{output_pipe(), output_pipe(), {}, {}};
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        fail("send the job to the zygote", errno, "socketpair(AF_UNIX, SOCK_STREAM)");
        return false;
    }
    job_socket_.reset(pair[0]);
    pending.job_end.reset(pair[1]);
    if (plan_.profile.policy.wants_hook()) policy_ = std::make_unique<PolicyChannel>();
    // With processes allowed, the job's PID 1 stays an init that reports the job's end here.
    if (plan_.profile.seccomp.allow_processes) {
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
            fail("send the job to the zygote", errno, "socketpair(AF_UNIX, SOCK_SEQPACKET)");
            return false;
        }
        init_report_channel_.reset(pair[0]);
        pending.init_end.reset(pair[1]);
    }
    pending_.emplace(std::move(pending));
    return true;
}

ForkJob::Sent ForkJob::send_request(int zygote_channel) {
    try {
        if (!prepare_request()) return Sent::failed;
    } catch (const std::exception& e) {  // out of descriptors: this job fails, not the batch
        fail("send the job to the zygote", EMFILE, e.what());
        return Sent::failed;
    }
    Pending& pending = *pending_;
    const std::string text = request_json().dump();
    std::vector<int> fds{pending.out.write.get(), pending.err.write.get(), pending.job_end.get()};
    if (policy_) fds.push_back(policy_->write_fd());
    if (pending.init_end) fds.push_back(pending.init_end.get());
    if (!send_with_fds(zygote_channel, text, fds)) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Sent::again;
        fail("send the job to the zygote", errno, "sendmsg(zygote channel)");
        return Sent::failed;
    }
    if (policy_) {
        policy_->close_write_end();
        policy_open_ = true;
    }
    out_.emplace(
        Stream::captured(std::move(pending.out.read), transcript_, Transcript::kStdout, budget_));
    err_.emplace(
        Stream::captured(std::move(pending.err.read), transcript_, Transcript::kStderr, budget_));
    pending_.reset();  // the zygote has its copies; ours close
    phase_ = Phase::starting;
    deadline_.arm(kJobSetupTimeout);
    return Sent::done;
}

void ForkJob::watch() {
    using Interest = sys::Poller::Interest;
    poller_.watch(
        [this] {
            return Interest{job_socket_.get(), POLLIN};
        },
        [this](short) { on_hello(); }, this);
    poller_.watch(
        [this] {
            return Interest{listener_.get(), POLLIN};
        },
        [this](short revents) {
            if (!(revents & POLLIN)) {
                listener_.reset();  // every filtered process is gone
                return;
            }
            if (syscalls_.handle(listener_.get()) && pidfd_)
                ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
        },
        this);
    poller_.watch(
        [this] {
            return Interest{policy_open_ ? policy_->fd() : -1, POLLIN};
        },
        [this](short) {
            if (policy_->drain(policy_records_) == PolicyChannel::Drained::closed)
                policy_open_ = false;
        },
        this);
    for (std::optional<Stream>* slot : {&out_, &err_})
        poller_.watch(
            [slot] {
                return Interest{*slot && (*slot)->wants_read() ? (*slot)->from_fd() : -1, POLLIN};
            },
            [slot](short revents) {
                if (revents & (POLLIN | POLLHUP | POLLERR)) (*slot)->on_readable();
            },
            this);
    poller_.watch(
        [this] {
            return Interest{pidfd_ && !exited_ ? pidfd_.get() : -1, POLLIN};
        },
        [this](short) {
            exited_ = true;
            ended_at_ = Clock::now();
        },
        this);
    poller_.watch(
        [this] {
            return Interest{deadline_.get(), POLLIN};
        },
        [this](short) { on_deadline(); }, this);
    poller_.watch(
        [this] {
            return Interest{init_report_channel_.get(), POLLIN};
        },
        [this](short) { on_init_report(); }, this);
}

// The job's init: the job's wait status, trusted as init is (it ran no job code, and the job
// cannot reach it: not dumpable, ptrace refused). End of file: the init is gone.
void ForkJob::on_init_report() {
    char buffer[512];
    ssize_t n;
    while ((n = ::recv(init_report_channel_.get(), buffer, sizeof buffer, 0)) < 0 &&
           errno == EINTR) {
    }
    if (n <= 0) {
        init_report_channel_.reset();
        return;
    }
    const json report =
        json::parse(std::string_view(buffer, static_cast<std::size_t>(n)), nullptr, false);
    if (report.is_object() && report.contains("status") && report["status"].is_number_integer())
        init_status_ = report["status"].get<int>();
}

// The job is contained (or says which step failed): its pidfd, its /tmp/work and its listener.
void ForkJob::on_hello() {
    std::string text;
    std::vector<sys::UniqueFd> fds;
    const ssize_t n = receive_with_fds(job_socket_.get(), text, fds);
    const json hello = json::parse(text, nullptr, false);
    if (n > 0 && hello.is_object() && hello.contains("hello") && fds.size() == 3) {
        pidfd_ = std::move(fds[0]);
        work_dir_ = std::move(fds[1]);
        listener_ = std::move(fds[2]);
        send_code();
        return;
    }
    job_socket_.reset();
    if (hello.is_object() && hello.contains("step")) {
        fail(hello.value("step", "set up the job"), hello.value("errno", EINVAL),
             hello.value("call", ""));
        return;
    }
    fail("set up the job", n < 0 ? errno : ECHILD, "the job ended before it was contained");
}

// The code goes only to a job that is contained, and only through its own socket: the zygote
// never holds it.
void ForkJob::send_code() {
    json message = {{"code", cell_.code}};
    if (cell_.argv) message["argv"] = *cell_.argv;
    if (cell_.stdin_data) message["stdin"] = *cell_.stdin_data;
    if (!cell_.filename.empty()) message["filename"] = cell_.filename;
    json files = json::array();
    for (const CellFile& file : cell_.files)
        files.push_back({{"name", file.name}, {"hex", hex(file.data.data(), file.data.size())}});
    message["files"] = std::move(files);
    const std::string text = message.dump(-1, ' ', false, json::error_handler_t::replace);
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n =
            ::send(job_socket_.get(), text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // the job died: its status says how
        done += static_cast<std::size_t>(n);
    }
    job_socket_.reset();  // end of file: the job starts
    code_at_ = Clock::now();
    phase_ = Phase::running;
    deadline_.arm(timeout_);
}

void ForkJob::on_deadline() {
    deadline_.acknowledge();
    if (phase_ == Phase::starting) {
        // The zygote holds the job until its hello: ending the zygote ends it (PDEATHSIG).
        fail("set up the job", ETIMEDOUT, "no hello within the setup timeout");
        server_.kill_job(id_);
        return;
    }
    if (phase_ != Phase::running || exited_) return;
    timed_out_ = true;
    ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
}

void ForkJob::fail(const std::string& step, int error, const std::string& detail) {
    if (!failure_) failure_ = Failure{step, error, detail};
    if (phase_ == Phase::queued || phase_ == Phase::starting) {
        // Nothing ran: no status to wait for.
        phase_ = Phase::ended;
        job_socket_.reset();
        init_report_channel_.reset();
        exited_ = true;
        if (!wait_status_) wait_status_ = 0;
    }
}

void ForkJob::on_zygote_message(const json& message) {
    if (const auto error = message.find("error"); error != message.end() && error->is_string()) {
        fail("clone the job", ECHILD, error->get<std::string>());
        return;
    }
    if (const auto status = message.find("status");
        status != message.end() && status->is_number_integer()) {
        wait_status_ = status->get<int>();
        cpu_us_ = message.value("cpu_us", std::int64_t{0});
        max_rss_kib_ = message.value("max_rss_kib", std::int64_t{0});
        exited_ = true;
    }
}

void ForkJob::on_zygote_lost(const std::string& why) {
    init_report_channel_.reset();
    if (wait_status_) return;
    fail("run the job in the zygote", ECHILD, why);
    exited_ = true;
    if (!wait_status_) wait_status_ = W_EXITCODE(exit_codes::kSandboxError, 0);
}

bool ForkJob::finished() const {
    if (phase_ == Phase::queued || !wait_status_ || !exited_ || policy_open_ ||
        init_report_channel_)
        return false;
    return (!out_ || out_->drained()) && (!err_ || err_->drained());
}

void ForkJob::advance() {
    if (phase_ != Phase::done && !result_ && finished()) finish();
}

Outcome ForkJob::outcome() {
    Outcome outcome;
    const Clock::time_point end =
        exited_ && ended_at_ != Clock::time_point{} ? ended_at_ : Clock::now();
    if (code_at_ != Clock::time_point{}) {
        outcome.setup = duration_cast<milliseconds>(code_at_ - requested_at_);
        outcome.wall = duration_cast<milliseconds>(end - code_at_);
    } else {
        outcome.wall = duration_cast<milliseconds>(end - requested_at_);
    }
    outcome.cpu_ms = cpu_us_ / 1000;
    outcome.max_rss_kib = max_rss_kib_;
    // With an init, the job's own status is the init's word; without one, PID 1 is the job.
    const int status = init_status_.value_or(wait_status_.value_or(0));
    if (failure_) {
        outcome.kind = Outcome::Kind::setup_failed;
        outcome.step = failure_->step;
        outcome.error = failure_->error;
        outcome.detail = failure_->detail;
    } else if (!syscalls_.killing_syscall().empty()) {
        outcome.kind = Outcome::Kind::policy_violation;
    } else if (timed_out_) {
        outcome.kind = Outcome::Kind::timeout;
    } else if (WIFEXITED(status)) {
        outcome.kind = Outcome::Kind::exited;
        outcome.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        outcome.kind = Outcome::Kind::signaled;
        outcome.signal = WTERMSIG(status);
    }
    for (std::optional<Stream>* stream : {&out_, &err_})
        if (*stream) (*stream)->read_available();
    if (out_ && err_) {
        const Stream::Cut out = out_->cut();
        const Stream::Cut err = err_->cut();
        outcome.stdout_bytes = out.total;
        outcome.stderr_bytes = err.total;
        outcome.stdout_omitted = out.omitted;
        outcome.stderr_omitted = err.omitted;
    }
    std::vector<Transcript::Segment> order = transcript_.order();
    const bool stdout_is_text = transcript_.is_text(Transcript::kStdout);
    const bool stderr_is_text = transcript_.is_text(Transcript::kStderr);
    outcome.captured = Outcome::Captured{transcript_.take(Transcript::kStdout),
                                         transcript_.take(Transcript::kStderr), std::move(order),
                                         stdout_is_text, stderr_is_text};
    syscalls_.report(outcome);
    outcome.policy = std::move(policy_records_);
    return outcome;
}

void ForkJob::finish() {
    deadline_.disarm();
    Outcome result = outcome();
    const Clock::time_point collect_start = Clock::now();
    // Through the descriptor the job sent: its namespaces are gone, its tmpfs is not until this
    // closes. Nothing inside can change the tree any more.
    if (work_dir_) list_files(result);
    work_dir_.reset();
    result.collect = duration_cast<milliseconds>(Clock::now() - collect_start);
    const std::string file = cell_.filename.empty() ? "<string>" : cell_.filename;
    const ordered_json incident = incident::cell_entry(plan_, result, file, cell_.code);
    std::string problem;
    if (!incident.is_null()) problem = incident::append(plan_, incident);
    const int exit_code = exit_codes::for_outcome(result);
    ordered_json body = result_json(plan_, std::move(result), exit_code, file);
    ordered_json answer = {{"schema", body["schema"]}, {"version", body["version"]}};
    answer["id"] = cell_.id;
    for (auto& [key, value] : body.items())
        if (key != "schema" && key != "version") answer[key] = std::move(value);
    answer["limits"]["wall_time_ms"] = timeout_.count();
    for (const std::string& warning : cell_.warnings) answer["warnings"].push_back(warning);
    if (!problem.empty()) answer["warnings"].push_back(problem);
    result_ = one_shot_result(std::move(answer));
    phase_ = Phase::done;
}

// What the job left under /tmp/work; with --output-dir, copied to DIR/NAME (as a warm session's
// one cell: Session::list_files). Its own "inputs" are not something it made.
void ForkJob::list_files(Outcome& outcome) {
    ArtifactTarget target;
    sys::UniqueFd job_dir;
    if (plan_.output_dir) {
        target = {artifacts::kHostDirMissing, *plan_.output_dir + "/" + output_name_};
        sys::UniqueFd made;
        if (!plan_.output_dir_fd)
            made.reset(
                ::open(plan_.output_dir->c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        const int dir = plan_.output_dir_fd ? plan_.output_dir_fd.get() : made.get();
        if (dir >= 0 && ::mkdirat(dir, output_name_.c_str(), 0755) == 0) {
            job_dir.reset(::openat(dir, output_name_.c_str(),
                                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
            if (job_dir && plan_.ids.privileged)
                ::fchown(job_dir.get(), plan_.ids.outer_uid, plan_.ids.outer_gid);
        }
        if (job_dir)
            target.dir = job_dir.get();
        else
            outcome.warnings.push_back("--output-dir: cannot create " + target.path + ": " +
                                       std::strerror(errno) + "; no artifact was copied");
        list_artifacts(plan_, work_dir_.get(), target, nullptr, outcome);
        drop_inputs(outcome, job_dir.get());
        if (job_dir && outcome.files.empty()) ::unlinkat(dir, output_name_.c_str(), AT_REMOVEDIR);
        return;
    }
    list_artifacts(plan_, work_dir_.get(), target, nullptr, outcome);
    drop_inputs(outcome, -1);
}

void ForkJob::drop_inputs(Outcome& outcome, int job_dir) const {
    if (cell_.files.empty()) return;
    std::erase_if(outcome.files, [&](const artifacts::Artifact& file) {
        const bool input = std::ranges::any_of(cell_.files, [&](const CellFile& given) {
            return given.name == file.path && file.sha256 == Sha256::of(given.data);
        });
        if (input && job_dir >= 0 && file.host_path) ::unlinkat(job_dir, file.path.c_str(), 0);
        return input;
    });
}

std::optional<ordered_json> ForkJob::take_result() {
    return std::exchange(result_, std::nullopt);
}

// ---------------------------------------------------------------- the zygote

ForkServer::ForkServer(const Plan& job_plan, const Plan& zygote_plan, sys::Poller& poller)
    : job_plan_(job_plan), zygote_plan_(zygote_plan), poller_(poller) {
    using Interest = sys::Poller::Interest;
    poller_.watch(
        [this] {
            const bool waiting = ready_ && !queue_.empty();
            return Interest{channel_.get(), static_cast<short>(POLLIN | (waiting ? POLLOUT : 0))};
        },
        [this](short revents) {
            if (revents & (POLLIN | POLLHUP | POLLERR)) on_message();
        },
        this);
    // Wakes the loop when a lost zygote may be started again (advance() starts it).
    poller_.watch(
        [this] {
            return Interest{restart_timer_.get(), POLLIN};
        },
        [this](short) { restart_timer_.acknowledge(); }, this);
}

ForkServer::~ForkServer() {
    poller_.forget(this);
    for (ForkJob* job : queue_) job->on_zygote_lost("the batch ended");
    for (auto& [id, job] : sent_) job->on_zygote_lost("the batch ended");
}

std::unique_ptr<ForkJob> ForkServer::take() {
    return std::make_unique<ForkJob>(*this, ++next_id_);
}

void ForkServer::forget(ForkJob& job) {
    std::erase(queue_, &job);
    sent_.erase(job.id());
}

void ForkServer::start_zygote() {
    ready_ = false;
    try {
        zygote_ = std::make_unique<Sandbox>(zygote_plan_, poller_);
    } catch (const std::exception& e) {
        lose_zygote(std::string("the zygote could not start: ") + e.what());
        return;
    }
    channel_ = zygote_->take_nest_channel();
    ::fcntl(channel_.get(), F_SETFL, O_NONBLOCK);
}

void ForkServer::advance() {
    if (zygote_ && !zygote_->running() && !channel_) {
        zygote_.reset();
    }
    if (closed_) return;
    if (!zygote_ && !queue_.empty() && Clock::now() >= next_start_) start_zygote();
    if (!ready_) return;
    // Never blocking: the zygote also writes to this channel, and a supervisor blocked on a full
    // one while the zygote is blocked on the other direction would hold every job forever.
    while (!queue_.empty()) {
        ForkJob* job = queue_.front();
        const ForkJob::Sent sent = job->send_request(channel_.get());
        if (sent == ForkJob::Sent::again) return;  // POLLOUT wakes the loop
        queue_.pop_front();
        if (sent == ForkJob::Sent::done) sent_[job->id()] = job;
    }
}

void ForkServer::on_message() {
    std::string text(kMaxZygoteMessage, '\0');
    ssize_t n;
    while ((n = ::recv(channel_.get(), text.data(), text.size(), 0)) < 0 && errno == EINTR) {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
        lose_zygote("the zygote ended");
        return;
    }
    text.resize(static_cast<std::size_t>(n));
    const json message = json::parse(text, nullptr, false);
    if (!message.is_object()) return;
    if (message.contains("ready")) {
        ready_ = true;
        return;
    }
    const auto job = message.find("job");
    if (job == message.end() || !job->is_number_integer()) return;
    const auto it = sent_.find(job->get<int>());
    if (it == sent_.end()) return;
    ForkJob* target = it->second;
    if (message.contains("status") || message.contains("error")) sent_.erase(it);
    target->on_zygote_message(message);
}

// A job that never said hello is killed by the zygote, the only one that knows its pid; if the
// zygote cannot take the request now, it is ended (and with it the job: PR_SET_PDEATHSIG).
void ForkServer::kill_job(int id) {
    const std::string text = json{{"kill", id}}.dump();
    if (!channel_ || ::send(channel_.get(), text.data(), text.size(), MSG_NOSIGNAL) < 0)
        lose_zygote("a job's setup timed out");
}

// A dead zygote is a sandbox_error for the jobs it held; the next job starts another.
void ForkServer::lose_zygote(const std::string& why) {
    const bool was_ready = ready_;
    channel_.reset();
    ready_ = false;
    if (zygote_) zygote_->kill();
    std::map<int, ForkJob*> lost;
    lost.swap(sent_);
    for (auto& [id, job] : lost) job->on_zygote_lost(why);
    // It never got ready (its start failed, or its preload killed it): the waiting jobs are
    // failed rather than left to wait for a zygote that may never come.
    if (!was_ready)
        for (ForkJob* job : std::exchange(queue_, {})) job->on_zygote_lost(why);
    next_start_ = Clock::now() + kRestartBackoff;
    restart_timer_.arm(kRestartBackoff);
}

void ForkServer::close() {
    lose_zygote("the zygote was ended");
    closed_ = true;
    for (ForkJob* job : std::exchange(queue_, {})) job->on_zygote_lost("the zygote was ended");
}

std::unique_ptr<const Plan> plan_zygote(const std::string& profile, const Overrides& overrides,
                                        const std::vector<std::string>& host_env) {
    if (overrides.workdir || !overrides.inputs.empty())
        throw UsageError("batch --fork: --workdir and --input are not supported yet");
    Request request;
    request.program.kind = Program::Kind::zygote;
    request.overrides = overrides;
    request.capture_output = true;
    auto plan = make_plan(load_profile(profile, profile_search_dirs()), request, host_env);
    if (plan->profile.network.mode == NetMode::proxy)
        throw UsageError("batch --fork: network mode \"proxy\" is not supported yet");
    return plan;
}

}  // namespace pysandbox
