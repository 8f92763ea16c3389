// The zygote's helper: a CPython extension module (pysandbox_zygote_helper) the zygote's
// interpreter loads (src/python/pysandbox_zygote.py) so that every job is forked, and contained,
// by the same steps as any sandbox (child.cpp, Birth::forked), in native code, before the job's
// interpreter runs one more line of Python. Built from the sandbox's own sources (CMakeLists.txt,
// pysandbox_zygote_helper) and written into the zygote's sandbox by the plan.
//
// An extension module, not a library loaded through ctypes: the zygote runs under the job's
// [policy] hook, which may deny ctypes, and a module it had imported would be in every job's
// sys.modules, where no import event fires for it. It uses the stable ABI only (any CPython the
// profile names), and the multi-phase initialisation, which leaves sys.modules alone.
//
// Under gVisor it also installs the seal over the channels (plan/gvisor.hpp), for
// sitecustomize.py, before any line of the script: seal(), for the same reasons (no ctypes,
// whose objects would stay within the script's reach, nothing in sys.modules).
//
// The zygote is single-threaded and calls in with the GIL held: the fork is CPython's own
// (PyOS_BeforeFork / PyOS_AfterFork_*) around a raw clone(2) (spawn() says why).

#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03090000
#include <Python.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "inside/child.hpp"
#include "inside/job_spec.hpp"
#include "sys/records.hpp"
#include "sys/unique_fd.hpp"
#include "wire/fds.hpp"
#include "wire/zygote_protocol.hpp"

namespace pysandbox::zygote {
namespace {

constexpr std::uint64_t kNamespaces = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                      CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;

struct Configured {
    std::unique_ptr<Plan> plan;
    sys::UniqueFd font_list;  // the zygote's copy of matplotlib's font list, for every job
    sys::UniqueFd self;       // the zygote's pidfd: a job checks it is alive
    int error = EINVAL;       // not configured
    std::string detail = "configure() was not called";
};

Configured& configured() {
    static Configured state;
    return state;
}

void copy_text(char* to, std::size_t size, std::string_view text) {
    if (size == 0) return;
    const std::size_t n = std::min(size - 1, text.size());
    std::memcpy(to, text.data(), n);
    to[n] = '\0';
}

int fail(int error, std::string detail) {
    Configured& state = configured();
    state.error = error;
    state.detail = std::move(detail);
    return -error;
}

// A clone copies only the calling thread: a preloaded library's thread would be missing, its
// locks held, in every job.
int count_threads() {
    DIR* dir = ::opendir("/proc/self/task");
    if (dir == nullptr) return -1;
    int threads = 0;
    while (const dirent* entry = ::readdir(dir))
        if (entry->d_name[0] != '.') ++threads;
    ::closedir(dir);
    return threads;
}

bool write_proc_file(pid_t pid, const char* name, const char* text) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
    sys::UniqueFd fd(::open(path, O_WRONLY | O_CLOEXEC));
    const std::size_t size = std::strlen(text);
    return fd && ::write(fd.get(), text, size) == static_cast<ssize_t>(size);
}

// The job's ids are the zygote's (one id, mapped to itself): it needs no other, and may not
// regain a group.
bool write_id_maps(pid_t pid) {
    char uid_map[64], gid_map[64];
    std::snprintf(uid_map, sizeof uid_map, "%u %u 1\n", ::getuid(), ::getuid());
    std::snprintf(gid_map, sizeof gid_map, "%u %u 1\n", ::getgid(), ::getgid());
    return write_proc_file(pid, "setgroups", "deny") && write_proc_file(pid, "uid_map", uid_map) &&
           write_proc_file(pid, "gid_map", gid_map);
}

struct Received {
    SpawnRequest request;
    int fds[sys::kMaxRecordFds];
    std::size_t count = 0;
    ~Received() {
        for (std::size_t i = 0; i < count; ++i) ::close(fds[i]);
    }
};

SpawnReply refuse(int error, const char* format, ...) __attribute__((format(printf, 2, 3)));
SpawnReply refuse(int error, const char* format, ...) {
    SpawnReply reply;
    reply.error = error;
    va_list args;
    va_start(args, format);
    std::vsnprintf(reply.detail, sizeof reply.detail, format, args);
    va_end(args);
    return reply;
}

// The job's pidfd, killed and closed: it was forked but cannot be released.
void kill_job(int& pidfd) {
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
    ::close(std::exchange(pidfd, -1));
}

// In the zygote, once the job is forked: its id maps written, then released to set itself up.
SpawnReply release_job(pid_t pid, int& pidfd, int release_write) {
    SpawnReply reply;
    reply.pid = static_cast<std::int32_t>(pid);
    if (!write_id_maps(pid)) {
        const int map_error = errno;
        kill_job(pidfd);
        return refuse(map_error, "write the job's id maps: %s", std::strerror(map_error));
    }
    if (::write(release_write, "1", 1) != 1) {
        const int write_error = errno;
        kill_job(pidfd);
        return refuse(write_error, "write(release pipe)");
    }
    return reply;
}

// Forks the job. Returns in the parent (the zygote) with the reply to send and the pidfd in
// `pidfd`; in the job, only in its interpreter's process, with `in_job` set.
SpawnReply spawn(const Received& received, int& pidfd, bool& in_job) {
    const Configured& state = configured();
    const SpawnRequest& request = received.request;
    const std::size_t wanted =
        4 + ((request.fds & kPolicyEnd) ? 1 : 0) + ((request.fds & kControlEnd) ? 1 : 0);
    if (request.magic != kMagic || received.count != wanted)
        return refuse(EPROTO, "a job request with %zu descriptors, not %zu", received.count,
                      wanted);
    if (const int threads = count_threads(); threads != 1)
        return refuse(EAGAIN, "the zygote runs %d threads, not 1", threads);
    int pipe[2];
    if (::pipe2(pipe, O_CLOEXEC) != 0) return refuse(errno, "pipe2(release)");
    sys::UniqueFd release_read(pipe[0]), release_write(pipe[1]);
    const int* fd = received.fds;
    std::size_t next = 4;
    const ChildFds ends{release_read.get(),
                        fd[0],
                        fd[1],
                        fd[2],
                        fd[3],
                        (request.fds & kPolicyEnd) ? fd[next++] : -1,
                        (request.fds & kControlEnd) ? fd[next++] : -1};

    // clone(2), not clone3: the zygote's filter can see (and allows) clone's flags, and clone3's
    // are behind a pointer. With CLONE_PIDFD the pidfd lands where parent_tid points.
    PyOS_BeforeFork();
    const long pid = ::syscall(SYS_clone, kNamespaces | CLONE_PIDFD | SIGCHLD, nullptr, &pidfd,
                               nullptr, nullptr);
    if (pid == 0) {
        run_forked_child(*state.plan, ends, state.font_list.get(), state.self.get());
        // The job's descriptors are its own now (the steps closed the zygote's): these numbers
        // may be the job's, and must not be closed on the way out.
        release_read.release();
        release_write.release();
        configured().font_list.release();
        configured().self.release();
        PyOS_AfterFork_Child();
        in_job = true;
        return {};
    }
    const int error = errno;
    PyOS_AfterFork_Parent();
    if (pid < 0)
        return refuse(error,
                      "clone(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|"
                      "CLONE_NEWUTS|CLONE_NEWCGROUP|CLONE_PIDFD)");
    release_read.reset();
    return release_job(static_cast<pid_t>(pid), pidfd, release_write.get());
}

// Reads the job plan (JSON text, job_spec.hpp) and opens what every job takes from the zygote.
// 0, or -errno with the state saying what failed (serve() reports it).
int configure(std::string_view spec) {
    Configured& state = configured();
    try {
        state.plan = read_job_spec(spec);
    } catch (const std::exception& e) {
        return fail(EINVAL, std::string("read the job plan: ") + e.what());
    }
    if (const auto& list = state.plan->font_list) {
        state.font_list.reset(::open(list->target.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
        if (!state.font_list)
            return fail(errno, "open(" + list->target + "): the zygote's font list");
    }
    state.self.reset(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    if (!state.self) return fail(errno, "pidfd_open(the zygote)");
    state.error = 0;
    state.detail.clear();
    return 0;
}

// Says Ready, then serves requests on `channel` until it closes (returns 0) or fails (-errno).
// Returns 1 in a job: in its interpreter's process, every layer in place, the job's channel at
// kControlFd.
int serve(int channel) {
    const Configured& state = configured();
    Ready ready;
    ready.error = state.error;
    copy_text(ready.detail, sizeof ready.detail, state.detail);
    // With its pidfd: the supervisor tells a zygote that ended from a job killed otherwise.
    if (sys::send_record(channel, &ready, sizeof ready, state.self.get()) < 0) return -errno;
    if (state.error != 0) return -state.error;

    for (;;) {
        // Ended jobs are reaped between requests: a zombie holds nothing but its number, and its
        // pidfd (the supervisor's) says it ended all the same.
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
        Received received;
        const ssize_t n =
            sys::receive_record_fds(channel, &received.request, sizeof received.request,
                                    received.fds, sys::kMaxRecordFds, received.count);
        if (n == 0) return 0;  // the supervisor closed the channel: no more jobs
        if (n < 0 && errno != EMSGSIZE) return -errno;
        int pidfd = -1;
        bool in_job = false;
        const SpawnReply reply = n == static_cast<ssize_t>(sizeof received.request)
                                     ? spawn(received, pidfd, in_job)
                                     : refuse(EPROTO, "a job request of %zd bytes", n);
        if (in_job) {
            // The job's interpreter: its fds are its own (the steps closed the zygote's). What
            // this frame still names is gone: forget it rather than close a job's descriptor.
            received.count = 0;
            return 1;
        }
        const ssize_t sent = sys::send_record(channel, &reply, sizeof reply, pidfd);
        if (pidfd >= 0) ::close(pidfd);
        if (sent < 0) return -errno;
    }
}

// The module's functions, as pysandbox_zygote.py calls them.

// configure(spec: bytes) -> list[str]: the job's environment, as its plan has it (empty when
// the plan could not be read: serve() then says why).
PyObject* py_configure(PyObject*, PyObject* spec) {
    char* text = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(spec, &text, &size) < 0) return nullptr;
    const bool ok = configure(std::string_view(text, static_cast<std::size_t>(size))) == 0;
    const std::vector<std::string> none;
    const std::vector<std::string>& env = ok ? configured().plan->envp : none;
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(env.size()));
    for (std::size_t i = 0; list != nullptr && i < env.size(); ++i) {
        PyObject* entry =
            PyUnicode_DecodeFSDefaultAndSize(env[i].data(), static_cast<Py_ssize_t>(env[i].size()));
        if (entry == nullptr || PyList_SetItem(list, static_cast<Py_ssize_t>(i), entry) < 0) {
            Py_DECREF(list);
            return nullptr;
        }
    }
    return list;
}

// serve(channel: int) -> int: as serve() returns, 1 in a job.
PyObject* py_serve(PyObject*, PyObject* channel) {
    const long fd = PyLong_AsLong(channel);
    if (fd == -1 && PyErr_Occurred() != nullptr) return nullptr;
    return PyLong_FromLong(serve(static_cast<int>(fd)));
}

// seal(program: bytes) -> int: installs `program` (struct sock_filter[], as pysandbox compiled
// it) as a seccomp filter on every thread of the process; 0, or -errno (-EINVAL for bytes that
// are no whole program).
PyObject* py_seal(PyObject*, PyObject* program) {
    char* bytes = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(program, &bytes, &size) < 0) return nullptr;
    const auto count = static_cast<std::size_t>(size) / sizeof(sock_filter);
    if (size <= 0 || static_cast<std::size_t>(size) % sizeof(sock_filter) != 0 || count > USHRT_MAX)
        return PyLong_FromLong(-EINVAL);
    // A copy, aligned as the kernel reads it.
    std::vector<sock_filter> filter(count);
    std::memcpy(filter.data(), bytes, static_cast<std::size_t>(size));
    sock_fprog fprog{static_cast<unsigned short>(count), filter.data()};
    const long rc =
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog);
    return PyLong_FromLong(rc == 0 ? 0 : rc > 0 ? -ESRCH : -errno);  // > 0: a thread refused it
}

PyMethodDef methods[] = {
    {"configure", py_configure, METH_O, nullptr},
    {"serve", py_serve, METH_O, nullptr},
    {"seal", py_seal, METH_O, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "pysandbox_zygote_helper",
    nullptr,
    0,
    methods,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

}  // namespace
}  // namespace pysandbox::zygote

// Multi-phase: the module object is made from its spec, and nothing is put in sys.modules.
extern "C" __attribute__((visibility("default"))) PyObject* PyInit_pysandbox_zygote_helper() {
    return PyModuleDef_Init(&pysandbox::zygote::module);
}
