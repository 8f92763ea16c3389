#include "plan/spelling.hpp"

#include <algorithm>

namespace pysandbox::spelling {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    // Three rows of the table: the one before last is what a transposition looks back to.
    std::vector<std::size_t> before(b.size() + 1);
    std::vector<std::size_t> last(b.size() + 1);
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) last[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + (a[i - 1] != b[j - 1])});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                row[j] = std::min(row[j], before[j - 2] + 1);
        }
        std::swap(before, last);
        std::swap(last, row);
    }
    return last[b.size()];
}

namespace {

// The only name `typo` begins, when it is long enough to mean something ("d" means nothing).
std::optional<std::string> only_completion(std::string_view typo,
                                           const std::vector<std::string>& known) {
    if (typo.size() < 3) return std::nullopt;
    std::optional<std::string> found;
    for (const std::string& name : known) {
        if (!name.starts_with(typo) || name == typo) continue;
        if (found) return std::nullopt;
        found = name;
    }
    return found;
}

}  // namespace

std::optional<std::string> nearest(std::string_view typo, const std::vector<std::string>& known) {
    std::optional<std::string> best_name;
    std::size_t best = std::min<std::size_t>(3, (typo.size() + 1) / 2);
    bool tie = false;
    for (const std::string& name : known) {
        const std::size_t distance = edit_distance(typo, name);
        if (distance < best) {
            best = distance;
            best_name = name;
            tie = false;
        } else if (best_name && distance == best) {
            tie = true;
        }
    }
    if (best_name && !tie) return best_name;
    return only_completion(typo, known);
}

std::string did_you_mean(std::string_view typo, const std::vector<std::string>& known) {
    const std::optional<std::string> near = nearest(typo, known);
    return near ? "; did you mean " + *near + "?" : "";
}

}  // namespace pysandbox::spelling
