#pragma once
// The daemon's checkpoint: what must survive a restart (soft-threshold first
// observed times, condition state and transition times, the eviction
// policy's state: evictions in flight, their phase and deadlines; the reclaim
// stage's back-off).
// Written atomically (temp file, fsync, rename, fsync of the directory) and
// tagged with the boot id: monotonic time points mean nothing after a reboot,
// so a checkpoint from another boot is discarded. See docs/daemon.md.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pressured/clock.hpp"
#include "pressured/engine.hpp"
#include "pressured/policy.hpp"
#include "pressured/relief.hpp"
#include "pressured/result.hpp"

namespace pressured {

struct Checkpoint {
  std::string boot_id;
  EngineState engine;  // keyed by signal and kind: restored only onto matching thresholds
  PolicyState policy;  // the lanes' phases and one record per eviction (its phases and deadlines)
  ReliefState relief;  // cgroups the reclaim stage does not ask again yet
};

/// The JSON codec of each type the checkpoint holds (nlohmann finds them by
/// argument-dependent lookup). from_json throws on anything malformed.
void to_json(nlohmann::json& j, const Eviction& e);
void from_json(const nlohmann::json& j, Eviction& e);
void to_json(nlohmann::json& j, const EvictionRecord& r);
void from_json(const nlohmann::json& j, EvictionRecord& r);
void to_json(nlohmann::json& j, const PolicyState& st);
void from_json(const nlohmann::json& j, PolicyState& st);
void to_json(nlohmann::json& j, const EngineState& e);
void from_json(const nlohmann::json& j, EngineState& e);
void to_json(nlohmann::json& j, const ReliefState& r);
void from_json(const nlohmann::json& j, ReliefState& r);

/// Serialises to JSON (versioned). Pure.
std::string encode_checkpoint(const Checkpoint& cp);
/// Parses what encode_checkpoint wrote; an error for anything malformed. Pure.
Result<Checkpoint> decode_checkpoint(const std::string& text);

/// The largest checkpoint read back (a few KiB per eviction in flight).
inline constexpr std::size_t kMaxCheckpointBytes = 4 * 1024 * 1024;

/// Atomically replaces `path` with `contents` (kernel::replace_file: the
/// temporary `path`.tmp created new, mode 0600, fsync, rename, fsync of the
/// directory; never through a link; a non-regular file at `path` refused).
/// Makes the missing directories (mode 0700, with pressured's marker).
Result<void> write_file_atomically(const std::string& path, const std::string& contents);

/// The kernel's boot id (proc_root/sys/kernel/random/boot_id), trimmed; empty if unreadable.
std::string read_boot_id(const std::string& proc_root = "/proc");

enum class CheckpointLoad { Restored, Missing, Corrupt, OtherBoot };

struct LoadedCheckpoint {
  CheckpointLoad status = CheckpointLoad::Missing;
  Checkpoint checkpoint;  // valid when Restored
  std::string error;      // why, when Corrupt or OtherBoot
};

/// Reads and validates the checkpoint at `path` (a regular file, not a link,
/// of at most kMaxCheckpointBytes, opened without blocking). Never fails
/// hard: a missing, corrupt or foreign-boot file is reported as such.
LoadedCheckpoint load_checkpoint(const std::string& path, const std::string& boot_id);

/// Keeps the checkpoint file in step with the engine and the policy: a change
/// of structure (an eviction started or moved on, a soft threshold began or
/// stopped timing) is written at once, since a restart must resume it; when
/// only the conditions' "last met" times moved, at most every `min_interval`.
/// An empty path turns it off.
class Checkpointer {
 public:
  Checkpointer(std::string path, std::string boot_id,
               Duration min_interval = std::chrono::seconds(5));

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  /// load_checkpoint(); a restored checkpoint is what the next writes are compared with.
  LoadedCheckpoint load();
  /// load(), logged: none found, ignored (corrupt, another boot), or each
  /// eviction a restored checkpoint resumes and each API eviction it sends again.
  LoadedCheckpoint restore();
  /// Writes now. False when the write failed (logged once, then only counted).
  bool save(const EngineState& engine, const PolicyState& policy, const ReliefState& relief = {});
  /// Writes if the state changed as described above (a cgroup starting or
  /// ending its reclaim back-off is a change of structure).
  void maybe_save(const EngineState& engine, const PolicyState& policy, TimePoint now,
                  const ReliefState& relief = {});
  /// Called with the result of every write (metrics).
  void on_write(std::function<void(bool ok)> hook) { on_write_ = std::move(hook); }
  uint64_t writes() const { return writes_; }
  uint64_t write_failures() const { return write_failures_; }

 private:
  Checkpoint make(const EngineState& engine, const PolicyState& policy, const ReliefState& relief) const;
  bool write(const Checkpoint& cp, std::string text);

  std::string path_;
  std::string boot_id_;
  Duration min_interval_;
  std::string last_;            // the text last written or restored
  // What last_ encodes: an evaluation that changed nothing (every idle tick)
  // is recognised without encoding the state again.
  std::optional<Checkpoint> last_state_;
  std::string last_structure_;  // the same without the "last met" times
  TimePoint last_write_{};
  uint64_t writes_ = 0;
  uint64_t write_failures_ = 0;
  std::function<void(bool)> on_write_;
};

}  // namespace pressured
