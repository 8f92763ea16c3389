#pragma once
// "Did you mean": the known name a mistyped one most likely meant, for options, commands,
// profiles and profile keys alike. Pure functions.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pysandbox::spelling {

// The insertions, deletions, substitutions and swaps of two neighbours that turn `a` into `b`
// (optimal string alignment: "rnu" is one edit from "run").
std::size_t edit_distance(std::string_view a, std::string_view b);

// The nearest of `known`: at most two edits away and fewer than half the typo's length, or the
// only name the typo is a prefix of ("datasci" -> "datascience"). None when nothing is close or
// two names are equally close.
std::optional<std::string> nearest(std::string_view typo, const std::vector<std::string>& known);

// "; did you mean X?" for the nearest name, or nothing.
std::string did_you_mean(std::string_view typo, const std::vector<std::string>& known);

}  // namespace pysandbox::spelling
