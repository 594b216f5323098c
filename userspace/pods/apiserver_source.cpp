#include "pods/apiserver_source.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "common/log.hpp"
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

TimePoint steady_now() {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch()));
}

}  // namespace

ApiServerPodSource::ApiServerPodSource(ApiServerSourceOptions options)
    : opts_(std::move(options)), map_(std::make_shared<const PodMetadataMap>()) {}

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

bool ApiServerPodSource::sleep_interruptible(Duration d) {
  std::unique_lock lk(mu_);
  return !cv_.wait_for(lk, d, [this] { return stopping_.load(); });
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

void ApiServerPodSource::failed(const std::string& what) {
  ++counters_.errors;
  std::lock_guard lk(mu_);
  ++stats_.refresh_failures;
  if (stats_.last_error != what) {
    spdlog::warn("pod metadata ({}): {}; keeping the previous {} pods", describe(), what, stats_.pods);
  }
  stats_.last_error = what;
}

Result<void> ApiServerPodSource::list() {
  std::lock_guard fetch(list_mu_);
  k8s::ApiClient client(opts_.server, opts_.request_timeout);
  // resourceVersion=0: served from the API server's watch cache, as the
  // kubelet's own informer does; a quorum read of every pod in the cluster
  // per node would not scale.
  std::string path = "/api/v1/pods?resourceVersion=0&fieldSelector=" + url_encode("spec.nodeName=" + opts_.node_name);
  auto r = client.request("GET", path);
  std::string err;
  if (!r) {
    err = r.error().message;
  } else if (r->status != 200) {
    err = "LIST pods: HTTP " + std::to_string(r->status) + " " + printable_excerpt(r->body, 300);
  } else {
    json doc = json::parse(r->body, nullptr, false);
    auto parsed = parse_pod_documents(r->body, DocumentFormat::Json);
    if (doc.is_discarded() || !parsed) {
      err = "LIST pods: " + (parsed ? std::string("not JSON") : parsed.error().message);
    } else {
      PodMetadataMap map;
      for (auto& p : parsed->pods) {
        std::string uid = p.uid;
        map[uid] = std::move(p);
      }
      {
        std::lock_guard lk(mu_);
        resource_version_ = doc["metadata"].value("resourceVersion", "");
        stats_.skipped_objects = parsed->skipped;
      }
      ++counters_.lists;
      publish(std::move(map), true);
      return {};
    }
  }
  failed(err);
  return Error{EIO, err};
}

ApiServerPodSource::WatchEnd ApiServerPodSource::watch() {
  k8s::ApiClient client(opts_.server, opts_.request_timeout);
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(opts_.watch_timeout).count();
  std::string path = "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(secs) +
                     "&resourceVersion=" + url_encode(resource_version()) +
                     "&fieldSelector=" + url_encode("spec.nodeName=" + opts_.node_name);
  ++counters_.watches;
  PodMetadataMap map = *current();
  std::string line_buf;
  bool gone = false;
  std::string parse_error;
  auto on_data = [&](std::string_view chunk) {
    if (stopping_) return false;
    line_buf.append(chunk);
    bool changed = false;
    std::size_t nl;
    while ((nl = line_buf.find('\n')) != std::string::npos) {
      std::string line = line_buf.substr(0, nl);
      line_buf.erase(0, nl + 1);
      if (line.empty()) continue;
      json ev = json::parse(line, nullptr, false);
      if (ev.is_discarded() || !ev.contains("type") || !ev.contains("object")) {
        parse_error = "watch: not a watch event: " + line.substr(0, 200);
        return false;
      }
      std::string type = ev["type"].get<std::string>();
      const json& obj = ev["object"];
      if (type == "ERROR") {
        // A Status: 410 Gone (resourceVersion too old) means relist.
        if (obj.value("code", 0) == 410) {
          gone = true;
        } else {
          parse_error = "watch: ERROR " + obj.dump().substr(0, 300);
        }
        return false;
      }
      std::string rv = obj.contains("metadata") ? obj["metadata"].value("resourceVersion", "") : "";
      if (type == "BOOKMARK") {
        ++counters_.bookmarks;
      } else if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") {
        auto parsed = parse_pod_documents(obj.dump(), DocumentFormat::Json);
        if (!parsed) {
          parse_error = "watch: " + parsed.error().message;
          return false;
        }
        for (auto& p : parsed->pods) {
          if (type == "DELETED") {
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
    }
    if (changed) publish(map, false);
    return true;
  };
  auto r = client.stream(path, opts_.watch_timeout + opts_.stall_grace, on_data);
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
    failed("WATCH pods: HTTP " + std::to_string(r->status) + " " + printable_excerpt(r->body, 300));
    return WatchEnd::Failed;
  }
  return WatchEnd::Expired;
}

void ApiServerPodSource::run() {
  Duration backoff = opts_.initial_backoff;
  bool need_list = resource_version().empty();
  while (!stopping_) {
    if (need_list) {
      if (!list()) {
        if (!sleep_interruptible(backoff)) return;
        backoff = std::min(backoff * 2, opts_.max_backoff);
        continue;
      }
      need_list = false;
      backoff = opts_.initial_backoff;
    }
    auto before = counters_.events + counters_.bookmarks;
    switch (watch()) {
      case WatchEnd::Stopped: return;
      case WatchEnd::Expired: backoff = opts_.initial_backoff; break;  // the normal end: watch again from the RV
      case WatchEnd::Gone:
        ++counters_.relists_gone;
        spdlog::info("pod metadata ({}): resourceVersion {} expired (410), relisting", describe(), resource_version());
        need_list = true;
        break;
      case WatchEnd::Stalled:
      case WatchEnd::Failed:
        // Progress before the failure resets the backoff; a server that is
        // down is retried at most every max_backoff.
        if (counters_.events + counters_.bookmarks != before) backoff = opts_.initial_backoff;
        if (!sleep_interruptible(backoff)) return;
        backoff = std::min(backoff * 2, opts_.max_backoff);
        break;
    }
  }
}

}  // namespace pressured::pods
