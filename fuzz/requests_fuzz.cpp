// The requests the new front doors read from their clients: a session's NDJSON line, a batch
// job's line, and an MCP run_python call's arguments. Any bytes are either a request or a
// bad_request with a message; nothing else comes out, and nothing is read from the host (a job's
// "script" and "inputs" name files: the fuzzer's names are refused or point nowhere useful).
// Every one is bounded before it is built (kRequestBounds): the corpus's deep-* and many-* seeds
// are a request nested 10^5 deep in its id or a field, and one with more values or keys than
// the bound.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "fronts/batch.hpp"
#include "fronts/mcp_tools.hpp"
#include "fronts/requests.hpp"
#include "report/json_text.hpp"

namespace {

using namespace pysandbox;

void require(bool condition) {
    if (!condition) std::abort();
}

const Limits kLimits;
const std::vector<std::string> kProfiles{"default", "datascience"};
const std::vector<const Limits*> kAllLimits{&kLimits, &kLimits};

void check_cell(std::string_view line) {
    const auto parsed = parse_cell_request(line, kLimits);
    if (const auto* bad = std::get_if<BadRequest>(&parsed)) {
        require(!bad->message.empty());
        require(bad_request_json(*bad)["status"] == "bad_request");
        return;
    }
    const Cell& cell = std::get<CellRequest>(parsed).cell;
    require(cell.timeout <= kLimits.wall_time);
    std::uint64_t total = 0;
    for (const CellFile& file : cell.files) {
        require(is_plain_name(file.name));
        total += file.data.size();
    }
    require(total <= kLimits.tmp_size);
}

void check_job(std::string_view line) {
    // A job naming host files reads them: only lines without those go through.
    if (line.find("script") != std::string_view::npos ||
        line.find("inputs") != std::string_view::npos)
        return;
    const auto parsed = parse_job(line, kProfiles, kAllLimits);
    if (const auto* bad = std::get_if<BadRequest>(&parsed)) {
        require(!bad->message.empty());
        return;
    }
    const Job& job = std::get<Job>(parsed);
    require(job.profile < kProfiles.size());
    require(job.cell.timeout <= kLimits.wall_time);
}

// As the MCP server reads a message: bounded as every request is, then its params and their
// arguments copied out (a deep tree would overflow the stack here), and run_python's read.
void check_message(std::string_view text) {
    BoundedJson parsed = parse_bounded(text, kRequestBounds);
    if (parsed.problem != BoundedJson::Problem::none) {
        require(parsed.value.is_null() && !parsed.message.empty());
        return;
    }
    if (!parsed.value.is_object()) return;
    const nlohmann::json params = parsed.value.value("params", nlohmann::json::object());
    // A message that is run_python's arguments themselves is read as those too.
    const nlohmann::json arguments =
        params.is_object() && params.contains("arguments") ? params["arguments"] : parsed.value;
    try {
        const mcp::RunArguments run = mcp::parse_run_arguments(arguments, kProfiles);
        require(!(run.session_id && run.profile));
        if (run.profile) require(*run.profile == kProfiles[0] || *run.profile == kProfiles[1]);
    } catch (const std::invalid_argument& e) {
        require(*e.what() != '\0');
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    check_cell(text);
    check_job(text);
    check_message(text);
    return 0;
}
