#pragma once
// Where pressured looks for a module of its own (a shared object it dlopens
// only when a feature needs it: the plugins' gRPC transport, the metrics
// port's TLS): beside the running binary, then in <bin>/../lib/pressured/
// (where `cmake --install` and the image put it), then where the build tree
// leaves it.

#include <string>
#include <vector>

namespace pressured {

/// The paths to try for module `file` (e.g. "libpressured_metrics_tls.so"),
/// in order; `build_path` (may be null) last.
std::vector<std::string> module_search_paths(const std::string& file, const char* build_path);

}  // namespace pressured
