#include "daemon/sandbox_node.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "evict/cgroup_evictor.hpp"
#include "kernel/fd.hpp"
#include "kernel/file.hpp"
#include "kernel/parse.hpp"

namespace fs = std::filesystem;

namespace pressured {

namespace {

bool write_file(const std::string& path, const std::string& value) { return kernel::write_file(path, value).ok(); }

std::string read_file(const std::string& path) {
  auto text = kernel::read_file(path);
  return text ? *text : std::string();
}

void remove_tree(const std::string& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return;
  std::vector<std::string> dirs;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  dirs.push_back(root);
  for (int attempt = 0; attempt < 100; ++attempt) {
    bool all = true;
    for (const auto& d : dirs) {
      for (pid_t p : CgroupEvictor::processes(d)) {
        if (p > 1 && p != ::getpid()) ::kill(p, SIGKILL);
      }
      if (d.find("/freezer/") != std::string::npos) write_file(d + "/freezer.state", "THAWED");
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT) all = false;
    }
    if (all) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Result<std::unique_ptr<SandboxNode>> SandboxNode::create(const std::string& name, uint64_t limit_bytes) {
  if (::geteuid() != 0) return Error{EPERM, "the sandbox needs root (it creates cgroups)"};
  std::unique_ptr<SandboxNode> n(new SandboxNode());
  n->name_ = name;
  std::error_code ec;
  if (fs::exists("/sys/fs/cgroup/memory/memory.usage_in_bytes", ec)) {
    n->mount_ = "/sys/fs/cgroup/memory";
    if (fs::exists("/sys/fs/cgroup/freezer/freezer.state", ec) || fs::exists("/sys/fs/cgroup/freezer/cgroup.procs", ec)) {
      n->freezer_root_ = "/sys/fs/cgroup/freezer/" + name;
    }
  } else if (read_file("/sys/fs/cgroup/cgroup.controllers").find("memory") != std::string::npos) {
    n->mount_ = "/sys/fs/cgroup";
    n->v2_ = true;
  } else {
    return Error{ENOENT, "no memory cgroup controller found (v1 /sys/fs/cgroup/memory or v2 /sys/fs/cgroup)"};
  }
  n->root_ = n->mount_ + "/" + name;
  if (fs::exists(n->root_, ec)) return Error{EEXIST, n->root_ + " already exists"};
  for (const char* rel : {"", "/kubepods", "/kubepods/burstable", "/kubepods/besteffort"}) {
    std::string d = n->root_ + rel;
    if (::mkdir(d.c_str(), 0755) != 0) return Error::from_errno(errno, "mkdir " + d);
    if (n->v2_ && std::string(rel) != "/kubepods/burstable" && std::string(rel) != "/kubepods/besteffort") {
      write_file(d + "/cgroup.subtree_control", "+memory");
    }
    if (!n->freezer_root_.empty()) ::mkdir((n->freezer_root_ + rel).c_str(), 0755);
  }
  if (n->v2_) {
    write_file(n->root_ + "/kubepods/burstable/cgroup.subtree_control", "+memory");
    write_file(n->root_ + "/kubepods/besteffort/cgroup.subtree_control", "+memory");
  }
  std::string limit = std::to_string(limit_bytes);
  std::string file = n->kubepods() + (n->v2_ ? "/memory.max" : "/memory.limit_in_bytes");
  if (auto w = kernel::write_file(file, limit); !w) {
    return Error{w.error().code, "set the sandbox memory limit: " + w.error().message};
  }
  if (!n->v2_) write_file(n->kubepods() + "/memory.use_hierarchy", "1");
  return n;
}

SandboxNode::~SandboxNode() { destroy(); }

Result<SandboxPod> SandboxNode::start_pod(const std::string& uid, const std::string& name, QosClass qos,
                                          const std::vector<std::string>& argv) {
  SandboxPod p;
  p.uid = uid;
  p.name = name;
  p.qos = qos;
  std::string tier = qos == QosClass::Guaranteed ? "" : qos == QosClass::Burstable ? "burstable/" : "besteffort/";
  p.rel = "kubepods/" + tier + "pod" + uid;
  std::string dir = path(p.rel);
  if (::mkdir(dir.c_str(), 0755) != 0) return Error::from_errno(errno, "mkdir " + dir);
  std::string fdir = freezer_root_.empty() ? "" : freezer_root_ + "/" + p.rel;
  if (!fdir.empty() && ::mkdir(fdir.c_str(), 0755) != 0) fdir.clear();
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Error::from_errno(errno, "pipe");
  // The child reports a failure to start on the pipe; exec closes its end.
  kernel::Fd from_child(pipefd[0]), to_parent(pipefd[1]);
  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno(errno, "fork");
  if (pid == 0) {
    from_child.reset();
    ::setpgid(0, 0);  // Ctrl-C goes to the demo and the daemon, not straight to the pods
    std::string me = std::to_string(::getpid());
    if (!write_file(dir + "/cgroup.procs", me)) {
      (void)!::write(to_parent.get(), "c", 1);
      ::_exit(126);
    }
    if (!fdir.empty()) write_file(fdir + "/cgroup.procs", me);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    (void)!::write(to_parent.get(), "e", 1);
    ::_exit(127);
  }
  to_parent.reset();
  char c;
  ssize_t n = ::read(from_child.get(), &c, 1);
  from_child.reset();
  if (n > 0) {
    ::waitpid(pid, nullptr, 0);
    return Error{EIO, "could not start " + argv[0] + " in " + dir};
  }
  children_.push_back(pid);
  p.pid = pid;
  return p;
}

std::size_t SandboxNode::processes(const SandboxPod& pod) const { return CgroupEvictor::processes(path(pod.rel)).size(); }

uint64_t SandboxNode::usage(const std::string& rel) const {
  auto v = kernel::read_u64(path(rel) + (v2_ ? "/memory.current" : "/memory.usage_in_bytes"));
  return v ? *v : 0;
}

uint64_t SandboxNode::oom_kills() const {
  if (v2_) {
    auto ev = kernel::parse_memory_events(read_file(kubepods() + "/memory.events"));
    return ev ? ev->oom_kill : 0;
  }
  // v1 memory.oom_control: "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n". v1 counts
  // an OOM kill only in the victim task's own memcg (v2 propagates it to the
  // ancestors): a kill at the kubepods limit shows in the pod's cgroup, so the
  // counters of the whole tree are summed.
  uint64_t total = 0;
  std::error_code ec;
  auto add = [&](const std::string& dir) {
    auto fields = kernel::parse_flat_keyed(read_file(dir + "/memory.oom_control"));
    if (!fields) return;
    for (const auto& [key, value] : *fields) {
      if (key == "oom_kill") total += value;
    }
  };
  add(kubepods());
  for (fs::recursive_directory_iterator it(kubepods(), ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) add(it->path().string());
  }
  return total;
}

void SandboxNode::reap() {
  for (pid_t c : children_) ::waitpid(c, nullptr, WNOHANG);
}

void SandboxNode::destroy() {
  if (root_.empty()) return;
  remove_tree(root_);
  if (!freezer_root_.empty()) remove_tree(freezer_root_);
  for (pid_t c : children_) {
    ::kill(c, SIGKILL);
    ::waitpid(c, nullptr, 0);
  }
  children_.clear();
  root_.clear();
}

}  // namespace pressured
