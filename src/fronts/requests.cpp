#include "fronts/requests.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "embed/version.hpp"
#include "fronts/env.hpp"
#include "plan/host_files.hpp"
#include "plan/request.hpp"
#include "plan/units.hpp"
#include "report/encoding.hpp"
#include "report/result.hpp"
#include "sys/errors.hpp"
#include "sys/unique_fd.hpp"

namespace pysandbox {
namespace {

using json = nlohmann::json;

constexpr std::string_view kCellFields = "id, code, timeout, files, stream";
constexpr std::string_view kJobFields =
    "id, code, script, args, stdin, timeout, profile, inputs, requirements";

// JSON's name for a value's type ("number" for every kind of number).
std::string type_of(const json& value) {
    return value.type_name();
}

// A session's cell that asks for packages: a session is one sandbox, whose packages are
// installed once, before it starts, from its profile's python.requirements or --with-env.
void refuse_requirements(const json& request) {
    if (request.is_object() && request.contains("requirements"))
        throw std::invalid_argument(
            "\"requirements\" cannot be given per request: a session's packages are installed "
            "once, before it starts, from its profile's python.requirements or the environment "
            "--with-env names (pysandbox env create)");
}

std::string offered_list(std::span<const std::string> profiles) {
    std::string list;
    for (const std::string& name : profiles) list += (list.empty() ? "" : ", ") + name;
    return list;
}

// A host file named by a job, read now as the caller, at most `cap` bytes.
std::string read_job_file(const std::string& what, const std::string& path, std::uint64_t cap) {
    HostFile file = read_host_file(path, cap);
    using Problem = HostFile::Problem;
    switch (file.problem) {
        case Problem::none: return std::move(file.data);
        case Problem::open:
        case Problem::read:
            throw std::invalid_argument(what + " \"" + path + "\": " + std::strerror(file.error));
        case Problem::directory:
        case Problem::not_regular:
            throw std::invalid_argument(what + " \"" + path + "\" is not a regular file");
        case Problem::too_large:
            throw std::invalid_argument(what + " \"" + path + "\" is over " +
                                        units::format_size(cap));
    }
    return {};
}

std::vector<std::string> string_list(const json& value, const std::string& what) {
    if (!value.is_array())
        throw std::invalid_argument("\"" + what + "\" must be an array of strings, not " +
                                    type_of(value));
    std::vector<std::string> list;
    for (const json& item : value) {
        if (!item.is_string())
            throw std::invalid_argument("\"" + what + "\" must be an array of strings");
        list.push_back(item.get<std::string>());
    }
    return list;
}

// "inputs": host files as for --input ("FILE" or "FILE=NAME"), read now, at most `max_bytes`
// together.
std::vector<CellFile> read_inputs(const json& inputs, std::uint64_t max_bytes) {
    std::vector<CellFile> files;
    std::uint64_t total = 0;
    for (const std::string& text : string_list(inputs, "inputs")) {
        InputSpec spec;
        try {
            spec = parse_input_spec(text);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("inputs: \"" + text + "\": " + e.what());
        }
        if (std::ranges::any_of(files, [&](const CellFile& f) { return f.name == spec.name; }))
            throw std::invalid_argument("inputs: the name \"" + spec.name + "\" is given twice");
        std::string data = read_job_file("input", spec.source, max_bytes - total);
        total += data.size();
        files.push_back({spec.name, std::move(data)});
    }
    return files;
}

// "requirements": pip requirement specs, each checked as every spec pysandbox gives pip is.
std::vector<std::string> parse_requirements(const json& value) {
    std::vector<std::string> specs = string_list(value, "requirements");
    if (specs.size() > kMaxRequirements)
        throw std::invalid_argument("\"requirements\" names " + std::to_string(specs.size()) +
                                    " packages: at most " + std::to_string(kMaxRequirements));
    for (std::size_t i = 0; i < specs.size(); ++i) {
        try {
            env::check_requirement(specs[i], "requirements[" + std::to_string(i) + "]");
        } catch (const UsageError& e) {
            throw std::invalid_argument(e.what());
        }
    }
    return specs;
}

Job parse_job_fields(const json& request, std::span<const std::string> profiles,
                     std::span<const Limits* const> limits) {
    static constexpr std::string_view kKnown[] = {
        "id", "code", "script", "args", "stdin", "timeout", "profile", "inputs", "requirements"};
    for (const auto& [key, _] : request.items())
        if (std::ranges::find(kKnown, key) == std::end(kKnown))
            throw std::invalid_argument("unknown field \"" + key +
                                        "\" (fields: " + std::string(kJobFields) + ")");
    Job job;
    if (const auto profile = request.find("profile"); profile != request.end()) {
        if (!profile->is_string())
            throw std::invalid_argument("\"profile\" must be a string, not " + type_of(*profile));
        const auto it = std::ranges::find(profiles, profile->get<std::string>());
        if (it == profiles.end()) {
            throw std::invalid_argument(
                "profile \"" + profile->get<std::string>() +
                "\" is not one this batch allows (-p: " + offered_list(profiles) + ")");
        }
        job.profile = static_cast<std::size_t>(it - profiles.begin());
    }
    const Limits& limit = *limits[job.profile];
    const auto code = request.find("code");
    const auto script = request.find("script");
    if ((code == request.end()) == (script == request.end()))
        throw std::invalid_argument("a job needs exactly one of \"code\" and \"script\"");
    std::string argv0 = "-c";
    if (code != request.end()) {
        if (!code->is_string())
            throw std::invalid_argument("\"code\" must be a string, not " + type_of(*code));
        job.cell.code = code->get<std::string>();
    } else {
        if (!script->is_string())
            throw std::invalid_argument("\"script\" must be a string, not " + type_of(*script));
        const std::string path = script->get<std::string>();
        job.cell.code = read_job_file("script", path, kMaxRequestLine);
        argv0 = std::filesystem::path(path).filename().string();
        job.cell.filename = argv0;
    }
    std::vector<std::string> argv{argv0};
    if (const auto args = request.find("args"); args != request.end())
        for (std::string& arg : string_list(*args, "args")) argv.push_back(std::move(arg));
    job.cell.argv = std::move(argv);
    if (const auto input = request.find("stdin"); input != request.end()) {
        if (!input->is_string())
            throw std::invalid_argument("\"stdin\" must be a string, not " + type_of(*input));
        job.cell.stdin_data = input->get<std::string>();
    }
    if (const auto timeout = request.find("timeout"); timeout != request.end())
        job.cell.timeout = capped_timeout(*timeout, limit, job.cell.warnings);
    if (const auto inputs = request.find("inputs"); inputs != request.end())
        job.cell.files = read_inputs(*inputs, limit.tmp_size);
    if (const auto requirements = request.find("requirements"); requirements != request.end())
        job.requirements = parse_requirements(*requirements);
    return job;
}

void check_fields(const json& arguments, std::initializer_list<std::string_view> fields) {
    if (!arguments.is_object())
        throw std::invalid_argument("the arguments must be an object, not " + type_of(arguments));
    for (const auto& [key, _] : arguments.items()) {
        if (std::ranges::find(fields, key) != fields.end()) continue;
        std::string known;
        for (std::string_view field : fields)
            known += (known.empty() ? "" : ", ") + std::string(field);
        throw std::invalid_argument("unknown argument \"" + key + "\" (arguments: " + known + ")");
    }
}

std::optional<std::string> string_argument(const json& arguments, const char* name) {
    const auto it = arguments.find(name);
    if (it == arguments.end() || it->is_null()) return std::nullopt;
    if (!it->is_string())
        throw std::invalid_argument(std::string("\"") + name + "\" must be a string, not " +
                                    type_of(*it));
    return it->get<std::string>();
}

std::optional<std::string> profile_argument(const json& arguments,
                                            std::span<const std::string> profiles) {
    std::optional<std::string> profile = string_argument(arguments, "profile");
    if (profile && std::ranges::find(profiles, *profile) == profiles.end())
        throw std::invalid_argument(
            "profile \"" + *profile +
            "\" is not offered by this server (offered: " + offered_list(profiles) + ")");
    return profile;
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
            "\"timeout\" must be a duration string (\"2s\", \"500ms\", \"1m30s\") or "
            "a number of seconds, not " +
            type_of(value));
    const double seconds = value.get<double>();
    if (!(seconds > 0)) throw std::invalid_argument("\"timeout\" must be more than 0 seconds");
    try {
        // A positive timeout shorter than a millisecond is one: it asked for a limit, not none.
        return std::max(std::chrono::milliseconds(1), units::seconds(seconds));
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("\"timeout\": ") + e.what());
    }
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

std::variant<CellRequest, BadRequest> parse_cell_request(std::string_view line,
                                                         const Limits& limits) {
    if (line.size() > kMaxRequestLine)
        return BadRequest{nullptr,
                          "the request line is over " + units::format_size(kMaxRequestLine)};
    BoundedJson parsed = parse_bounded(line, kRequestBounds);
    if (!parsed.message.empty()) return BadRequest{nullptr, "the request " + parsed.message};
    json request = std::move(parsed.value);
    if (!request.is_object())
        return BadRequest{nullptr, "the request must be a JSON object, not " + type_of(request)};
    json id = request.contains("id") ? request["id"] : json(nullptr);
    try {
        refuse_requirements(request);
        for (const auto& [key, _] : request.items())
            if (key != "id" && key != "code" && key != "timeout" && key != "files" &&
                key != "stream")
                throw std::invalid_argument("unknown field \"" + key +
                                            "\" (fields: " + std::string(kCellFields) + ")");
        CellRequest parsed_request;
        if (const auto stream = request.find("stream"); stream != request.end()) {
            if (!stream->is_boolean())
                throw std::invalid_argument("\"stream\" must be true or false, not " +
                                            type_of(*stream));
            parsed_request.stream = stream->get<bool>();
        }
        parsed_request.cell = parse_cell_fields(request, limits);
        parsed_request.cell.id = id;
        return parsed_request;
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

std::variant<Job, BadRequest> parse_job(std::string_view line,
                                        std::span<const std::string> profiles,
                                        std::span<const Limits* const> limits) {
    if (line.size() > kMaxRequestLine)
        return BadRequest{nullptr, "the job line is over " + units::format_size(kMaxRequestLine)};
    BoundedJson parsed = parse_bounded(line, kRequestBounds);
    if (!parsed.message.empty()) return BadRequest{nullptr, "the job " + parsed.message};
    json request = std::move(parsed.value);
    if (!request.is_object())
        return BadRequest{nullptr, "a job must be a JSON object, not " + type_of(request)};
    json id = request.contains("id") ? request["id"] : json(nullptr);
    try {
        Job job = parse_job_fields(request, profiles, limits);
        job.cell.id = id;
        return job;
    } catch (const std::invalid_argument& e) {
        return BadRequest{std::move(id), e.what()};
    }
}

namespace mcp {

RunArguments parse_run_arguments(const json& arguments, std::span<const std::string> profiles) {
    check_fields(arguments, {"code", "session_id", "timeout", "profile", "files", "requirements"});
    if (const auto timeout = arguments.find("timeout");
        timeout != arguments.end() && !timeout->is_number())
        throw std::invalid_argument("\"timeout\" must be a number of seconds, not " +
                                    type_of(*timeout));
    RunArguments run;
    run.session_id = string_argument(arguments, "session_id");
    run.profile = profile_argument(arguments, profiles);
    if (run.session_id && run.profile)
        throw std::invalid_argument("a session has its profile: give session_id or profile");
    if (const auto requirements = arguments.find("requirements");
        requirements != arguments.end() && !requirements->is_null())
        run.requirements = parse_requirements(*requirements);
    if (run.session_id && !run.requirements.empty())
        throw std::invalid_argument(
            "a session has its packages: give \"requirements\" to start_session, or run "
            "without session_id");
    return run;
}

StartArguments parse_start_arguments(const json& arguments, std::span<const std::string> profiles) {
    check_fields(arguments, {"profile", "requirements"});
    StartArguments start;
    start.profile = profile_argument(arguments, profiles);
    if (const auto requirements = arguments.find("requirements");
        requirements != arguments.end() && !requirements->is_null())
        start.requirements = parse_requirements(*requirements);
    return start;
}

std::string parse_end_arguments(const json& arguments) {
    check_fields(arguments, {"session_id"});
    std::optional<std::string> id = string_argument(arguments, "session_id");
    if (!id) throw std::invalid_argument("\"session_id\" is missing");
    return *id;
}

}  // namespace mcp
}  // namespace pysandbox
