// kernel.perf_event_paranoid: reading it, and explaining a kprobe refusal with it.
#include "bpf/perf_paranoid.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "kernel/file.hpp"

namespace pressured::bpf {

std::optional<int> read_perf_event_paranoid(const std::string& proc_root) {
  auto text = kernel::read_file(proc_root + "/sys/kernel/perf_event_paranoid", 64);
  if (!text) return std::nullopt;
  std::string_view s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc{} || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

namespace {
constexpr std::string_view kIs = "(kernel.perf_event_paranoid is ";
}

std::string perf_event_refusal(const char* what, int err, std::optional<int> paranoid) {
  std::string text = fmt::format("{}: {}", what, std::strerror(err));
  if ((err != EACCES && err != EPERM) || !paranoid || *paranoid <= 2) return text;
  return fmt::format(
      "{} {}{}: above 2 this kernel lets only CAP_SYS_ADMIN open perf events, "
      "CAP_PERFMON is not enough; set the node sysctl kernel.perf_event_paranoid=2 to attach it, or leave it "
      "off: PSI and the other hooks cover it)",
      text, kIs, *paranoid);
}

std::string lead_with_perf_paranoid(std::string reason) {
  const auto at = reason.find(kIs);
  if (at == std::string::npos) return reason;
  const auto start = at + kIs.size();
  const auto end = reason.find(':', start);
  if (end == std::string::npos) return reason;
  const std::string value = reason.substr(start, end - start);
  return fmt::format("kernel.perf_event_paranoid={} refuses kprobes without CAP_SYS_ADMIN (node sysctl "
                     "kernel.perf_event_paranoid=2 attaches it); {}",
                     value, reason);
}

}  // namespace pressured::bpf
