#pragma once
// Faults a test build injects, so that the tests can prove what only another host shows: the
// file read as AppArmor's user-namespace sysctl (Ubuntu's restriction, on a host without it) and a
// set-up step that fails with EPERM (what that restriction does to the first mount).
//
// Only the test binary sets them: pysandbox-injectable (tests/CMakeLists.txt), main.cpp compiled
// with PYSANDBOX_FAULT_INJECTION, fills them from PYSANDBOX_FAKE_APPARMOR_SYSCTL and
// PYSANDBOX_FAKE_EPERM_STEP before anything runs. The pysandbox binary has no code that reads
// those variables, so in every build users get, both stay null.

namespace pysandbox::faults {

struct Injected {
    const char* apparmor_sysctl = nullptr;  // a file read instead of the real sysctl
    const char* eperm_step = nullptr;       // a step of inside/child.cpp's kSteps, by name
};

// One per process; a sandbox's child sees its supervisor's (clone copies it). The zygote's helper
// has its own, never set: a forked job runs no injected fault.
inline Injected& injected() {
    static Injected faults;
    return faults;
}

}  // namespace pysandbox::faults
