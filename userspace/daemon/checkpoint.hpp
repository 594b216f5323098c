#pragma once
// The daemon's checkpoint: what must survive a restart (soft-threshold first
// observed times, condition state and transition times, the eviction
// policy's state: evictions in flight, their phase and deadlines).
// Written atomically (temp file, fsync, rename, fsync of the directory) and
// tagged with the boot id: monotonic time points mean nothing after a reboot,
// so a checkpoint from another boot is discarded. See docs/daemon.md.

#include <cstdint>
#include <string>
#include <vector>

#include "pressured/engine.hpp"
#include "pressured/policy.hpp"
#include "pressured/result.hpp"

namespace pressured {

struct Checkpoint {
  std::string boot_id;
  EngineState engine;  // keyed by signal and kind: restored only onto matching thresholds
  PolicyState policy;  // evictions in flight (with their phase and deadlines), evicted pods
};

/// Serialises to JSON (versioned). Pure.
std::string encode_checkpoint(const Checkpoint& cp);
/// Parses what encode_checkpoint wrote; an error for anything malformed. Pure.
Result<Checkpoint> decode_checkpoint(const std::string& text);

/// Atomically replaces `path` with `contents`: write `path`.tmp, fsync,
/// rename, fsync the directory. Creates the directory if missing.
Result<void> write_file_atomically(const std::string& path, const std::string& contents);

/// The kernel's boot id (proc_root/sys/kernel/random/boot_id), trimmed; empty if unreadable.
std::string read_boot_id(const std::string& proc_root = "/proc");

enum class CheckpointLoad { Restored, Missing, Corrupt, OtherBoot };

struct LoadedCheckpoint {
  CheckpointLoad status = CheckpointLoad::Missing;
  Checkpoint checkpoint;  // valid when Restored
  std::string error;      // why, when Corrupt or OtherBoot
};

/// Reads and validates the checkpoint at `path` (bounded to 4 MiB). Never
/// fails hard: a missing, corrupt or foreign-boot file is reported as such.
LoadedCheckpoint load_checkpoint(const std::string& path, const std::string& boot_id);

}  // namespace pressured
