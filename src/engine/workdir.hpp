#pragma once
// --workdir, after the run: the script's changes to the host directory, taken from the overlay's
// upper layer (mounts.cpp) and applied by pysandbox, outside the sandbox, as plain data.
//
// What reaches the host: regular files (content, and the permission bits without set-uid,
// set-gid and sticky), directories (likewise), and deletions (overlay whiteouts, opaque
// directories). What does not: symbolic links, FIFOs, sockets and device nodes the script made,
// which are dropped. Every host entry is reached through directory descriptors opened without
// following links, and a file replaces its name only once complete (rename), so a host process
// that swaps names meanwhile can redirect nothing.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace pysandbox::workdir {

struct Options {
    std::optional<uid_t> owner;  // chown what is made to this uid/gid (root's runs: 65534)
    std::optional<gid_t> group;
};

// Applies the changes recorded in `upper` (a directory descriptor of the upper layer) to the
// host directory `host`. Returns what could not be applied, one line each.
std::vector<std::string> apply(int upper, int host, const Options& options);

}  // namespace pysandbox::workdir
