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

/// What the list+watch loop did (pressured/stats.hpp): exported by the daemon
/// under these series (PodMetadataSource::exported_stats), read by tests.
#define PRESSURED_APISERVER_SOURCE_STATS(COUNTER, GAUGE)                                                       \
  COUNTER(lists, "pressured_pod_source_api_lists_total", "",                                                    \
          "Successful LISTs of this node's pods from the API server (the first, and every relist). More than "  \
          "the first few: watches keep ending in relists (see the expired relists and errors).")               \
  COUNTER(relists_gone, "pressured_pod_source_api_expired_relists_total", "",                                   \
          "Relists because the API server no longer had the watch's resourceVersion (410 Gone): the watch "     \
          "fell too far behind, or the server's watch cache was reset.")                                       \
  COUNTER(watches, "pressured_pod_source_api_watches_total", "",                                                \
          "Watch requests opened. Each normally lasts the watch timeout; rising faster: watches end early.")   \
  COUNTER(events, "pressured_pod_source_api_watch_events_total", "",                                            \
          "Pod changes (ADDED, MODIFIED, DELETED) received through the watch and applied to the pod map.")      \
  COUNTER(bookmarks, "pressured_pod_source_api_watch_bookmarks_total", "",                                      \
          "Watch bookmarks received: the server confirming the watch is alive and advancing its "              \
          "resourceVersion.")                                                                                  \
  COUNTER(stalls, "pressured_pod_source_api_watch_stalls_total", "",                                            \
          "Watches silent past their deadline, torn down and restarted (a stalled connection or server); "     \
          "pod metadata lagged until then.")                                                                   \
  COUNTER(errors, "pressured_pod_source_api_errors_total", "",                                                  \
          "Failed requests to the API server (network, HTTP status, unparsable answer), each followed by a "   \
          "backoff; the last good pod map is kept meanwhile.")
PRESSURED_DECLARE_STATS(ApiServerSourceCounters, PRESSURED_APISERVER_SOURCE_STATS);

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
  std::vector<ExternalStat> exported_stats() const override { return stat_list(counters_); }

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
