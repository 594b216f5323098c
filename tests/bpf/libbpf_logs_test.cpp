// libbpf's messages in the daemon's log: warnings and info at debug, its
// debug lines at trace, and nothing formatted for a level the logger drops
// (a load prints ~1500 debug lines).
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "bpf/programs.hpp"

namespace pressured::bpf {
namespace {

// libbpf's lines logged while it opens a buffer that is no ELF object, with
// the default logger at `level`. libbpf prints a debug line ("loading object
// ... from buffer") and a warning ("elf: ...") on the way to refusing it.
std::vector<std::string> libbpf_lines_at(spdlog::level::level_enum level) {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
  auto before = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>("libbpf-logs-test", sink);
  logger->set_level(level);
  spdlog::set_default_logger(logger);
  route_libbpf_logs();
  static const char garbage[] = "not an ELF object";
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "libbpf-logs-test");
  bpf_object* obj = bpf_object__open_mem(garbage, sizeof(garbage), &opts);
  if (obj) bpf_object__close(obj);
  spdlog::set_default_logger(before);
  std::vector<std::string> out;
  for (auto& l : sink->last_formatted()) {
    if (l.find("libbpf: ") != std::string::npos) out.push_back(l);
  }
  return out;
}

bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines) {
    if (l.find(what) != std::string::npos) return true;
  }
  return false;
}

TEST(LibbpfLogs, DebugLinesReachATraceLogger) {
  auto lines = libbpf_lines_at(spdlog::level::trace);
  EXPECT_TRUE(any_contains(lines, "loading object")) << lines.size() << " lines";
  EXPECT_TRUE(any_contains(lines, "elf:")) << lines.size() << " lines";
}

TEST(LibbpfLogs, WarningsReachADebugLoggerWithoutTheDebugLines) {
  auto lines = libbpf_lines_at(spdlog::level::debug);
  EXPECT_TRUE(any_contains(lines, "elf:")) << lines.size() << " lines";
  EXPECT_FALSE(any_contains(lines, "loading object"));
}

TEST(LibbpfLogs, AnInfoLoggerGetsNone) {
  EXPECT_TRUE(libbpf_lines_at(spdlog::level::info).empty());
}

}  // namespace
}  // namespace pressured::bpf
