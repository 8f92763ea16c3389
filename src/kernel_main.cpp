// pysandbox-kernel: the kernel program that `pysandbox kernel` execs (fronts/kernel.hpp). It is
// linked dynamically because Debian's libzmq has no static archive that links on its own (its
// GSSAPI mechanism needs libgssapi_krb5, which ships no .a); everything else is pysandbox's.

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "fronts/cli.hpp"
#include "fronts/kernel.hpp"
#include "report/exit_codes.hpp"
#include "sys/errors.hpp"

extern char** environ;

int main(int argc, char** argv) {
    using namespace pysandbox;
    for (int fd = 0; fd <= 2; ++fd)
        if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    ::signal(SIGPIPE, SIG_IGN);
    // A client's message may be up to 16 MiB. glibc raises its mmap threshold to the size of the
    // largest block freed, after which such buffers come from the heap and stay resident after
    // use: a fixed threshold keeps every big buffer mapped, so freeing it gives the memory back.
    // At 4 MiB, not 1: a cell's stream messages (up to 1 MiB, kStreamBytes) and their frames are
    // reused from the heap instead of mapped afresh, each page faulted in, for every message (a
    // 1 MiB print went from 1.03-1.38x ipykernel's time to 0.84-1.09x, bench/kernel.py).
    ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    try {
        CommandLine command_line;
        command_line.parse(argc, argv);
        if (command_line.invocation().command != Command::kernel)
            throw UsageError("the kernel program serves `pysandbox kernel -f FILE` only");
        return run_kernel(command_line.invocation().kernel, env);
    } catch (const std::exception& e) {
        std::cerr << "pysandbox kernel: error: " << e.what() << "\n";
        return exit_codes::kSandboxError;
    }
}
