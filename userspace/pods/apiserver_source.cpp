#include "pods/apiserver_source.hpp"

#include <spdlog/spdlog.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
#include "k8s/bounded_json.hpp"
#include "pods/pod_json.hpp"

namespace pressured::pods {
namespace {

using json = nlohmann::json;

std::string url_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

const MonotonicClock kMonotonic;

TimePoint steady_now() { return kMonotonic.now(); }

// A hostile server's `continue` tokens end somewhere: more pages than this
// (at one pod a page, every pod of the largest nodes many times over) is an error.
constexpr int kMaxListPages = 20000;

std::string compact(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

class ClientPodApi final : public PodApi {
 public:
  ClientPodApi(const k8s::ApiServer& server, Duration timeout) : client_(server, timeout) {}
  Result<k8s::HttpResponse> list(const std::string& path, std::size_t max_body_bytes) override {
    return client_.get_large(path, max_body_bytes);
  }
  Result<k8s::HttpResponse> watch(const std::string& path, Duration total_timeout,
                                  const std::function<bool(std::string_view)>& on_data) override {
    return client_.stream(path, total_timeout, on_data);
  }

 private:
  k8s::ApiClient client_;
};

}  // namespace

std::shared_ptr<PodApi> make_pod_api(const k8s::ApiServer& server, Duration request_timeout) {
  return std::make_shared<ClientPodApi>(server, request_timeout);
}

struct ApiServerPodSource::ListPages {
  PodMetadataMap map;
  std::string resource_version;
  uint64_t skipped = 0;
  std::vector<std::string> errors;  // why pods or fields could not be read (the first ten)
  // The LIST was refused for its whole (a bound, a repeated token): logged
  // at error at every refusal, each of them followed by a backoff.
  bool refused = false;
  // A resourceVersion=0 answer carried a continue token: not followed.
  bool cache_paged = false;
};

ApiServerPodSource::ApiServerPodSource(ApiServerSourceOptions options)
    : opts_(std::move(options)),
      api_(opts_.api ? opts_.api : make_pod_api(opts_.server, opts_.request_timeout)),
      // client-go's ExponentialBackoffManager, as its reflector uses it: the
      // base restarts after a quiet backoff_reset, doubles up to the cap,
      // and each wait adds up to 100 %.
      backoff_({.initial = opts_.initial_backoff,
                .max = opts_.max_backoff,
                .reset_after = opts_.backoff_reset,
                .jitter = 1.0,
                .seed = opts_.jitter_seed}),
      map_(std::make_shared<const PodMetadataMap>()) {}

ApiServerPodSource::~ApiServerPodSource() { stop(); }

std::string ApiServerPodSource::describe() const { return "apiserver:" + opts_.server.server + " node " + opts_.node_name; }

std::shared_ptr<const PodMetadataMap> ApiServerPodSource::current() const {
  std::lock_guard lk(mu_);
  return map_;
}

PodMetadataStats ApiServerPodSource::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

std::string ApiServerPodSource::resource_version() const {
  std::lock_guard lk(mu_);
  return resource_version_;
}

Result<void> ApiServerPodSource::refresh() { return list(); }

void ApiServerPodSource::start(Duration /*interval*/) {
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

void ApiServerPodSource::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

TimePoint ApiServerPodSource::now() const { return (opts_.clock != nullptr ? opts_.clock : &kMonotonic)->now(); }

bool ApiServerPodSource::sleep_interruptible(Duration d) {
  if (opts_.sleep) return opts_.sleep(d) && !stopping_;
  std::unique_lock lk(mu_);
  return !cv_.wait_for(lk, d, [this] { return stopping_.load(); });
}

bool ApiServerPodSource::pause() { return sleep_interruptible(backoff_.next(now())); }

void ApiServerPodSource::gone_seen() {
  // The next LIST reads etcd, not the watch cache: the cache may be as old as
  // the resourceVersion that just expired (client-go does the same).
  std::lock_guard fetch(list_mu_);
  relist_after_gone_ = true;
}

void ApiServerPodSource::publish(PodMetadataMap map, bool from_list) {
  std::lock_guard lk(mu_);
  stats_.pods = map.size();
  stats_.last_success = steady_now();
  if (from_list) ++stats_.refreshes;
  if (!stats_.last_error.empty()) spdlog::info("pod metadata ({}): recovered, {} pods", describe(), map.size());
  stats_.last_error.clear();
  map_ = std::make_shared<const PodMetadataMap>(std::move(map));
}

void ApiServerPodSource::failed(const std::string& what, bool loud) {
  ++counters_.errors;
  std::lock_guard lk(mu_);
  ++stats_.refresh_failures;
  if (loud) {
    // A LIST refused for its whole: at every refusal (one per backoff), not
    // once, for an operator must find what feeds the daemon such answers.
    spdlog::error("pod metadata ({}): {}; {}, listing again after a backoff", describe(), what,
                  stats_.last_success ? fmt::format("keeping the previous {} pods", stats_.pods)
                                      : std::string("no pod list yet: pods without metadata are not evicted"));
  } else if (stats_.last_error != what) {
    if (!stats_.last_success) {
      // Nothing delivered yet: no pod has metadata, so none is evicted by
      // the engine's ranking and /readyz fails (docs/operations.md).
      spdlog::error("pod metadata ({}): no pod list yet: {}; pods without metadata are not evicted and /readyz "
                    "fails until a LIST succeeds",
                    describe(), what);
    } else {
      spdlog::warn("pod metadata ({}): {}; keeping the previous {} pods", describe(), what, stats_.pods);
    }
  }
  stats_.last_error = what;
}

Result<void> ApiServerPodSource::list_pages(bool from_cache, ListPages& out) {
  const std::string base = "/api/v1/pods?fieldSelector=" + url_encode("spec.nodeName=" + opts_.node_name);
  std::size_t limit = std::max<std::size_t>(opts_.page_size, 1);
  std::string cont;
  // What the whole LIST has brought so far, against its bounds; the tokens
  // received (their hashes: a token is up to a page long), so that a server
  // sending one again is not followed round its loop until the page bound.
  std::size_t total_items = 0;
  std::size_t total_bytes = 0;
  std::unordered_set<std::size_t> tokens;
  const auto refuse = [&](std::atomic<uint64_t>& counter, std::string what) -> Result<void> {
    ++counter;
    out.refused = true;
    return Error{EOVERFLOW, "LIST pods refused: " + what};
  };
  for (int pages = 0;; ++pages) {
    if (pages >= kMaxListPages) {
      return refuse(counters_.refused_pages, fmt::format("more than {} pages (a server paging without end?)", kMaxListPages));
    }
    // resourceVersion=0: served from the API server's watch cache, as the
    // kubelet's own informer does (a quorum read of every pod per node would
    // not scale); the cache ignores `limit` and answers in one page. Without
    // it (after a 410, or an answer too large for one page) the LIST is a
    // consistent read from etcd, paged; a continuation carries its snapshot.
    std::string path = base + "&limit=" + std::to_string(limit);
    if (!cont.empty()) {
      path += "&continue=" + url_encode(cont);
    } else if (from_cache) {
      path += "&resourceVersion=0";
    }
    auto r = api_->list(path, opts_.max_page_bytes);
    if (!r) {
      if (r.error().code == EFBIG && !from_cache && limit > 1) {
        limit = std::max<std::size_t>(limit / 2, 1);
        continue;
      }
      return Error{r.error().code, r.error().message};
    }
    if (r->status == 410 && !cont.empty()) {
      return Error{ESTALE, "LIST pods: the continuation expired (410) before the last page; listing again"};
    }
    if (r->status != 200) {
      return Error{EIO, fmt::format("LIST pods: HTTP {} {}", r->status, printable_excerpt(r->body, 300))};
    }
    total_bytes += r->body.size();
    if (total_bytes > opts_.max_list_bytes) {
      return refuse(counters_.refused_bytes, fmt::format("more than {} bytes over {} pages (a server paging without "
                                                         "end?)",
                                                         opts_.max_list_bytes, pages + 1));
    }
    auto doc = k8s::parse_bounded_json(r->body);
    r->body = std::string();  // the page's DOM is enough from here
    if (!doc) return Error{EPROTO, "LIST pods: " + doc.error().message};
    if (!doc->is_object()) return Error{EPROTO, "LIST pods: the answer is not an object"};
    const json* meta = k8s::member(*doc, "metadata");
    if (meta == nullptr || !meta->is_object()) return Error{EPROTO, "LIST pods: the answer has no metadata object"};
    const json* rv = k8s::member(*meta, "resourceVersion");
    if (rv != nullptr && !rv->is_string()) return Error{EPROTO, "LIST pods: metadata.resourceVersion is not a string"};
    const json* next = k8s::member(*meta, "continue");
    if (next != nullptr && !next->is_string()) return Error{EPROTO, "LIST pods: metadata.continue is not a string"};
    const json* items = k8s::member(*doc, "items");
    if (items != nullptr && !items->is_array() && !items->is_null()) {
      return Error{EPROTO, "LIST pods: items is not a list"};
    }
    ++counters_.list_pages;
    if (items != nullptr && items->is_array()) {
      total_items += items->size();
      if (total_items > opts_.max_list_pods) {
        return refuse(counters_.refused_pods, fmt::format("more than {} pods over {} pages (a server paging "
                                                          "without end?)",
                                                          opts_.max_list_pods, pages + 1));
      }
    }
    const std::string next_token = next != nullptr ? next->get<std::string>() : std::string();
    if (!next_token.empty() && cont.empty() && from_cache) {
      // The watch cache answers resourceVersion=0 in one page whatever the
      // limit (Kubernetes API concepts; KEP-4988 keeps that), so a token here
      // is not the cache's: an API server without it for pods, or something
      // between. Not followed: list() lists again from etcd, in pages,
      // where the same bounds hold.
      ++counters_.refused_cache_continue;
      out.cache_paged = true;
      return Error{ENOTSUP, "LIST pods: a resourceVersion=0 answer carried a continue token"};
    }
    if (!next_token.empty() && !tokens.insert(std::hash<std::string>{}(next_token)).second) {
      return refuse(counters_.refused_repeated_token,
                    fmt::format("the server sent a continue token it had sent before (page {}): it would page in a "
                                "loop",
                                pages + 1));
    }
    // A paged LIST is one snapshot: every page carries its resourceVersion.
    if (out.resource_version.empty() && rv != nullptr) out.resource_version = rv->get<std::string>();
    if (items != nullptr && items->is_array()) {
      for (const auto& item : *items) {
        auto parsed = parse_pod_json(item, PodTrust::ApiServer, opts_.labels);
        if (!parsed) {
          ++out.skipped;
          if (out.errors.size() < 10) out.errors.push_back(parsed.error().message);
          continue;
        }
        out.skipped += parsed->skipped;
        for (auto& e : parsed->errors) {
          if (out.errors.size() < 10) out.errors.push_back(std::move(e));
        }
        for (auto& p : parsed->pods) {
          std::string uid = p.uid;
          out.map[uid] = std::move(p);
        }
      }
    }
    cont = next_token;
    if (cont.empty()) return {};
  }
}

Result<void> ApiServerPodSource::list() {
  std::lock_guard fetch(list_mu_);
  ListPages got;
  const bool from_cache = !relist_after_gone_ && !cache_too_large_ && !cache_pages_;
  auto r = list_pages(from_cache, got);
  if (!r && got.cache_paged) {
    spdlog::warn("pod metadata ({}): the API server paged a resourceVersion=0 answer, which its watch cache never "
                 "does (the cache is off for pods, or a proxy answers); the continue token is not followed: listing "
                 "from etcd in pages of {} pods from now on",
                 describe(), opts_.page_size);
    cache_pages_ = true;
    got = ListPages{};
    r = list_pages(false, got);
  } else if (!r && from_cache && r.error().code == EFBIG) {
    // The watch cache answers in one page: a node whose pods are over the
    // page bound is listed from etcd, in pages, from now on.
    spdlog::info("pod metadata ({}): this node's pod list is over {} bytes in one answer; listing from etcd in "
                 "pages of {} pods from now on",
                 describe(), opts_.max_page_bytes, opts_.page_size);
    cache_too_large_ = true;
    got = ListPages{};
    r = list_pages(false, got);
  }
  if (!r) {
    failed(r.error().message, got.refused);
    return r.error();
  }
  if (got.resource_version.empty()) {
    failed("LIST pods: the answer has no metadata.resourceVersion to watch from");
    return Error{EPROTO, "LIST pods: no resourceVersion"};
  }
  {
    std::lock_guard lk(mu_);
    resource_version_ = got.resource_version;
    stats_.skipped_objects = got.skipped;
  }
  // A pod (or a field of one) that could not be read is kept unevictable on
  // what it concerns: the operator must be able to find out why.
  if (got.errors != last_list_problems_) {
    for (const auto& e : got.errors) spdlog::warn("pod metadata ({}): {}", describe(), e);
    last_list_problems_ = std::move(got.errors);
  }
  relist_after_gone_ = false;
  ++counters_.lists;
  publish(std::move(got.map), true);
  return {};
}

bool ApiServerPodSource::watch_line(std::string_view line, PodMetadataMap& map, bool& changed, bool& gone,
                                    std::string& parse_error) {
  auto ev = k8s::parse_bounded_json(line);
  if (!ev) {
    parse_error = "watch: " + ev.error().message + ": " + printable_excerpt(line, 200);
    return false;
  }
  auto type = k8s::string_member(*ev, "type");
  const json* obj = k8s::member(*ev, "object");
  if (!type || obj == nullptr || !obj->is_object()) {
    parse_error = "watch: not a watch event: " + printable_excerpt(line, 200);
    return false;
  }
  if (*type == "ERROR") {
    // A Status: 410 Gone (resourceVersion too old) means relist.
    if (k8s::int_member(*obj, "code") == 410) {
      gone = true;
    } else {
      parse_error = "watch: ERROR " + printable_excerpt(compact(*obj), 300);
    }
    return false;
  }
  std::string rv;
  if (const json* meta = k8s::member(*obj, "metadata"); meta != nullptr) {
    const json* v = k8s::member(*meta, "resourceVersion");
    if (!meta->is_object() || (v != nullptr && !v->is_string())) {
      parse_error = "watch: " + *type + " event with a malformed metadata.resourceVersion";
      return false;
    }
    if (v != nullptr) rv = v->get<std::string>();
  }
  if (*type == "BOOKMARK") {
    ++counters_.bookmarks;
  } else if (*type == "ADDED" || *type == "MODIFIED" || *type == "DELETED") {
    auto parsed = parse_pod_json(*obj, PodTrust::ApiServer, opts_.labels);
    if (!parsed) {
      parse_error = "watch: " + parsed.error().message;
      return false;
    }
    for (const auto& e : parsed->errors) {
      if (e == last_watch_problem_) continue;
      spdlog::warn("pod metadata ({}): watch: {}", describe(), e);
      last_watch_problem_ = e;
    }
    for (auto& p : parsed->pods) {
      if (*type == "DELETED") {
        map.erase(p.uid);
      } else {
        std::string uid = p.uid;
        map[uid] = std::move(p);
      }
    }
    ++counters_.events;
    changed = true;
  }
  if (!rv.empty()) {
    std::lock_guard lk(mu_);
    resource_version_ = rv;
  }
  return true;
}

ApiServerPodSource::WatchEnd ApiServerPodSource::watch() {
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(opts_.watch_timeout).count();
  std::string path = "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(secs) +
                     "&resourceVersion=" + url_encode(resource_version()) +
                     "&fieldSelector=" + url_encode("spec.nodeName=" + opts_.node_name);
  ++counters_.watches;
  const TimePoint started = now();
  PodMetadataMap map = *current();
  // Bytes of an unfinished line; `scanned` of them are known to hold no
  // newline, so each chunk is searched once, however long the line grows.
  std::string pending;
  std::size_t scanned = 0;
  bool received = false;
  bool gone = false;
  std::string parse_error;
  auto on_data = [&](std::string_view chunk) {
    if (stopping_) return false;
    if (chunk.empty()) return true;
    received = true;
    pending.append(chunk);
    bool changed = false;
    std::size_t begin = 0;
    bool ok = true;
    for (std::size_t nl; ok && (nl = pending.find('\n', scanned)) != std::string::npos; begin = scanned = nl + 1) {
      std::string_view line(pending.data() + begin, nl - begin);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) continue;
      if (line.size() > opts_.max_event_bytes) {
        parse_error = fmt::format("watch: an event over {} bytes", opts_.max_event_bytes);
        ok = false;
        break;
      }
      ok = watch_line(line, map, changed, gone, parse_error);
    }
    if (ok) {
      pending.erase(0, begin);
      scanned = pending.size();
      if (pending.size() > opts_.max_event_bytes) {
        parse_error = fmt::format("watch: an event over {} bytes", opts_.max_event_bytes);
        ok = false;
      }
    }
    if (changed) publish(map, false);
    return ok;
  };
  auto r = api_->watch(path, opts_.watch_timeout + opts_.stall_grace, on_data);
  if (stopping_) return WatchEnd::Stopped;
  if (gone) return WatchEnd::Gone;
  if (!parse_error.empty()) {
    failed(parse_error);
    return WatchEnd::Failed;
  }
  if (!r) {
    if (r.error().code == ETIMEDOUT) {
      // Still open past the server's own deadline: a stalled stream (or a
      // server that does not answer at all).
      ++counters_.stalls;
      failed("watch stalled: " + r.error().message);
      return WatchEnd::Stalled;
    }
    failed(r.error().message);
    return WatchEnd::Failed;
  }
  if (r->status == 410) return WatchEnd::Gone;
  if (r->status != 200) {
    failed(fmt::format("WATCH pods: HTTP {} {}", r->status, printable_excerpt(r->body, 300)));
    return WatchEnd::Failed;
  }
  if (!received && now() - started < opts_.short_watch) {
    ++counters_.short_watches;
    return WatchEnd::Short;
  }
  return WatchEnd::Expired;
}

void ApiServerPodSource::run() {
  bool need_list = resource_version().empty();
  while (!stopping_) {
    if (need_list) {
      if (!list()) {
        if (!pause()) return;
        continue;
      }
      need_list = false;
    }
    switch (watch()) {
      case WatchEnd::Stopped: return;
      case WatchEnd::Expired: break;  // the normal end: watch again from the RV
      case WatchEnd::Gone:
        ++counters_.relists_gone;
        spdlog::info("pod metadata ({}): resourceVersion {} expired (410), relisting", describe(), resource_version());
        gone_seen();
        need_list = true;
        if (!pause()) return;
        break;
      case WatchEnd::Short:
        spdlog::debug("pod metadata ({}): the watch ended at once, backing off", describe());
        if (!pause()) return;
        break;
      case WatchEnd::Stalled:
      case WatchEnd::Failed:
        if (!pause()) return;
        break;
    }
  }
}

}  // namespace pressured::pods
