// pysandbox-kernel: the kernel program that `pysandbox kernel` execs (fronts/kernel.hpp). It is
// linked dynamically because Debian's libzmq has no static archive that links on its own (its
// GSSAPI mechanism needs libgssapi_krb5, which ships no .a); everything else is pysandbox's.

#include <fcntl.h>
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
