#include "fronts/cell_request.hpp"

#include <cmath>
#include <set>
#include <stdexcept>

#include "embed/version.hpp"
#include "plan/request.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/result.hpp"

namespace pysandbox {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFields = "id, code, timeout, files";

std::string type_of(const json& value) {
    return value.type_name();
}

}  // namespace

std::chrono::milliseconds parse_cell_timeout(const json& value) {
    if (value.is_string()) {
        try {
            return parse_limit_duration(value.get<std::string>());
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("\"timeout\": ") + e.what());
        }
    }
    if (!value.is_number())
        throw std::invalid_argument(
            "\"timeout\" must be a duration string (\"2s\", \"500ms\") or "
            "a number of seconds, not " +
            type_of(value));
    const double seconds = value.get<double>();
    if (!std::isfinite(seconds) || seconds <= 0 || seconds > 1e9)
        throw std::invalid_argument("\"timeout\" must be more than 0 seconds");
    return std::chrono::milliseconds(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(seconds * 1000))));
}

std::chrono::milliseconds capped_timeout(const json& value, const Limits& limits,
                                         std::vector<std::string>& warnings) {
    const std::chrono::milliseconds timeout = parse_cell_timeout(value);
    if (timeout <= limits.wall_time) return timeout;
    warnings.push_back("timeout " + units::format_duration(timeout) +
                       " is over the profile's limit; " + units::format_duration(limits.wall_time) +
                       " applies");
    return limits.wall_time;
}

std::vector<CellFile> parse_cell_files(const json& files, std::uint64_t max_bytes) {
    if (!files.is_array())
        throw std::invalid_argument("\"files\" must be an array, not " + type_of(files));
    std::vector<CellFile> parsed;
    std::set<std::string> names;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < files.size(); ++i) {
        const json& entry = files[i];
        const std::string where = "files[" + std::to_string(i) + "]";
        if (!entry.is_object())
            throw std::invalid_argument(where + " must be an object, not " + type_of(entry));
        for (const auto& [key, _] : entry.items())
            if (key != "name" && key != "text" && key != "base64")
                throw std::invalid_argument(where + ": unknown field \"" + key +
                                            "\" (fields: name, text or base64)");
        const auto name = entry.find("name");
        if (name == entry.end() || !name->is_string())
            throw std::invalid_argument(where + ".name must be a string");
        const std::string& file = name->get_ref<const std::string&>();
        if (!is_plain_name(file))
            throw std::invalid_argument(where + ".name \"" + file +
                                        "\" must be a plain file name (no '/', not . or ..)");
        if (!names.insert(file).second)
            throw std::invalid_argument(where + ".name \"" + file + "\" is given twice");
        const auto text = entry.find("text");
        const auto base64 = entry.find("base64");
        if ((text == entry.end()) == (base64 == entry.end()))
            throw std::invalid_argument(where + " needs exactly one of \"text\" and \"base64\"");
        std::string data;
        if (text != entry.end()) {
            if (!text->is_string()) throw std::invalid_argument(where + ".text must be a string");
            data = text->get<std::string>();
        } else {
            if (!base64->is_string())
                throw std::invalid_argument(where + ".base64 must be a string");
            auto bytes = encoding::decode_base64(base64->get_ref<const std::string&>());
            if (!bytes) throw std::invalid_argument(where + ".base64 is not valid base64");
            data = std::move(*bytes);
        }
        total += data.size();
        if (total > max_bytes)
            throw std::invalid_argument("the files are over " + units::format_size(max_bytes) +
                                        " together (limits.tmp_size)");
        parsed.push_back({file, std::move(data)});
    }
    return parsed;
}

Cell parse_cell_fields(const json& request, const Limits& limits) {
    const auto code = request.find("code");
    if (code == request.end()) throw std::invalid_argument("\"code\" is missing");
    if (!code->is_string())
        throw std::invalid_argument("\"code\" must be a string, not " + type_of(*code));
    Cell cell;
    cell.code = code->get<std::string>();
    if (const auto timeout = request.find("timeout"); timeout != request.end())
        cell.timeout = capped_timeout(*timeout, limits, cell.warnings);
    if (const auto files = request.find("files"); files != request.end())
        cell.files = parse_cell_files(*files, limits.tmp_size);
    return cell;
}

std::variant<Cell, BadRequest> parse_cell_request(std::string_view line, const Limits& limits) {
    if (line.size() > kMaxRequestLine)
        return BadRequest{nullptr,
                          "the request line is over " + units::format_size(kMaxRequestLine)};
    json request = json::parse(line, nullptr, false);
    if (request.is_discarded()) return BadRequest{nullptr, "the request is not valid JSON"};
    if (!request.is_object())
        return BadRequest{nullptr, "the request must be a JSON object, not " + type_of(request)};
    json id = request.contains("id") ? request["id"] : json(nullptr);
    try {
        for (const auto& [key, _] : request.items())
            if (key != "id" && key != "code" && key != "timeout" && key != "files")
                throw std::invalid_argument("unknown field \"" + key +
                                            "\" (fields: " + std::string(kFields) + ")");
        Cell cell = parse_cell_fields(request, limits);
        cell.id = id;
        return cell;
    } catch (const std::invalid_argument& e) {
        return BadRequest{std::move(id), e.what()};
    }
}

nlohmann::ordered_json bad_request_json(const BadRequest& bad) {
    return {{"schema", kResultSchema},
            {"version", kVersion},
            {"id", bad.id},
            {"status", "bad_request"},
            {"message", bad.message}};
}

}  // namespace pysandbox
