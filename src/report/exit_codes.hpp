#pragma once
// Which exit code a run ends with (pysandbox(1), EXIT STATUS): the codes themselves are
// wire/exit_status.hpp's.

#include "report/outcome.hpp"
#include "wire/exit_status.hpp"

namespace pysandbox::exit_codes {

int for_outcome(const Outcome& outcome);

}  // namespace pysandbox::exit_codes
