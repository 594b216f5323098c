// The import of the node's KubeletConfiguration on arbitrary text: the
// eviction settings the kubelet would derive, or an error naming the
// problem; never a crash, a hang or unbounded memory. What is taken must
// hold the kubelet's rules: thresholds valid, the allocatable threshold
// derived from the hard memory threshold, a transition period never zero.
#include <cstdint>
#include <string>

#include <spdlog/spdlog.h>

#include "config/load.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

namespace {

const pressured::Threshold* find(const pressured::Config& c, pressured::Signal s) {
  for (const auto& t : c.eviction.thresholds) {
    if (t.signal == s && t.kind == pressured::ThresholdKind::Hard) return &t;
  }
  return nullptr;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pressured::Signal;
  const std::string kubelet(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  // With an offset, as a DaemonSet sets one: the sums are checked too.
  auto c = pressured::parse_config_yaml_with_kubelet(
      "kubelet: {configPath: /fuzz/kubelet.yaml, thresholdOffset: {memory.available: 50Mi}}\n", kubelet, &warnings);
  if (!c) return 0;
  if (!pressured::validate_config(*c)) __builtin_trap();
  if (c->eviction.pressure_transition_period.count() <= 0) __builtin_trap();
  const auto* mem = find(*c, Signal::MemoryAvailable);
  const auto* alloc = find(*c, Signal::AllocatableMemoryAvailable);
  // Derived, the allocatable threshold is a copy of the hard memory one:
  // never there without it, and as high (same offset).
  const bool named = kubelet.find("allocatableMemory.available") != std::string::npos;
  if (!named && alloc != nullptr && (mem == nullptr || !(alloc->value == mem->value))) __builtin_trap();
  // check-config's account of it never fails.
  if (pressured::describe_sources(*c).empty()) __builtin_trap();
  return 0;
}
