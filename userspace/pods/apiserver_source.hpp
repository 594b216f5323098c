#pragma once
// Pod metadata from the API server: list + watch of the pods bound to this
// node (fieldSelector=spec.nodeName=<node>), like the kubelet's own informer.
// One background thread keeps the map; readers copy a shared_ptr (the
// pressure path never waits on the network). See docs/kubernetes.md.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "k8s/api_client.hpp"
#include "k8s/backoff.hpp"
#include "pods/pod_json.hpp"
#include "pressured/observer.hpp"

namespace pressured::pods {

/// The two requests the source makes, as it sees them: the API server
/// client in the daemon (make_pod_api), a stub in tests and the fuzzer.
class PodApi {
 public:
  virtual ~PodApi() = default;
  /// One LIST page: a GET whose decoded body is bounded by `max_body_bytes`
  /// (over it: an EFBIG Error), compressed when the server offers it.
  virtual Result<k8s::HttpResponse> list(const std::string& path, std::size_t max_body_bytes) = 0;
  /// A watch: the 2xx body goes to `on_data` as it arrives (see
  /// k8s::ApiClient::stream).
  virtual Result<k8s::HttpResponse> watch(const std::string& path, Duration total_timeout,
                                          const std::function<bool(std::string_view)>& on_data) = 0;
};

/// PodApi over k8s::ApiClient (connecting bounded by `request_timeout`).
std::shared_ptr<PodApi> make_pod_api(const k8s::ApiServer& server, Duration request_timeout);

struct ApiServerSourceOptions {
  k8s::ApiServer server;
  std::string node_name;
  Duration request_timeout = std::chrono::seconds(10);  // a LIST page, and connecting a watch
  // Server-side timeoutSeconds of one watch. The server ends the watch then
  // (and sends a bookmark before); a watch still open stall_grace later is
  // stalled and is torn down and restarted.
  Duration watch_timeout = std::chrono::seconds(60);
  Duration stall_grace = std::chrono::seconds(10);
  // Pods per LIST page (client-go's default), and the bound of one page's
  // decoded body: a page over it is asked again with half the limit, so what
  // a LIST holds at once is one page, whatever the node's pod count.
  std::size_t page_size = 500;
  std::size_t max_page_bytes = 8u << 20;
  // Bounds of one whole LIST, over all its pages: a server or proxy that
  // keeps paging (new pods, or its own token again) is refused rather than
  // followed until the daemon's memory limit. The pods are this node's:
  // maxPods (110 by default) plus the finished pods not yet collected (the
  // controller manager collects past 12 500 in the whole cluster), so 20 000
  // is far over any real node; the bytes are the decoded answers' (what a
  // pod map can hold grows with them), 64 MiB being 3 KiB a pod at that count.
  std::size_t max_list_pods = 20000;
  std::size_t max_list_bytes = std::size_t{64} << 20;
  // One watch event (one line) longer than this ends the watch as an error.
  // The API server stores objects of at most ~1.5 MiB (etcd's request bound).
  std::size_t max_event_bytes = 8u << 20;
  // Whether the pods' labels are kept (PodSourceConfig::keep_labels).
  PodLabelUse labels = PodLabelUse::Keep;
  // After an error, a 410 Gone or a watch that ended at once (shorter than
  // short_watch with nothing received): wait between d and 2d (jitter), d
  // doubling from initial_backoff up to max_backoff; d starts again from
  // initial_backoff when backoff_reset passed since the last wait. client-go's
  // reflector uses the same numbers.
  Duration initial_backoff = std::chrono::milliseconds(800);
  Duration max_backoff = std::chrono::seconds(30);
  Duration backoff_reset = std::chrono::minutes(2);
  Duration short_watch = std::chrono::seconds(1);
  // Seams for tests and the fuzzer. api: null, make_pod_api(server, request_timeout).
  // clock: null, CLOCK_MONOTONIC. sleep: null, wait interruptibly by stop();
  // it returns false to end the loop. jitter_seed: 0, random.
  std::shared_ptr<PodApi> api;
  const Clock* clock = nullptr;
  std::function<bool(Duration)> sleep;
  uint32_t jitter_seed = 0;
};

inline constexpr std::string_view kListRefusedHelp =
    "LIST answers refused by reason: too_many_pods, too_many_bytes, too_many_pages (the whole LIST over its "
    "bound), repeated_continue (the server sent a continue token it had sent before): the LIST fails, the "
    "previous pod map is kept and the next LIST comes after a backoff; paged_cache_answer: a "
    "resourceVersion=0 answer carried a continue token (the watch cache never pages), not followed: this node's "
    "pods are listed from etcd in pages from then on.";

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
          "Failed requests to the API server (network, HTTP status, unparsable or malformed answer), each "    \
          "followed by a backoff; the last good pod map is kept meanwhile.")                                   \
  COUNTER(list_pages, "pressured_pod_source_api_list_pages_total", "",                                          \
          "LIST pages received (a LIST is paged by `limit`/`continue`; a page over the size bound is asked "   \
          "again with half the limit).")                                                                       \
  COUNTER(refused_pods, "pressured_pod_source_api_list_refused_total", "reason=too_many_pods",                   \
          ::pressured::pods::kListRefusedHelp)                                                                 \
  COUNTER(refused_bytes, "pressured_pod_source_api_list_refused_total", "reason=too_many_bytes",                 \
          ::pressured::pods::kListRefusedHelp)                                                                 \
  COUNTER(refused_pages, "pressured_pod_source_api_list_refused_total", "reason=too_many_pages",                 \
          ::pressured::pods::kListRefusedHelp)                                                                 \
  COUNTER(refused_repeated_token, "pressured_pod_source_api_list_refused_total", "reason=repeated_continue",      \
          ::pressured::pods::kListRefusedHelp)                                                                 \
  COUNTER(refused_cache_continue, "pressured_pod_source_api_list_refused_total", "reason=paged_cache_answer",     \
          ::pressured::pods::kListRefusedHelp)                                                                 \
  COUNTER(short_watches, "pressured_pod_source_api_short_watches_total", "",                                    \
          "Watches that ended at once with nothing received (a server or proxy closing them), each "          \
          "followed by a backoff.")
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

  /// The list+watch loop on the calling thread (start() runs it on the
  /// source's own); returns at stop() or when the injected sleep says so.
  void run();

 private:
  enum class WatchEnd { Expired, Short, Gone, Stalled, Failed, Stopped };
  struct ListPages;
  Result<void> list();
  Result<void> list_pages(bool from_cache, ListPages& out);
  WatchEnd watch();
  // One watch line; false ends the watch (gone or parse_error set).
  bool watch_line(std::string_view line, PodMetadataMap& map, bool& changed, bool& gone, std::string& parse_error);
  void publish(PodMetadataMap map, bool from_list);
  // A failed request (counted, logged when it differs from the last one;
  // `loud`: at error level every time).
  void failed(const std::string& what, bool loud = false);
  bool sleep_interruptible(Duration d);
  bool pause();  // the next backoff; false: stop
  void gone_seen();
  TimePoint now() const;

  ApiServerSourceOptions opts_;
  std::shared_ptr<PodApi> api_;
  ApiServerSourceCounters counters_;
  k8s::Backoff backoff_;  // run()'s thread only
  // List from etcd (consistent, paged) rather than the watch cache: once
  // after a 410, and for good once the cache's one-page answer was over
  // max_page_bytes. Under list_mu_.
  bool relist_after_gone_ = false;
  bool cache_too_large_ = false;
  bool cache_pages_ = false;  // a resourceVersion=0 answer came with a continue token
  // Why pods or fields of pods could not be read: said when they change,
  // not at every LIST (under list_mu_) or watch event (run()'s thread).
  std::vector<std::string> last_list_problems_;
  std::string last_watch_problem_;
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
