#pragma once
// Paths inside the sandbox that more than one part of pysandbox names.

#include <string_view>

namespace pysandbox {

// The script (/sandbox/NAME) and the sandbox's own files.
inline constexpr std::string_view kScriptDir = "/sandbox";
// The sandbox's own Python modules (the figure backend; sitecustomize.py with the audit hook; the
// check analyzer), first on PYTHONPATH. Tracebacks drop frames from files under it.
inline constexpr std::string_view kSandboxPythonDir = "/sandbox/.pysandbox/";
// A zygote's helper library and its jobs' plan (zygote.hpp), in that directory of its sandbox.
inline constexpr std::string_view kZygoteHelperFile = "pysandbox_zygote_helper.so";
inline constexpr std::string_view kZygoteJobSpecFile = "zygote_job.json";
// The script's working directory, where its artifacts are found.
inline constexpr std::string_view kWorkDir = "/tmp/work";

}  // namespace pysandbox
