#pragma once
// JSON as pysandbox writes it: one object on one line, whatever bytes it holds. Text the script
// controls may not be UTF-8; what is not is replaced (U+FFFD) rather than failing the dump.

#include <string>

#include <nlohmann/json.hpp>

namespace pysandbox {

inline std::string dump_line(const nlohmann::ordered_json& value) {
    return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace pysandbox
