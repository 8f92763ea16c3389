#include "sys/apparmor.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

#include "sys/fault_injection.hpp"

namespace pysandbox::apparmor {

bool restricts_userns() {
    const char* injected = faults::injected().apparmor_sysctl;
    std::ifstream sysctl(injected != nullptr ? std::string(injected)
                                             : std::string(kRestrictSysctl));
    int restricted = 0;
    return sysctl >> restricted && restricted == 1;
}

bool restricts_caller() {
    return ::geteuid() != 0 && restricts_userns();
}

}  // namespace pysandbox::apparmor
