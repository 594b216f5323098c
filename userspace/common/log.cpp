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

std::string printable_excerpt(std::string_view text, std::size_t max_bytes) {
  const std::string_view head = text.substr(0, max_bytes);
  std::string out;
  out.reserve(head.size());
  for (const char ch : head) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(ch);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  if (text.size() > head.size()) out += " ... (" + std::to_string(text.size() - head.size()) + " more bytes)";
  return out;
}

}  // namespace pressured
