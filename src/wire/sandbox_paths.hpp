#pragma once
// Paths inside the sandbox that more than one part of pysandbox names.

#include <cstdint>
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
// A package environment's site-packages (`--with-env`, plan/env_store.hpp), read-only, on
// PYTHONPATH after the sandbox's own modules.
inline constexpr std::string_view kPackagesDir = "/sandbox/.packages";
// sandbox.kernel = "gvisor" (plan/gvisor.hpp): runsc's bundle (bundle/config.json, in the read-only
// root) and its state (state/, a tmpfs of its own), hidden from the container by a mount over it.
inline constexpr std::string_view kGvisorDir = "/run/pysandbox-gvisor";
// Under gVisor, the audit hook's and the cell driver's channels: listening sockets they connect
// to, in a directory of their own the container sees read-only (plan/gvisor.hpp says why).
inline constexpr std::string_view kGvisorChannelDir = "/run/pysandbox-gvisor/channel";
inline constexpr std::string_view kGvisorPolicySocket = "/run/pysandbox-gvisor/channel/policy";
inline constexpr std::string_view kGvisorControlSocket = "/run/pysandbox-gvisor/channel/control";
// The script's working directory, where its artifacts are found.
inline constexpr std::string_view kWorkDir = "/tmp/work";

}  // namespace pysandbox

namespace pysandbox::mounts {

// Where the new root is assembled before pivot_root. Every bind source is an absolute host path
// outside /tmp (plan.cpp rejects /tmp), so covering the host's /tmp hides nothing that is needed.
inline constexpr const char* kStagingRoot = "/tmp";
// Beneath the staging root, while the root is built: the tmpfs of --workdir's upper layer and the
// inputs' tmpfs. Both are detached from the tree before pivot_root; the overlay and the binds
// keep them alive.
inline constexpr const char* kWorkdirLayers = ".workdir";
inline constexpr const char* kInputsDir = ".inputs";

}  // namespace pysandbox::mounts

namespace pysandbox::proxy {

// Where the proxy listens inside the sandbox, and what HTTP(S)_PROXY say.
inline constexpr std::uint16_t kListenPort = 3128;
inline constexpr std::string_view kProxyUrl = "http://127.0.0.1:3128";

}  // namespace pysandbox::proxy
