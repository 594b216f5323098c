#include "node/formulas.hpp"

#include <algorithm>

namespace pressured::node {

MemoryResult memory_available(const MemoryInputs& in, MemoryAvailableMode mode, double reclaimable_active_percent) {
  MemoryResult r;
  const double total = static_cast<double>(in.meminfo.mem_total);
  uint64_t ws = working_set(in.root_usage, in.root_stat.inactive_file);
  switch (mode) {
    case MemoryAvailableMode::Kubelet:
      r.capacity = total;
      r.working_set = ws;
      r.available = total - static_cast<double>(ws);
      break;
    case MemoryAvailableMode::ExcludeReserved: {
      double hugetlb = static_cast<double>(std::min(in.meminfo.hugetlb, in.meminfo.mem_total));
      r.capacity = total - hugetlb;
      r.working_set = ws;
      r.available = r.capacity - static_cast<double>(ws) - static_cast<double>(in.min_free_bytes);
      break;
    }
    case MemoryAvailableMode::ReclaimableActive: {
      double pct = std::clamp(reclaimable_active_percent, 0.0, 100.0);
      auto reclaimable = static_cast<uint64_t>(static_cast<double>(in.root_stat.active_file) * pct / 100.0);
      uint64_t ws2 = ws > reclaimable ? ws - reclaimable : 0;
      r.capacity = total;
      r.working_set = ws2;
      r.available = total - static_cast<double>(ws2);
      break;
    }
  }
  r.available = std::max(0.0, r.available);
  return r;
}

MemoryResult allocatable_memory_available(uint64_t allocatable, uint64_t kubepods_usage, uint64_t kubepods_inactive_file) {
  MemoryResult r;
  r.capacity = static_cast<double>(allocatable);
  r.working_set = working_set(kubepods_usage, kubepods_inactive_file);
  r.available = std::max(0.0, r.capacity - static_cast<double>(r.working_set));
  return r;
}

}  // namespace pressured::node
