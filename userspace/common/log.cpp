#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace pressured {

Result<void> setup_logging(const std::string& level, const std::string& format) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Error{EINVAL, "log level '" + level + "' is not one of trace, debug, info, warn, error, critical, off"};
  }
  auto logger = spdlog::stderr_color_mt("pressured");
  if (format == "json") {
    logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","msg":"%v"})", spdlog::pattern_time_type::utc);
  } else if (format == "text") {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  } else {
    return Error{EINVAL, "log format '" + format + "' is not one of text, json"};
  }
  logger->set_level(lvl);
  spdlog::set_default_logger(logger);
  return {};
}

}  // namespace pressured
