#include "daemon/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace pressured {

namespace {

using json = nlohmann::json;
constexpr int kVersion = 1;
constexpr std::size_t kMaxBytes = 4 * 1024 * 1024;

int64_t ns(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint tp(int64_t v) { return TimePoint(Duration(v)); }

json encode_pod(const EvictingPod& p) {
  return json{{"id", p.id},
              {"uid", p.uid},
              {"name", p.name},
              {"namespace", p.namespace_},
              {"cgroup_path", p.cgroup_path},
              {"signal", std::string(name(p.signal))},
              {"kind", p.kind == ThresholdKind::Hard ? "hard" : "soft"},
              {"observed", p.observed},
              {"threshold", p.threshold_value},
              {"grace_period_seconds", p.grace_period_seconds},
              {"decided_at_ns", ns(p.decided_at)},
              {"kill_deadline_ns", ns(p.kill_deadline)}};
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& cp) {
  json first = json::object(), met = json::object();
  for (const auto& [i, t] : cp.engine.threshold_first_observed) first[std::to_string(i)] = ns(t);
  for (const auto& [i, m] : cp.engine.threshold_met) met[std::to_string(i)] = m;
  json conds = json::array(), last = json::array();
  for (std::size_t i = 0; i < kConditionCount; ++i) {
    conds.push_back(cp.engine.conditions[i]);
    last.push_back(cp.engine.condition_last_met[i] ? json(ns(*cp.engine.condition_last_met[i])) : json(nullptr));
  }
  json pods = json::array();
  for (const auto& p : cp.evicting) pods.push_back(encode_pod(p));
  json j{{"version", kVersion},
         {"boot_id", cp.boot_id},
         {"engine",
          {{"threshold_first_observed_ns", first},
           {"threshold_met", met},
           {"conditions", conds},
           {"condition_last_met_ns", last},
           {"terminating_pods", cp.engine.terminating_pods}}},
         {"evicting", pods}};
  return j.dump(1) + "\n";
}

Result<Checkpoint> decode_checkpoint(const std::string& text) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) return Error{EINVAL, "checkpoint is not a JSON object"};
    if (j.at("version").get<int>() != kVersion) {
      return Error{EINVAL, "checkpoint version " + j.at("version").dump() + " is not " + std::to_string(kVersion)};
    }
    Checkpoint cp;
    cp.boot_id = j.at("boot_id").get<std::string>();
    const json& e = j.at("engine");
    for (const auto& [k, v] : e.at("threshold_first_observed_ns").items()) {
      cp.engine.threshold_first_observed[std::stoul(k)] = tp(v.get<int64_t>());
    }
    for (const auto& [k, v] : e.at("threshold_met").items()) cp.engine.threshold_met[std::stoul(k)] = v.get<bool>();
    const json& conds = e.at("conditions");
    const json& last = e.at("condition_last_met_ns");
    if (!conds.is_array() || conds.size() != kConditionCount || !last.is_array() || last.size() != kConditionCount) {
      return Error{EINVAL, "checkpoint conditions must be arrays of " + std::to_string(kConditionCount)};
    }
    for (std::size_t i = 0; i < kConditionCount; ++i) {
      cp.engine.conditions[i] = conds[i].get<bool>();
      if (!last[i].is_null()) cp.engine.condition_last_met[i] = tp(last[i].get<int64_t>());
    }
    cp.engine.terminating_pods = e.at("terminating_pods").get<std::vector<std::string>>();
    for (const auto& p : j.at("evicting")) {
      EvictingPod ep;
      ep.id = p.at("id").get<std::string>();
      ep.uid = p.at("uid").get<std::string>();
      ep.name = p.at("name").get<std::string>();
      ep.namespace_ = p.at("namespace").get<std::string>();
      ep.cgroup_path = p.at("cgroup_path").get<std::string>();
      auto sig = parse_signal(p.at("signal").get<std::string>());
      if (!sig) return Error{EINVAL, "checkpoint names unknown signal " + p.at("signal").dump()};
      ep.signal = *sig;
      std::string kind = p.at("kind").get<std::string>();
      if (kind != "hard" && kind != "soft") return Error{EINVAL, "checkpoint threshold kind '" + kind + "'"};
      ep.kind = kind == "hard" ? ThresholdKind::Hard : ThresholdKind::Soft;
      ep.observed = p.at("observed").get<double>();
      ep.threshold_value = p.at("threshold").get<double>();
      ep.grace_period_seconds = p.at("grace_period_seconds").get<int64_t>();
      ep.decided_at = tp(p.at("decided_at_ns").get<int64_t>());
      ep.kill_deadline = tp(p.at("kill_deadline_ns").get<int64_t>());
      cp.evicting.push_back(std::move(ep));
    }
    return cp;
  } catch (const std::exception& ex) {
    return Error{EINVAL, std::string("malformed checkpoint: ") + ex.what()};
  }
}

Result<void> write_file_atomically(const std::string& path, const std::string& contents) {
  std::filesystem::path p(path);
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Error::from_errno(errno, "open " + tmp);
  std::size_t off = 0;
  while (off < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + off, contents.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Error::from_errno(err, "write " + tmp);
    }
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Error::from_errno(err, "fsync " + tmp);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Error::from_errno(err, "rename " + tmp);
  }
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

std::string read_boot_id(const std::string& proc_root) {
  std::ifstream in(proc_root + "/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

LoadedCheckpoint load_checkpoint(const std::string& path, const std::string& boot_id) {
  LoadedCheckpoint out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    out.status = CheckpointLoad::Corrupt;
    out.error = Error::from_errno(errno, "open " + path).message;
    return out;
  }
  std::string text;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) {
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxBytes) break;
  }
  ::close(fd);
  if (text.size() > kMaxBytes) {
    out.status = CheckpointLoad::Corrupt;
    out.error = "checkpoint " + path + " is larger than 4 MiB";
    return out;
  }
  auto cp = decode_checkpoint(text);
  if (!cp) {
    out.status = CheckpointLoad::Corrupt;
    out.error = path + ": " + cp.error().message;
    return out;
  }
  if (cp->boot_id != boot_id) {
    out.status = CheckpointLoad::OtherBoot;
    out.error = "checkpoint is from boot " + cp->boot_id + ", this is boot " + boot_id;
    return out;
  }
  out.status = CheckpointLoad::Restored;
  out.checkpoint = std::move(*cp);
  return out;
}

}  // namespace pressured
