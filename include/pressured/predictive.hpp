#pragma once
// Which thresholds daemon.predictiveLead predicts: one rule for the engine
// (met by the signal's fall), the decision view (ranked on fresh reads before
// the value crosses) and the configuration's check (a lead needs one).

#include "pressured/config.hpp"

namespace pressured {

/// A hard memory.available or allocatableMemory.available threshold: the
/// signals whose fall the engine follows (docs/engine.md, "Predictive hard
/// threshold"). Soft thresholds never are: their grace is the operator's wish
/// to wait.
inline bool predictable(const Threshold& t) {
  return t.kind == ThresholdKind::Hard &&
         (t.signal == Signal::MemoryAvailable || t.signal == Signal::AllocatableMemoryAvailable);
}

}  // namespace pressured
