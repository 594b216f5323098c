#pragma once
// The plugin host: finds plugins and asks them, off the event loop's thread.
//
// A plugin registers the way node plugins register with the kubelet: it
// creates a Unix socket in the plugin directory, which pressured watches
// with inotify; pressured asks it Identify, and drops it when the socket
// goes (or when it stops answering). One worker thread owns every
// connection: it registers new sockets, and each time the daemon asks
// (ask(), after a decision) it calls every registered plugin under the
// configured deadline and publishes what came back. The daemon reads the
// latest answers (answers()) when it decides: it never waits for a plugin,
// so a hard threshold's eviction goes ahead on pressured's own ranking when
// no answer is in. A plugin that fails a call (deadline, error, garbage,
// too large an answer) has no answers for that round and is backed off
// (doubling, up to backoff_max); one that is unreachable is dropped and
// registered again once it answers Identify.

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernel/fd.hpp"
#include "pressured/plugins.hpp"

namespace pressured::plugins {

struct HostOptions {
  std::string directory;  // absolute; created 0700 when missing
  Duration call_timeout = std::chrono::milliseconds(50);
  Duration answer_max_age = std::chrono::seconds(30);
  Duration backoff_initial = std::chrono::seconds(1);
  Duration backoff_max = std::chrono::seconds(60);
  std::size_t max_plugins = 16;
  AnswerLimits limits;
};

/// One plugin's counts since pressured started (kept after it goes, so the
/// exported counters never go down).
struct PluginCounts {
  uint64_t calls = 0;
  uint64_t timeouts = 0;
  uint64_t errors = 0;         // failed calls other than timeouts (unreachable, garbage, too large)
  uint64_t dropped_entries = 0;  // answer entries over the limits or of unknown kinds
  uint64_t registrations = 0;
  bool operator==(const PluginCounts&) const = default;
};

/// A socket of the directory as the host sees it (tests, logs).
struct PluginStatus {
  std::string socket;
  std::string name;  // empty until it answered Identify
  bool registered = false;
  uint64_t consecutive_failures = 0;
};

class PluginHost {
 public:
  PluginHost(HostOptions options, std::unique_ptr<PluginConnector> connector);
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  /// Checks the directory (created 0700 if missing; it must be a directory
  /// owned by pressured's user and writable by nobody else, since whoever can
  /// create a socket there can advise evictions), watches it and starts the
  /// worker. An error says what is wrong with the directory.
  Result<void> start();
  /// Stops and joins the worker (a call in progress ends at its deadline).
  void stop();

  /// The questions of the next round; replaces any not yet asked. Never
  /// blocks (any thread).
  void ask(std::vector<LaneQuestion> questions);

  /// Every registered plugin's answers from its last good round, no older
  /// than answer_max_age, by plugin name. Never blocks on a plugin.
  std::vector<Answers> answers() const;

  /// Counts by plugin name (every plugin seen since start).
  std::map<std::string, PluginCounts> counts() const;
  std::vector<PluginStatus> status() const;
  /// Rounds of questions finished (tests wait on it instead of sleeping).
  uint64_t rounds() const { return rounds_.load(); }
  /// Registrations so far, every plugin (tests).
  uint64_t registrations() const { return registrations_.load(); }

 private:
  struct Entry;
  void run();
  void drain_inotify();
  void scan_directory();
  void socket_appeared(const std::string& name);
  void socket_gone(const std::string& name);
  void try_register(Entry& e, TimePoint now);
  void ask_one(Entry& e, const std::vector<LaneQuestion>& questions, TimePoint now);
  void failed(Entry& e, const PluginClient::Failure& f, std::string_view call, TimePoint now);
  std::optional<TimePoint> next_retry() const;
  void wake();

  HostOptions options_;
  std::unique_ptr<PluginConnector> connector_;
  kernel::Fd inotify_;
  kernel::Fd wake_fd_;
  std::thread worker_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> rounds_{0};
  std::atomic<uint64_t> registrations_{0};

  // The worker's own (no lock): one entry per socket file.
  std::map<std::string, std::unique_ptr<Entry>> entries_;

  mutable std::mutex mu_;  // guards what follows
  std::optional<std::vector<LaneQuestion>> pending_;
  std::map<std::string, Answers> answers_;  // by plugin name
  std::map<std::string, PluginCounts> counts_;
  std::vector<PluginStatus> status_;
};

/// Loads the gRPC transport module: `path`, or when empty the module next
/// to the executable, under ../lib/pressured/, or in the build tree. An
/// error names every place tried and dlopen's reason.
Result<std::unique_ptr<PluginConnector>> load_grpc_connector(const std::string& path);

}  // namespace pressured::plugins
