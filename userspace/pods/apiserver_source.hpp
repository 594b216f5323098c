#pragma once
// Pod metadata from the API server: list + watch of the pods bound to this
// node (fieldSelector=spec.nodeName=<node>), like the kubelet's own informer.
// One background thread keeps the map; readers copy a shared_ptr (the
// pressure path never waits on the network). See docs/kubernetes.md.

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "k8s/api_client.hpp"
#include "pressured/observer.hpp"

namespace pressured::pods {

struct ApiServerSourceOptions {
  k8s::ApiServer server;
  std::string node_name;
  Duration request_timeout = std::chrono::seconds(10);  // a LIST, and connecting a watch
  // Server-side timeoutSeconds of one watch. The server ends the watch then
  // (and sends a bookmark before); a watch still open stall_grace later is
  // stalled and is torn down and restarted.
  Duration watch_timeout = std::chrono::seconds(60);
  Duration stall_grace = std::chrono::seconds(10);
  Duration initial_backoff = std::chrono::milliseconds(200);
  Duration max_backoff = std::chrono::seconds(30);
};

/// What the watch loop did, for metrics and tests.
struct ApiServerSourceCounters {
  std::atomic<uint64_t> lists{0};          // successful LISTs (the first, and every relist)
  std::atomic<uint64_t> relists_gone{0};   // relists because the resourceVersion was too old (410)
  std::atomic<uint64_t> watches{0};        // watch requests opened
  std::atomic<uint64_t> events{0};         // ADDED/MODIFIED/DELETED applied
  std::atomic<uint64_t> bookmarks{0};
  std::atomic<uint64_t> stalls{0};         // watches torn down for silence past their deadline
  std::atomic<uint64_t> errors{0};         // failed requests (network, HTTP, parse); followed by a backoff
};

class ApiServerPodSource final : public PodMetadataSource {
 public:
  explicit ApiServerPodSource(ApiServerSourceOptions options);
  ~ApiServerPodSource() override;

  /// A blocking LIST (bounded by request_timeout). The watch thread does the
  /// rest; call it only off the pressure path (start-up, `top`).
  Result<void> refresh() override;
  std::shared_ptr<const PodMetadataMap> current() const override;
  /// Starts the list+watch thread; `interval` is unused (changes are pushed).
  void start(Duration interval) override;
  void stop() override;
  /// Nothing to do: the watch delivers changes as they happen.
  void request_refresh() override {}
  PodMetadataStats stats() const override;
  std::string describe() const override;

  const ApiServerSourceCounters& counters() const { return counters_; }
  /// The resourceVersion the next watch resumes from.
  std::string resource_version() const;

 private:
  enum class WatchEnd { Expired, Gone, Stalled, Failed, Stopped };
  void run();
  Result<void> list();
  WatchEnd watch();
  void publish(PodMetadataMap map, bool from_list);
  void failed(const std::string& what);
  bool sleep_interruptible(Duration d);

  ApiServerSourceOptions opts_;
  ApiServerSourceCounters counters_;
  mutable std::mutex mu_;
  std::shared_ptr<const PodMetadataMap> map_;
  std::string resource_version_;
  PodMetadataStats stats_;
  std::mutex list_mu_;  // one LIST at a time (refresh() and the thread)
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace pressured::pods
