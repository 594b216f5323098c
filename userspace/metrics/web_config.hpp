#pragma once
// The web configuration file of the metrics port (node_exporter's format),
// beside the server that applies it: what the file says is load_web_config's
// (pressured/metrics.hpp); what the server needs from it besides is here.

#include <string>

#include "pressured/result.hpp"

namespace pressured::web {

/// A whole text file, or an error naming `what` and the path.
Result<std::string> read_text_file(const std::string& path, const std::string& what);

}  // namespace pressured::web
