// Writes pysandbox_wire.py, the wire contract as the Python inside the sandbox reads it
// (src/python/), from the compiled constants of wire/ and plan/policy.hpp, so that the two sides
// cannot drift apart; and the header that embeds it in the binary with the other modules
// (embed/python_modules.hpp). The build runs it (CMakeLists.txt).
//
//   pysandbox-python-wire MODULE.py HEADER.hpp

#include <cstddef>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "plan/policy.hpp"
#include "wire/fds.hpp"
#include "wire/sandbox_paths.hpp"
#include "wire/zygote_protocol.hpp"

namespace {

using namespace pysandbox;

// A Python string literal of `text`, which is plain ASCII with nothing to escape (paths, names).
std::string quoted(std::string_view text, std::string_view prefix = "") {
    for (const char c : text)
        if (c < 0x20 || c > 0x7e || c == '"' || c == '\\')
            throw std::runtime_error("a wire constant needs escaping: " + std::string(text));
    return std::string(prefix) + '"' + std::string(text) + '"';
}

std::string module_text() {
    std::ostringstream out;
    const auto constant = [&out](std::string_view name, const auto& value) {
        out << name << " = " << value << '\n';
    };
    out << R"("""The wire contract between pysandbox and the Python inside its sandbox: descriptor
numbers, the control channel's framing, the sandbox's paths, the policy's variable.

Generated at build time by tools/python_wire.cpp from the constants pysandbox is compiled with
(src/wire/, src/plan/policy.hpp): edit those, not this.
"""

)";
    out << "# wire/fds.hpp: the interpreter's descriptors besides 0, 1 and 2\n";
    constant("REPORT_FD", kReportFd);
    constant("POLICY_FD", kPolicyFd);
    constant("CONTROL_FD", kControlFd);
    out << "\n# wire/fds.hpp: the control channel's records and the cell driver's limits\n";
    constant("CONTROL_RECORD", kControlRecord);
    constant("CONTROL_MORE", quoted(std::string_view(&kControlMore, 1), "b"));
    constant("CONTROL_LAST", quoted(std::string_view(&kControlLast, 1), "b"));
    constant("CONTROL_INDEX_DIGITS", kControlIndexDigits);
    constant("CONTROL_HEADER", kControlHeader);
    constant("MAX_CONTROL_MESSAGE", kMaxControlMessage);
    constant("MAX_CELL_FIGURES", kMaxCellFigures);
    constant("MAX_CELL_FIGURE_BYTES", kMaxCellFigureBytes);
    constant("MAX_CELL_VALUE", kMaxCellValue);
    constant("MAX_CELL_RICH", kMaxCellRich);
    constant("MAX_CELL_MATCHES", kMaxCellMatches);
    constant("MAX_INPUT_PROMPT", kMaxInputPrompt);
    out << "\n# wire/sandbox_paths.hpp\n";
    constant("SANDBOX_PYTHON_DIR", quoted(kSandboxPythonDir));
    constant("ZYGOTE_HELPER_FILE", quoted(kZygoteHelperFile));
    constant("ZYGOTE_JOB_SPEC_FILE", quoted(kZygoteJobSpecFile));
    constant("WORK_DIR", quoted(kWorkDir));
    out << "\n# wire/zygote_protocol.hpp: the helper's module, a forked job's first event\n";
    constant("ZYGOTE_HELPER_MODULE", quoted(zygote::kHelperModule));
    constant("ZYGOTE_FORKED_EVENT", quoted(zygote::kForkedEvent));
    out << "\n# plan/policy.hpp: the variable that hands sitecustomize the [policy]\n";
    constant("POLICY_VARIABLE", quoted(policy::kPolicyVariable));
    return out.str();
}

// The module as embed/python_modules.hpp lists it, in a raw string like the others.
std::string header_text(const std::string& module) {
    constexpr std::string_view kDelimiter = "PYSRC";
    if (module.find(")" + std::string(kDelimiter)) != std::string::npos)
        throw std::runtime_error("the module contains the raw string's delimiter");
    std::ostringstream out;
    out << "#pragma once\n"
        << "// pysandbox_wire.py, written by tools/python_wire.cpp (embed/python_modules.hpp).\n\n"
        << "#include <string_view>\n\n"
        << "namespace pysandbox::python {\n\n"
        << "inline constexpr std::string_view kWireModuleSource = R\"" << kDelimiter << "("
        << module << ")" << kDelimiter << "\";\n\n"
        << "}  // namespace pysandbox::python\n";
    return out.str();
}

// Replaces `path` only when its text changes, so that what includes it is not rebuilt for nothing.
void write_file(const char* path, const std::string& text) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream old;
    old << in.rdbuf();
    if (in && old.str() == text) return;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error(std::string("cannot write ") + path);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s MODULE.py HEADER.hpp\n", argv[0]);
        return 2;
    }
    try {
        const std::string module = module_text();
        write_file(argv[1], module);
        write_file(argv[2], header_text(module));
    } catch (const std::exception& error) {
        std::fprintf(stderr, "%s: %s\n", argv[0], error.what());
        return 1;
    }
    return 0;
}
