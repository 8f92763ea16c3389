#pragma once
// What the fronts read from their callers, in one place: a session's cell request, a batch's job
// line, an MCP tool call's arguments. Each is parsed and checked whole before anything runs: a bad
// one is a BadRequest (or std::invalid_argument) naming the problem, and changes nothing. The
// fields they share (code, timeout, files) are read by the same functions, with the same messages.
//
// A session request, as a line of NDJSON: {"id": any, "code": "...", "timeout": "2s" or seconds,
// "files": [{"name": ..., "text": ... | "base64": ...}], "stream": true or false}.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/session.hpp"
#include "plan/profile.hpp"
#include "report/json_text.hpp"

namespace pysandbox {

// The longest request line a session reads; a longer one is a bad request.
inline constexpr std::size_t kMaxRequestLine = 16 * 1024 * 1024;
// How deep and how many values a request (a session's line, a batch's job, an MCP message) may
// hold; one past either is a bad request, found before a tree of it is built. A request has a
// few fields, an id and a list of files: nothing near either bound.
inline constexpr JsonBounds kRequestBounds{.depth = 64, .values = 65536};

struct BadRequest {
    nlohmann::json id;  // the request's, when it could be read
    std::string message;
};

// A session's request: the cell, and whether its output goes to the client as it comes.
struct CellRequest {
    Cell cell;
    bool stream = false;
};

// A timeout over the profile's limit is lowered to it, with a warning in the cell.
std::variant<CellRequest, BadRequest> parse_cell_request(std::string_view line,
                                                         const Limits& limits);

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

// ------------------------------------------------------------------ batch

// The most packages a request's "requirements" may name.
inline constexpr std::size_t kMaxRequirements = 256;

// One line of a jobs file, read: the cell it runs, the profile (an index into those offered) and
// the packages it asks for besides the profile's (none: the profile's environment, if any).
struct Job {
    Cell cell;
    std::size_t profile = 0;
    std::vector<std::string> requirements;
};

// {"id", "code" | "script", "args", "stdin", "timeout", "profile", "inputs", "requirements"}.
// "requirements": pip requirement specs, each checked as env::check_requirement checks one. A
// script and the inputs are host files, read now as the caller. `limits[i]`: the limits of offered
// profile i.
std::variant<Job, BadRequest> parse_job(std::string_view line,
                                        std::span<const std::string> profiles,
                                        std::span<const Limits* const> limits);

// ------------------------------------------------------------------ mcp

namespace mcp {

// run_python's arguments but the cell's own (code, timeout, files: parse_cell_fields, with the
// limits of the profile or session chosen here). Checks every name and type; the profile
// against those offered. Throws std::invalid_argument with a message for the model.
struct RunArguments {
    std::optional<std::string> session_id;
    std::optional<std::string> profile;
    std::vector<std::string> requirements;  // packages besides the profile's (not with a session)
};
RunArguments parse_run_arguments(const nlohmann::json& arguments,
                                 std::span<const std::string> profiles);

// start_session's and end_session's: the profile (checked against those offered) and the
// packages, the id.
struct StartArguments {
    std::optional<std::string> profile;
    std::vector<std::string> requirements;
};
StartArguments parse_start_arguments(const nlohmann::json& arguments,
                                     std::span<const std::string> profiles);
std::string parse_end_arguments(const nlohmann::json& arguments);

}  // namespace mcp

}  // namespace pysandbox
