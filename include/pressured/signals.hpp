#pragma once
// Eviction signals and node conditions, in the kubelet's words
// (shared/seeds/002: "Eviction Signals", "Node Conditions").

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "pressured/enum_names.hpp"

namespace pressured {

/// Every signal pressured can evaluate. Order is stable: it indexes arrays.
enum class Signal : uint8_t {
  MemoryAvailable,             // memory.available             bytes, "<"
  AllocatableMemoryAvailable,  // allocatableMemory.available  bytes, "<"
  NodefsAvailable,             // nodefs.available             bytes, "<"
  NodefsInodesFree,            // nodefs.inodesFree            inodes, "<"
  ImagefsAvailable,            // imagefs.available            bytes, "<"
  ImagefsInodesFree,           // imagefs.inodesFree           inodes, "<"
  PidAvailable,                // pid.available                pids, "<"
  MemoryPressureSomeAvg10,     // memory.pressure.some.avg10   percent, ">"
  MemoryPressureFullAvg10,     // memory.pressure.full.avg10   percent, ">"
  MemoryPressureSomeAvg60,     // memory.pressure.some.avg60   percent, ">"
  MemoryPressureFullAvg60,     // memory.pressure.full.avg60   percent, ">"
  IoPressureFullAvg10,         // io.pressure.full.avg10       percent, ">"
  // The filesystem holding the containers' writable layers (KEP-4191, kubelet
  // >= 1.29): appended, the order indexes arrays and names are serialised.
  ContainerfsAvailable,        // containerfs.available        bytes, "<"
  ContainerfsInodesFree,       // containerfs.inodesFree       inodes, "<"
};
inline constexpr std::size_t kSignalCount = 14;

/// Node conditions pressured reports (kubelet names; published to the API
/// under pressured's own condition types so they never overwrite the
/// kubelet's, see docs/kubernetes.md).
enum class Condition : uint8_t { MemoryPressure, DiskPressure, PIDPressure };
inline constexpr std::size_t kConditionCount = 3;

/// How a threshold compares: available-style signals are met when below the
/// threshold, PSI signals when above it.
enum class Operator : uint8_t { LessThan, GreaterThan };

/// The resource a signal starves, which decides how pods are ranked for it.
enum class StarvedResource : uint8_t { Memory, EphemeralStorage, Inodes, Pids, None };

/// Pod QoS class, in eviction order (BestEffort evicted first).
enum class QosClass : uint8_t { BestEffort = 0, Burstable = 1, Guaranteed = 2 };

struct SignalInfo {
  Signal signal;
  std::string_view name;
  Operator op;
  Condition condition;
  StarvedResource resource;
  bool is_psi;
};

inline constexpr std::array<SignalInfo, kSignalCount> kSignals{{
    {Signal::MemoryAvailable, "memory.available", Operator::LessThan, Condition::MemoryPressure, StarvedResource::Memory, false},
    {Signal::AllocatableMemoryAvailable, "allocatableMemory.available", Operator::LessThan, Condition::MemoryPressure, StarvedResource::Memory, false},
    {Signal::NodefsAvailable, "nodefs.available", Operator::LessThan, Condition::DiskPressure, StarvedResource::EphemeralStorage, false},
    {Signal::NodefsInodesFree, "nodefs.inodesFree", Operator::LessThan, Condition::DiskPressure, StarvedResource::Inodes, false},
    {Signal::ImagefsAvailable, "imagefs.available", Operator::LessThan, Condition::DiskPressure, StarvedResource::EphemeralStorage, false},
    {Signal::ImagefsInodesFree, "imagefs.inodesFree", Operator::LessThan, Condition::DiskPressure, StarvedResource::Inodes, false},
    {Signal::PidAvailable, "pid.available", Operator::LessThan, Condition::PIDPressure, StarvedResource::Pids, false},
    {Signal::MemoryPressureSomeAvg10, "memory.pressure.some.avg10", Operator::GreaterThan, Condition::MemoryPressure, StarvedResource::Memory, true},
    {Signal::MemoryPressureFullAvg10, "memory.pressure.full.avg10", Operator::GreaterThan, Condition::MemoryPressure, StarvedResource::Memory, true},
    {Signal::MemoryPressureSomeAvg60, "memory.pressure.some.avg60", Operator::GreaterThan, Condition::MemoryPressure, StarvedResource::Memory, true},
    {Signal::MemoryPressureFullAvg60, "memory.pressure.full.avg60", Operator::GreaterThan, Condition::MemoryPressure, StarvedResource::Memory, true},
    {Signal::IoPressureFullAvg10, "io.pressure.full.avg10", Operator::GreaterThan, Condition::DiskPressure, StarvedResource::None, true},
    {Signal::ContainerfsAvailable, "containerfs.available", Operator::LessThan, Condition::DiskPressure, StarvedResource::EphemeralStorage, false},
    {Signal::ContainerfsInodesFree, "containerfs.inodesFree", Operator::LessThan, Condition::DiskPressure, StarvedResource::Inodes, false},
}};

constexpr const SignalInfo& info(Signal s) { return kSignals[static_cast<std::size_t>(s)]; }

/// True for containerfs.available and containerfs.inodesFree, whose
/// thresholds the kubelet derives from nodefs or imagefs (docs/engine.md).
constexpr bool is_containerfs(Signal s) {
  return s == Signal::ContainerfsAvailable || s == Signal::ContainerfsInodesFree;
}
constexpr std::string_view name(Signal s) { return info(s).name; }

/// Parses a signal name as written in configuration; nullopt when unknown.
constexpr std::optional<Signal> parse_signal(std::string_view text) {
  for (const auto& s : kSignals) {
    if (s.name == text) return s.signal;
  }
  return std::nullopt;
}

inline constexpr EnumName<Condition> kConditionNames[] = {
    {Condition::MemoryPressure, "MemoryPressure"},
    {Condition::DiskPressure, "DiskPressure"},
    {Condition::PIDPressure, "PIDPressure"},
};
static_assert(std::size(kConditionNames) == kConditionCount);
constexpr std::string_view name(Condition c) { return enum_name(kConditionNames, c, "?"); }

/// The kubelet's QoS class names (pod status.qosClass).
inline constexpr EnumName<QosClass> kQosClassNames[] = {
    {QosClass::BestEffort, "BestEffort"},
    {QosClass::Burstable, "Burstable"},
    {QosClass::Guaranteed, "Guaranteed"},
};
constexpr std::string_view name(QosClass q) { return enum_name(kQosClassNames, q, "?"); }
constexpr std::optional<QosClass> parse_qos(std::string_view text) { return enum_parse(kQosClassNames, text); }

}  // namespace pressured
