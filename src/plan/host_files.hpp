#pragma once
// The host's files and directories a request names, checked and opened as the caller while the
// plan is made (--input, --workdir, --output-dir, the incident log), and read_host_file: the one
// way pysandbox reads a host file whole. Steps of make_plan (plan.hpp).

#include <cstdint>
#include <optional>
#include <string>

#include "plan/request.hpp"

namespace pysandbox {

struct Plan;

// A regular file of the host, read whole as the caller: opened once (never blocking on a FIFO,
// never becoming a controlling terminal; O_NOFOLLOW in `extra_flags` where a planted link must
// not redirect it), checked through that descriptor, read to its end.
struct HostFile {
    enum class Problem { none, open, directory, not_regular, too_large, read };
    Problem problem = Problem::none;
    int error = 0;  // errno for open and read
    std::string data;
};
// At most `cap` bytes (Problem::too_large beyond).
HostFile read_host_file(const std::string& path, std::uint64_t cap, int extra_flags = 0);

// --input: each file opened now, and the tmpfs that will hold their copies.
void add_inputs(const Overrides& overrides, Plan& plan);
// --workdir: the directory opened and checked writable by the script and by pysandbox.
void check_host_workdir(const Overrides& overrides, Plan& plan);
// --output-dir: new (made after the run) or empty (held open from now on). --output-runs: the
// directory that holds the runs, held open when it exists (else made after the run).
void check_output_dir(const Overrides& overrides, Plan& plan);
// --incident-log (or the profile's), opened for appending.
void open_incident_log(const std::optional<std::string>& flag, Plan& plan);

}  // namespace pysandbox
