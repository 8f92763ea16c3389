#pragma once
// Which exit code a run ends with (pysandbox(1), EXIT STATUS): the codes themselves are
// wire/exit_status.hpp's.

#include "report/outcome.hpp"
#include "wire/exit_status.hpp"

namespace pysandbox::exit_codes {

int for_outcome(const Outcome& outcome);

// `run --fail-on-truncation`: the script exited 0, but the output limit cut its output.
inline constexpr int kOutputTruncated = 1;
// `env create` (and a run that creates its environment): pip failed inside (status install_error).
inline constexpr int kInstallError = 123;

}  // namespace pysandbox::exit_codes
