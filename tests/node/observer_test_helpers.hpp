#pragma once
// What the observer's tests (observer_test, and the tests of its parts:
// node_signals, pod_set, pod_usage) all begin with: the fake node, byte
// units, and times in whole seconds. A test brings them in with
// `using namespace observer_test;`.

#include <chrono>
#include <cstdint>

#include "fakes/fake_node.hpp"
#include "pressured/clock.hpp"

namespace pressured::observer_test {

using testing::FakeNode;
using testing::FakePodMemory;

inline constexpr uint64_t MiB = 1ULL << 20;
inline constexpr uint64_t GiB = 1ULL << 30;

/// `s` seconds after the test clock's epoch.
inline TimePoint t(int s) { return TimePoint(std::chrono::seconds(s)); }

}  // namespace pressured::observer_test
