#pragma once
// A session request, as a line of NDJSON: {"id": any, "code": "...", "timeout": "2s" or seconds,
// "files": [{"name": ..., "text": ... | "base64": ...}]}. Parsed and checked whole before anything
// runs: a bad one is a BadRequest naming the problem, and changes nothing.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/session.hpp"
#include "plan/profile.hpp"

namespace pysandbox {

// The longest request line a session reads; a longer one is a bad request.
inline constexpr std::size_t kMaxRequestLine = 16 * 1024 * 1024;

struct BadRequest {
    nlohmann::json id;  // the request's, when it could be read
    std::string message;
};

// A timeout over the profile's limit is lowered to it, with a warning in the cell.
std::variant<Cell, BadRequest> parse_cell_request(std::string_view line, const Limits& limits);

// The code, timeout and files of a request object (its other fields are the caller's): the
// timeout held to limits.wall_time (with a warning), the files to limits.tmp_size. Throws
// std::invalid_argument naming the field.
Cell parse_cell_fields(const nlohmann::json& request, const Limits& limits);

// The timeout of a request: a duration string ("500ms", "2s") or a number of seconds, more than 0.
// Throws std::invalid_argument.
std::chrono::milliseconds parse_cell_timeout(const nlohmann::json& value);

// The timeout of a request, at most limits.wall_time (with a warning when it was more). Throws
// std::invalid_argument.
std::chrono::milliseconds capped_timeout(const nlohmann::json& value, const Limits& limits,
                                         std::vector<std::string>& warnings);

// [{"name": plain name, "text": str} or {"name", "base64": str}], names unique, at most
// `max_bytes` of data together. Throws std::invalid_argument naming the entry.
std::vector<CellFile> parse_cell_files(const nlohmann::json& files, std::uint64_t max_bytes);

// The result line for a bad request (schema pysandbox.result/v1, status "bad_request").
nlohmann::ordered_json bad_request_json(const BadRequest& bad);

}  // namespace pysandbox
