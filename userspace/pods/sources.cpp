// Pod metadata sources: none, local file/directory, kubelet /pods (k8s/http_client),
// and the API server's list+watch (apiserver_source.cpp).
// Fetches run on the source's own thread (or an explicit refresh()); readers
// only copy a shared_ptr under a short lock.
#include <dirent.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/sha256.h>
#include <mbedtls/version.h>

#include <algorithm>
#include <array>
#include <optional>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/log.hpp"
#include "common/periodic_worker.hpp"
#include "k8s/api_client.hpp"
#include "k8s/http_client.hpp"
#include "kernel/file.hpp"
#include "pods/apiserver_source.hpp"
#include "pods/pod_json.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

pods::PodLabelUse label_use(const PodSourceConfig& c) {
  return c.keep_labels ? pods::PodLabelUse::Keep : pods::PodLabelUse::Drop;
}

/// What one fetch read: the documents of a file or directory, or the
/// kubelet's answer, each with where it came from (for errors).
struct PodDocument {
  std::string origin;
  std::string text;
  pods::DocumentFormat format = pods::DocumentFormat::Auto;
};

using InputDigest = std::array<unsigned char, 32>;

/// SHA-256 over every document's origin, format and bytes, each
/// length-prefixed: equal digests mean the same input. A cryptographic hash,
/// because a pod's author writes part of that input and must not be able to
/// make a changed list look unchanged.
InputDigest digest_of(const std::vector<PodDocument>& docs) {
  InputDigest out{};
  mbedtls_sha256_context ctx;
  mbedtls_sha256_init(&ctx);
#if MBEDTLS_VERSION_MAJOR >= 3
  (void)mbedtls_sha256_starts(&ctx, 0);
  auto update = [&](const void* p, std::size_t n) {
    (void)mbedtls_sha256_update(&ctx, static_cast<const unsigned char*>(p), n);
  };
#else
  (void)mbedtls_sha256_starts_ret(&ctx, 0);
  auto update = [&](const void* p, std::size_t n) {
    (void)mbedtls_sha256_update_ret(&ctx, static_cast<const unsigned char*>(p), n);
  };
#endif
  for (const auto& d : docs) {
    for (const std::string* part : {&d.origin, &d.text}) {
      const uint64_t n = part->size();
      update(&n, sizeof n);
      update(part->data(), part->size());
    }
    const auto f = static_cast<uint8_t>(d.format);
    update(&f, 1);
  }
#if MBEDTLS_VERSION_MAJOR >= 3
  (void)mbedtls_sha256_finish(&ctx, out.data());
#else
  (void)mbedtls_sha256_finish_ret(&ctx, out.data());
#endif
  mbedtls_sha256_free(&ctx);
  return out;
}

/// The shared part: the current map, stats and the refresh thread. A fetch
/// whose input is byte for byte the one the current map was parsed from is
/// not parsed again: at 1000 pods the parse is most of an idle daemon's pod
/// source cost, and a polled list is mostly unchanged.
class SourceBase : public PodMetadataSource {
 public:
  SourceBase(pods::PodTrust trust, pods::PodLabelUse labels, bool errors_name_origin)
      : map_(std::make_shared<const PodMetadataMap>()),
        trust_(trust),
        labels_(labels),
        errors_name_origin_(errors_name_origin) {}
  ~SourceBase() override { stop(); }

  Result<void> refresh() final {
    std::lock_guard<std::mutex> fetch_lock(fetch_mu_);  // one fetch at a time
    auto in = read_input();
    std::optional<InputDigest> digest;
    if (in) digest = digest_of(*in);
    // The input of the current map again: the map, its stats and its logged
    // problems stand; the fetch is a success all the same.
    const bool unchanged = digest && digest == parsed_digest_;
    auto r = !in       ? Result<pods::ParsedPods>(in.error())
             : unchanged ? Result<pods::ParsedPods>(pods::ParsedPods{})
                         : parse(*in);
    std::lock_guard<std::mutex> lock(mu_);
    if (!r) {
      ++stats_.refresh_failures;
      if (stats_.last_error != r.error().message) {
        if (!stats_.last_success) {
          // Nothing delivered yet: no pod has metadata, none is evicted, /readyz fails.
          spdlog::error("pod metadata ({}): no pod list yet: {}; pods without metadata are not evicted and /readyz "
                        "fails until a fetch succeeds",
                        describe(), r.error().message);
        } else {
          spdlog::warn("pod metadata ({}): {}; keeping the previous {} pods", describe(), r.error().message,
                       stats_.pods);
        }
      }
      stats_.last_error = r.error().message;
      return r.error();
    }
    std::shared_ptr<PodMetadataMap> map;
    if (unchanged) {
      ++stats_.unchanged_refreshes;
    } else {
      map = std::make_shared<PodMetadataMap>();
      for (auto& p : r->pods) {
        std::string uid = p.uid;
        (*map)[uid] = std::move(p);
      }
      stats_.pods = map->size();
      stats_.skipped_objects = r->skipped;
    }
    ++stats_.refreshes;
    stats_.last_success = now();
    if (!stats_.last_error.empty()) spdlog::info("pod metadata ({}): recovered, {} pods", describe(), stats_.pods);
    stats_.last_error.clear();
    if (map) {
      // Fields of single pods that could not be read (a quantity, a label):
      // said once, not at every refresh.
      if (r->errors != last_problems_) {
        for (const auto& e : r->errors) spdlog::warn("pod metadata ({}): {}", describe(), e);
        last_problems_ = std::move(r->errors);
      }
      map_ = std::move(map);
      parsed_digest_ = digest;
    }
    return {};
  }

  std::shared_ptr<const PodMetadataMap> current() const final {
    std::lock_guard<std::mutex> lock(mu_);
    return map_;
  }

  // Requests coalesce: at most one fetch per second for bursts of pod starts.
  void start(Duration interval) final {
    worker_.start(interval, [this] { (void)refresh(); }, std::chrono::seconds(1));
  }

  void stop() final { worker_.stop(); }

  void request_refresh() final { worker_.request(); }

  PodMetadataStats stats() const final {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 protected:
  /// Reads the source's documents (files, the kubelet's answer); parsed by
  /// the base unless they are the input of the current map.
  virtual Result<std::vector<PodDocument>> read_input() = 0;

 private:
  static TimePoint now() {
    return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch()));
  }

  Result<pods::ParsedPods> parse(const std::vector<PodDocument>& docs) const {
    pods::ParsedPods all;
    for (const auto& d : docs) {
      auto parsed = pods::parse_pod_documents(d.text, d.format, trust_, labels_);
      if (!parsed) return Error{parsed.error().code, d.origin + ": " + parsed.error().message};
      all.skipped += parsed->skipped;
      for (auto& p : parsed->pods) all.pods.push_back(std::move(p));
      for (auto& e : parsed->errors) {
        if (all.errors.size() < 10) all.errors.push_back(errors_name_origin_ ? d.origin + ": " + e : std::move(e));
      }
    }
    return all;
  }

  mutable std::mutex mu_;
  std::shared_ptr<const PodMetadataMap> map_;
  PodMetadataStats stats_;
  std::vector<std::string> last_problems_;  // the errors of the last fetch, as logged
  const pods::PodTrust trust_;
  const pods::PodLabelUse labels_;
  const bool errors_name_origin_;          // a pod's field errors begin with its document's origin
  std::optional<InputDigest> parsed_digest_;  // the input map_ was parsed from (fetch_mu_)
  std::mutex fetch_mu_;
  PeriodicWorker worker_;  // last member: stopped (joined) before the rest is destroyed
};

class NoneSource final : public SourceBase {
 public:
  NoneSource() : SourceBase(pods::PodTrust::File, pods::PodLabelUse::Drop, false) {}
  ~NoneSource() override { stop(); }
  std::string describe() const override { return "none"; }

 protected:
  Result<std::vector<PodDocument>> read_input() override { return std::vector<PodDocument>{}; }
};

class FileSource final : public SourceBase {
 public:
  FileSource(std::string path, pods::PodLabelUse labels)
      : SourceBase(pods::PodTrust::File, labels, true), path_(std::move(path)) {}
  ~FileSource() override { stop(); }
  std::string describe() const override { return "file:" + path_; }

 protected:
  Result<std::vector<PodDocument>> read_input() override {
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) return Error::from_errno(errno, "pod metadata " + path_);
    std::vector<std::string> files;
    if (S_ISDIR(st.st_mode)) {
      DIR* d = ::opendir(path_.c_str());
      if (d == nullptr) return Error::from_errno(errno, "open directory " + path_);
      while (struct dirent* e = ::readdir(d)) {
        std::string n = e->d_name;
        if (n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml")) files.push_back(path_ + "/" + n);
      }
      ::closedir(d);
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(path_);
    }
    std::vector<PodDocument> docs;
    docs.reserve(files.size());
    for (auto& f : files) {
      auto text = kernel::read_file(f);
      if (!text) return text.error();
      auto fmt = f.ends_with(".json") ? pods::DocumentFormat::Json
                 : (f.ends_with(".yaml") || f.ends_with(".yml")) ? pods::DocumentFormat::Yaml
                                                                   : pods::DocumentFormat::Auto;
      docs.push_back(PodDocument{std::move(f), std::move(*text), fmt});
    }
    return docs;
  }

 private:
  std::string path_;
};

class KubeletSource final : public SourceBase {
 public:
  explicit KubeletSource(PodSourceConfig c)
      : SourceBase(pods::PodTrust::Kubelet, label_use(c), false), cfg_(std::move(c)) {}
  ~KubeletSource() override { stop(); }
  std::string describe() const override { return "kubelet:" + cfg_.kubelet_url; }

 protected:
  Result<std::vector<PodDocument>> read_input() override {
    std::string token;
    if (!cfg_.token_file.empty() && cfg_.kubelet_url.starts_with("https://")) {
      auto t = kernel::read_file(cfg_.token_file);  // re-read: projected tokens rotate
      if (!t) return Error{t.error().code, "kubelet token: " + t.error().message};
      token = *t;
      while (!token.empty() && (token.back() == '\n' || token.back() == ' ')) token.pop_back();
    }
    k8s::HttpRequest req;
    req.url = cfg_.kubelet_url;
    req.headers = {"Accept: application/json"};
    if (!token.empty()) req.headers.push_back("Authorization: Bearer " + token);
    req.connect_timeout = cfg_.timeout;
    req.total_timeout = cfg_.timeout;
    req.tls.ca_file = cfg_.ca_file;
    req.tls.insecure_skip_verify = cfg_.insecure_skip_verify;
    req.max_body_bytes = 256u << 20;  // a node's pod list, with room; never an unbounded read
    req.accept_encoding = true;
    auto resp = k8s::http_request(req);
    if (!resp) return resp.error();
    if (resp->status != 200) {
      return Error{EIO, "GET " + cfg_.kubelet_url + ": HTTP " + std::to_string(resp->status) + " " +
                            printable_excerpt(resp->body)};
    }
    std::vector<PodDocument> docs;
    docs.push_back(PodDocument{cfg_.kubelet_url, std::move(resp->body), pods::DocumentFormat::Json});
    return docs;
  }

 private:
  PodSourceConfig cfg_;
};

}  // namespace

Result<std::unique_ptr<PodMetadataSource>> make_pod_metadata_source(const PodSourceConfig& config) {
  switch (config.kind) {
    case PodSourceKind::None: return std::unique_ptr<PodMetadataSource>(std::make_unique<NoneSource>());
    case PodSourceKind::File:
      if (config.path.empty()) return Error{EINVAL, "pod source 'file' needs a path (pods.path / --pod-file)"};
      return std::unique_ptr<PodMetadataSource>(std::make_unique<FileSource>(config.path, label_use(config)));
    case PodSourceKind::Kubelet: {
      if (config.kubelet_url.empty()) return Error{EINVAL, "pod source 'kubelet' needs a URL"};
      if (!config.kubelet_url.starts_with("https://") && !config.kubelet_url.starts_with("http://")) {
        return Error{EINVAL, "kubelet URL must start with https:// or http://: " + config.kubelet_url};
      }
      if (config.kubelet_url.starts_with("https://") && !config.token_file.empty() &&
          ::access(config.token_file.c_str(), R_OK) != 0) {
        return Error::from_errno(errno, "kubelet token file " + config.token_file);
      }
      if (!config.ca_file.empty() && ::access(config.ca_file.c_str(), R_OK) != 0) {
        return Error::from_errno(errno, "kubelet CA file " + config.ca_file);
      }
      if (config.timeout <= Duration::zero()) return Error{EINVAL, "kubelet timeout must be positive"};
      return std::unique_ptr<PodMetadataSource>(std::make_unique<KubeletSource>(config));
    }
    case PodSourceKind::ApiServer: {
      auto api = config.kubeconfig.empty() ? k8s::in_cluster_config() : k8s::load_kubeconfig(config.kubeconfig);
      if (!api) return Error{api.error().code, "pod source 'apiserver': " + api.error().message};
      pods::ApiServerSourceOptions o;
      o.server = *api;
      o.node_name = config.node_name;
      if (o.node_name.empty()) {
        char host[256] = {0};
        if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
          return Error{EINVAL, "pod source 'apiserver' needs the node name (kubernetes.nodeName / --node-name)"};
        }
        o.node_name = host;
      }
      o.request_timeout = std::max(config.timeout, Duration(std::chrono::seconds(5)));
      o.watch_timeout = config.watch_timeout;
      o.labels = label_use(config);
      return std::unique_ptr<PodMetadataSource>(std::make_unique<pods::ApiServerPodSource>(o));
    }
  }
  return Error{EINVAL, "unknown pod source kind"};
}

}  // namespace pressured
