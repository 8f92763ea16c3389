#pragma once
// A process that clones children which do not exec (a sandbox's init is a copy of pysandbox
// until it ends) has each of its writable pages marked copy-on-write by every clone: the first
// write to each after it faults, and a fault costs tens of microseconds on a paravirtualized
// guest (a TLB flush through the hypervisor). A server that answers a call soon after it cloned
// pays that on the call's path, once a page; `own_private_pages` pays it ahead, when nothing waits.

#include <cstddef>

namespace pysandbox::sys {

// Makes this process's writable private pages that are in memory its own again, as a write to
// each would (MADV_POPULATE_WRITE), without changing what they hold: the pages a later write
// would have faulted on; mappings over 1 GiB (reservations: a sanitizer's shadow) are left out.
// Returns how many pages were asked for. Best effort: a kernel without
// MADV_POPULATE_WRITE (before 5.14), or a range it refuses, is left to fault as before.
std::size_t own_private_pages();

}  // namespace pysandbox::sys
