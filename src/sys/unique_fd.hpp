#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "sys/errors.hpp"

namespace pysandbox::sys {

// Owns one file descriptor; closes it exactly once.
class UniqueFd {
  public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) noexcept : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        reset(other.release());
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd() { reset(); }

    int get() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return fd_ >= 0; }
    int release() noexcept { return std::exchange(fd_, -1); }
    void reset(int fd = -1) noexcept {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

  private:
    int fd_ = -1;
};

// Both ends of a pipe(2), close-on-exec.
struct Pipe {
    UniqueFd read;
    UniqueFd write;
    static Pipe create(int flags = 0) {
        int fds[2];
        check_sys(::pipe2(fds, O_CLOEXEC | flags), "pipe2");
        return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
    }
};

}  // namespace pysandbox::sys
