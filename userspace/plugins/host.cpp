#include "plugins/host.hpp"

#include <dlfcn.h>
#include <limits.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/module_path.hpp"

namespace pressured::plugins {

struct PluginHost::Entry {
  std::string socket;  // full path
  std::unique_ptr<PluginClient> client;
  std::optional<Identity> identity;  // set while registered
  std::string last_name;             // the name it last registered with (counts, logs)
  uint64_t failures = 0;             // consecutive
  Duration backoff{};
  TimePoint retry_at{};  // registration or the next call, whichever it waits for
  bool refused_logged = false;
};

namespace {

TimePoint clock_now() { return MonotonicClock().now(); }

// A plugin's name: [a-z0-9.-], 1 to 63 characters (a metric label, a word in the "why").
bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'; });
}

std::string_view error_kind(CallError k) {
  switch (k) {
    case CallError::Timeout: return "deadline exceeded";
    case CallError::Unavailable: return "unreachable";
    case CallError::Garbage: return "invalid answer";
    case CallError::Other: return "error";
  }
  return "error";
}

}  // namespace

PluginHost::PluginHost(HostOptions options, std::unique_ptr<PluginConnector> connector)
    : options_(std::move(options)), connector_(std::move(connector)) {}

PluginHost::~PluginHost() { stop(); }

Result<void> PluginHost::start() {
  const std::string& dir = options_.directory;
  if (dir.empty() || dir.front() != '/') return Error{EINVAL, "plugins.directory '" + dir + "' is not an absolute path"};
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Error::from_errno(errno, "plugins.directory " + dir);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(dir).parent_path(), ec);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Error::from_errno(errno, "create " + dir);
    if (::lstat(dir.c_str(), &st) != 0) return Error::from_errno(errno, "plugins.directory " + dir);
    spdlog::info("plugins: created the plugin directory {} (0700)", dir);
  }
  if (!S_ISDIR(st.st_mode)) return Error{ENOTDIR, "plugins.directory " + dir + " is not a directory"};
  if (st.st_uid != ::geteuid()) {
    return Error{EPERM, "plugins.directory " + dir + " belongs to uid " + std::to_string(st.st_uid) +
                            ", not to pressured's (" + std::to_string(::geteuid()) +
                            "): whoever can create a socket there can advise evictions"};
  }
  if ((st.st_mode & 022) != 0) {
    // An emptyDir shared with a sidecar comes 0777: pressured owns it, so it
    // closes it rather than refuse the DaemonSet's own layout.
    if (::chmod(dir.c_str(), st.st_mode & 07755 & ~022) != 0) {
      return Error::from_errno(errno, "plugins.directory " + dir + " is writable by others and chmod failed");
    }
    spdlog::warn("plugins: {} was writable by group or others (mode {:o}); made it writable by its owner only", dir,
                 st.st_mode & 07777);
  }
  inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_) return Error::from_errno(errno, "inotify_init1");
  if (::inotify_add_watch(inotify_.get(), dir.c_str(),
                          IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_ATTRIB | IN_DELETE_SELF |
                              IN_MOVE_SELF | IN_ONLYDIR) < 0) {
    return Error::from_errno(errno, "inotify_add_watch " + dir);
  }
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_) return Error::from_errno(errno, "eventfd");
  scan_directory();
  worker_ = std::thread([this] { run(); });
  spdlog::info("plugins: watching {} (call deadline {} ms, answers kept {} s)", dir,
               std::chrono::duration_cast<std::chrono::milliseconds>(options_.call_timeout).count(),
               std::chrono::duration_cast<std::chrono::seconds>(options_.answer_max_age).count());
  return {};
}

void PluginHost::stop() {
  if (!worker_.joinable()) return;
  stopping_ = true;
  wake();
  worker_.join();
}

void PluginHost::wake() {
  if (!wake_fd_) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
}

void PluginHost::ask(std::vector<LaneQuestion> questions) {
  {
    std::lock_guard lk(mu_);
    pending_ = std::move(questions);
  }
  wake();
}

std::vector<Answers> PluginHost::answers() const {
  const TimePoint now = clock_now();
  std::vector<Answers> out;
  std::lock_guard lk(mu_);
  out.reserve(answers_.size());
  for (const auto& [name, a] : answers_) {
    if (now - a.at <= options_.answer_max_age) out.push_back(a);
  }
  return out;
}

std::map<std::string, PluginCounts> PluginHost::counts() const {
  std::lock_guard lk(mu_);
  return counts_;
}

std::vector<PluginStatus> PluginHost::status() const {
  std::lock_guard lk(mu_);
  return status_;
}

void PluginHost::scan_directory() {
  std::error_code ec;
  for (const auto& de : std::filesystem::directory_iterator(options_.directory, ec)) {
    socket_appeared(de.path().filename().string());
  }
}

void PluginHost::socket_appeared(const std::string& name) {
  const std::string path = options_.directory + "/" + name;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return;  // not a socket: not a plugin
  auto [it, inserted] = entries_.try_emplace(path);
  if (inserted) {
    it->second = std::make_unique<Entry>();
    it->second->socket = path;
  }
  // New or re-created: a fresh connection, registration at once.
  Entry& e = *it->second;
  if (e.identity) {
    spdlog::info("plugins: plugin {} re-created its socket {}: registering it again", e.identity->name, path);
    std::lock_guard lk(mu_);
    answers_.erase(e.identity->name);
  }
  e.client.reset();
  e.identity.reset();
  e.failures = 0;
  e.backoff = {};
  e.retry_at = {};
}

void PluginHost::socket_gone(const std::string& name) {
  auto it = entries_.find(options_.directory + "/" + name);
  if (it == entries_.end()) return;
  if (it->second->identity) {
    spdlog::info("plugins: plugin {} unregistered (socket {} removed)", it->second->identity->name, it->first);
    std::lock_guard lk(mu_);
    answers_.erase(it->second->identity->name);
  }
  entries_.erase(it);
}

void PluginHost::drain_inotify() {
  alignas(struct inotify_event) char buf[4096];
  for (;;) {
    const ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    if (n <= 0) return;  // EAGAIN: drained
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
        spdlog::error("plugins: the plugin directory {} was removed or moved: no plugin is asked until a restart",
                      options_.directory);
        for (auto& [path, e] : entries_) {
          if (e->identity) {
            std::lock_guard lk(mu_);
            answers_.erase(e->identity->name);
          }
        }
        entries_.clear();
        continue;
      }
      if (ev->len == 0) continue;
      const std::string name(ev->name);
      if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) socket_gone(name);
      if (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_ATTRIB)) {
        // IN_ATTRIB (a chmod) of a socket already known changes nothing.
        if ((ev->mask & IN_ATTRIB) && entries_.contains(options_.directory + "/" + name)) continue;
        socket_appeared(name);
      }
    }
  }
}

void PluginHost::failed(Entry& e, const PluginClient::Failure& f, std::string_view call, TimePoint now) {
  const std::string who = e.identity ? e.identity->name : e.socket;
  {
    std::lock_guard lk(mu_);
    if (!e.last_name.empty()) {
      PluginCounts& c = counts_[e.last_name];
      (f.kind == CallError::Timeout ? c.timeouts : c.errors) += 1;
    }
    if (e.identity) answers_.erase(e.identity->name);  // skipped: no stale advice
  }
  ++e.failures;
  e.backoff = e.backoff == Duration{} ? options_.backoff_initial : std::min(e.backoff * 2, options_.backoff_max);
  e.retry_at = now + e.backoff;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(e.backoff).count();
  // Unreachable, or three failures in a row: dropped until it answers Identify again.
  if (e.identity && (f.kind == CallError::Unavailable || e.failures >= 3)) {
    spdlog::warn("plugins: plugin {} dropped after {} failed call(s) ({} {}: {}); asking it again in {} ms", who,
                 e.failures, call, error_kind(f.kind), f.message, ms);
    e.identity.reset();
    e.client.reset();
    return;
  }
  if (e.failures == 1 || (e.failures & (e.failures - 1)) == 0) {  // 1, 2, 4, 8...: the log is not flooded
    spdlog::warn("plugins: {} {}: {} ({}); skipped, next try in {} ms", who, call, error_kind(f.kind), f.message, ms);
  }
}

void PluginHost::try_register(Entry& e, TimePoint now) {
  struct stat st {};
  if (::lstat(e.socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return;
  if (st.st_uid != ::geteuid()) {
    if (!e.refused_logged) {
      spdlog::warn("plugins: socket {} belongs to uid {}, not pressured's: ignored", e.socket, st.st_uid);
      e.refused_logged = true;
    }
    e.retry_at = now + options_.backoff_max;
    return;
  }
  std::size_t registered = 0;
  for (const auto& [p, other] : entries_) registered += other->identity ? 1 : 0;
  if (registered >= options_.max_plugins) {
    if (!e.refused_logged) {
      spdlog::warn("plugins: {} plugins registered already (plugins.maxPlugins): socket {} ignored",
                   options_.max_plugins, e.socket);
      e.refused_logged = true;
    }
    e.retry_at = now + options_.backoff_max;
    return;
  }
  if (!e.client) e.client = connector_->connect(e.socket, options_.limits);
  if (!e.client) {
    failed(e, {CallError::Other, "cannot open a channel"}, "connect", now);
    return;
  }
  auto id = e.client->identify(options_.call_timeout);
  if (const auto* f = std::get_if<PluginClient::Failure>(&id)) {
    failed(e, *f, "Identify", now);
    e.client.reset();  // a fresh channel next time
    return;
  }
  Identity ident = std::get<Identity>(std::move(id));
  std::string why_not;
  if (!valid_name(ident.name)) {
    why_not = "its name '" + ident.name.substr(0, 64) + "' is not 1 to 63 of [a-z0-9.-]";
  } else {
    for (const auto& [p, other] : entries_) {
      if (other.get() != &e && other->identity && other->identity->name == ident.name) {
        why_not = "plugin " + ident.name + " is registered already at " + p;
      }
    }
  }
  if (!why_not.empty()) {
    failed(e, {CallError::Garbage, why_not}, "Identify", now);
    e.client.reset();
    return;
  }
  e.identity = ident;
  e.last_name = ident.name;
  e.failures = 0;
  e.backoff = {};
  e.retry_at = {};
  e.refused_logged = false;
  ++registrations_;
  {
    std::lock_guard lk(mu_);
    ++counts_[ident.name].registrations;
  }
  spdlog::info("plugins: plugin {} {} registered at {} (answers:{}{}{})", ident.name,
               ident.version.empty() ? "(no version)" : ident.version, e.socket, ident.thresholds ? " thresholds" : "",
               ident.rank ? " rank" : "", ident.propose ? " propose" : "");
}

void PluginHost::ask_one(Entry& e, const std::vector<LaneQuestion>& questions, TimePoint now) {
  const Identity& id = *e.identity;
  Answers a;
  a.plugin = id.name;
  auto count = [&](std::size_t dropped) {
    std::lock_guard lk(mu_);
    PluginCounts& c = counts_[id.name];
    ++c.calls;
    c.dropped_entries += dropped;
  };
  if (id.thresholds) {
    auto r = e.client->thresholds(options_.call_timeout);
    count(e.client->take_dropped());
    if (const auto* f = std::get_if<PluginClient::Failure>(&r)) return failed(e, *f, "GetThresholds", now);
    a.thresholds = std::get<0>(std::move(r));
  }
  for (const LaneQuestion& q : questions) {
    const auto lane = static_cast<std::size_t>(q.lane);
    if (id.rank && !q.candidates.empty()) {
      auto r = e.client->rank(q, options_.call_timeout);
      count(e.client->take_dropped());
      if (const auto* f = std::get_if<PluginClient::Failure>(&r)) return failed(e, *f, "RankCandidates", now);
      a.adjustments[lane] = std::get<0>(std::move(r));
    }
    // Proposals count only under a soft threshold, never a hard one: not asked otherwise.
    if (id.propose && q.soft && !q.hard && !q.candidates.empty()) {
      auto r = e.client->propose(q, options_.call_timeout);
      count(e.client->take_dropped());
      if (const auto* f = std::get_if<PluginClient::Failure>(&r)) return failed(e, *f, "ProposeEvictions", now);
      a.proposals[lane] = std::get<0>(std::move(r));
    }
  }
  e.failures = 0;
  e.backoff = {};
  a.at = clock_now();
  std::lock_guard lk(mu_);
  answers_[id.name] = std::move(a);
}

std::optional<TimePoint> PluginHost::next_retry() const {
  std::optional<TimePoint> next;
  for (const auto& [p, e] : entries_) {
    if (e->identity) continue;
    if (!next || e->retry_at < *next) next = e->retry_at;
  }
  return next;
}

void PluginHost::run() {
  while (!stopping_) {
    int timeout_ms = 1000;
    if (auto r = next_retry()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*r - clock_now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 1000));
    }
    struct pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) {
      spdlog::error("plugins: poll failed ({}): the plugin host stops", std::strerror(errno));
      return;
    }
    if (stopping_) return;
    if (fds[1].revents & POLLIN) {
      uint64_t v = 0;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &v, sizeof v);
    }
    if (fds[0].revents & POLLIN) drain_inotify();
    TimePoint now = clock_now();
    for (auto& [p, e] : entries_) {
      if (!e->identity && e->retry_at <= now) try_register(*e, now);
    }
    std::optional<std::vector<LaneQuestion>> questions;
    {
      std::lock_guard lk(mu_);
      questions.swap(pending_);
    }
    if (questions) {
      now = clock_now();
      for (auto& [p, e] : entries_) {
        if (stopping_) return;
        if (!e->identity) continue;
        if (e->retry_at > now) {  // backed off: skipped, no answers meanwhile
          std::lock_guard lk(mu_);
          answers_.erase(e->identity->name);
          continue;
        }
        ask_one(*e, *questions, now);
      }
      ++rounds_;
    }
    std::vector<PluginStatus> st;
    st.reserve(entries_.size());
    for (const auto& [p, e] : entries_) {
      st.push_back(PluginStatus{p, e->identity ? e->identity->name : e->last_name, e->identity.has_value(), e->failures});
    }
    std::lock_guard lk(mu_);
    status_ = std::move(st);
  }
}

Result<std::unique_ptr<PluginConnector>> load_grpc_connector(const std::string& path) {
#ifdef PRESSURED_PLUGIN_MODULE_BUILD
  const char* build_path = PRESSURED_PLUGIN_MODULE_BUILD;
#else
  const char* build_path = nullptr;
#endif
  const std::vector<std::string> tries =
      path.empty() ? module_search_paths("libpressured_plugin_grpc.so", build_path) : std::vector<std::string>{path};
  std::string why;
  for (const std::string& t : tries) {
    if (!path.empty() || std::filesystem::exists(t)) {
      // Loaded once for the process's life: gRPC's threads must not outlive their code.
      // initramfs: not carried (an optional module; no VM test configures plugins)
      void* h = ::dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
      if (h == nullptr) {
        const char* err = ::dlerror();
        why += "; " + t + ": " + (err ? err : "dlopen failed");
        continue;
      }
      using Factory = PluginConnector* (*)();
      auto* make = reinterpret_cast<Factory>(::dlsym(h, "pressured_plugin_connector_v1alpha1"));
      if (make == nullptr) {
        why += "; " + t + ": no pressured_plugin_connector_v1alpha1";
        continue;
      }
      spdlog::info("plugins: gRPC transport loaded from {}", t);
      return std::unique_ptr<PluginConnector>(make());
    }
    why += "; " + t + ": absent";
  }
  return Error{ENOENT, "cannot load the plugins' gRPC transport (libpressured_plugin_grpc.so)" +
                           (why.empty() ? std::string(": nowhere to look") : why)};
}

}  // namespace pressured::plugins
