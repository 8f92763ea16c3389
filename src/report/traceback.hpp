#pragma once
// Reads the uncaught exception out of what Python printed on stderr: its type, message, the line of
// the script it came from, and the traceback without the sandbox's own frames. Pure functions over
// text the script controls, so they must accept anything (they are fuzzed).

#include <optional>
#include <string>
#include <string_view>

#include "wire/sandbox_paths.hpp"

namespace pysandbox {

struct PythonException {
    std::string type;     // "ZeroDivisionError", "json.decoder.JSONDecodeError"
    std::string message;  // may span lines; empty for a bare `raise E()`
    std::string traceback;
    std::optional<long> line;  // in the script, where it was raised (or the deepest call in it)
    std::string summary;       // "ZeroDivisionError: division by zero (line 4)"
    std::string hint;          // what to change, when the sandbox is the likely cause; or empty
};

// The last exception Python reported in `stderr_text`, or nothing when it ends in none.
// `script_file` is the script's name as Python prints it ("/sandbox/x.py", "<string>",
// "<stdin>"); frames in it give `line`.
std::optional<PythonException> parse_python_exception(std::string_view stderr_text,
                                                      std::string_view script_file = {});

}  // namespace pysandbox
