#include "fakes/sandbox_cgroup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace fs = std::filesystem;

namespace pressured::testing {

namespace {

bool write_file(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::write(fd, value.data(), value.size());
  ::close(fd);
  return n == static_cast<ssize_t>(value.size());
}

// Reaps `pid` within `limit`; false if it is still there (then says what it waits in).
bool reap(pid_t pid, std::chrono::milliseconds limit, const char* what) {
  for (auto end = std::chrono::steady_clock::now() + limit;;) {
    const pid_t r = ::waitpid(pid, nullptr, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat"), wchan("/proc/" + std::to_string(pid) + "/wchan");
  std::string line, chan;
  std::getline(stat, line);
  std::getline(wchan, chan);
  const auto paren = line.rfind(')');
  std::fprintf(stderr, "sandbox: %s: child %d not reaped after %lld ms (state %s, waiting in %s); left behind\n", what,
               static_cast<int>(pid), static_cast<long long>(limit.count()),
               paren == std::string::npos ? "?" : line.substr(paren + 2, 1).c_str(), chan.empty() ? "?" : chan.c_str());
  return false;
}

std::vector<pid_t> procs_of(const std::string& dir) {
  std::vector<pid_t> out;
  std::ifstream in(dir + "/cgroup.procs");
  pid_t p;
  while (in >> p) out.push_back(p);
  return out;
}

}  // namespace

SandboxCgroup::SandboxCgroup(std::string mount, std::string tag) {
  root_ = mount + "/pressured-test-" + std::to_string(::getpid()) + "-" + tag;
  std::error_code ec;
  v2_ = fs::exists(mount + "/cgroup.controllers", ec);
  if (fs::exists(root_, ec)) {
    kill_all();
    fs::remove(root_, ec);
  }
  if (::mkdir(root_.c_str(), 0755) != 0) {
    error_ = "mkdir " + root_ + ": " + std::strerror(errno);
    return;
  }
  ok_ = true;
}

SandboxCgroup::~SandboxCgroup() {
  if (!ok_) return;
  kill_all();
  // Remove bottom-up: deepest directories first.
  std::vector<std::string> dirs;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (int attempt = 0; attempt < 50; ++attempt) {
    bool all = true;
    for (const auto& d : dirs) {
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT) all = false;
    }
    if (::rmdir(root_.c_str()) != 0 && errno != ENOENT) all = false;
    if (all) return;
    kill_all();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string SandboxCgroup::path(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }

bool SandboxCgroup::make(const std::string& rel) {
  std::error_code ec;
  fs::create_directories(path(rel), ec);
  return !ec;
}

bool SandboxCgroup::write(const std::string& rel, const std::string& file, const std::string& value) {
  return write_file(path(rel) + "/" + file, value);
}

std::string SandboxCgroup::read(const std::string& rel, const std::string& file) const {
  std::ifstream in(path(rel) + "/" + file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t SandboxCgroup::spawn(const std::string& rel, const std::vector<std::string>& argv) {
  if (argv.empty()) return -1;
  // Everything the child needs is made here: between fork() and exec() the
  // child of a threaded parent may only make async-signal-safe calls. A
  // malloc there can wait forever on a lock another thread of the parent
  // held at the fork (the sanitizers' allocator is not fork-safe: a test that
  // forked while its fake API server started its thread pool hung so).
  const std::string procs = path(rel) + "/cgroup.procs";
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    // Child: join the cgroup first ("0" is the writer), then exec; report failure via the pipe.
    ::close(pipefd[0]);
    int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) < 0) {
      char c = 'c';
      (void)!::write(pipefd[1], &c, 1);
      ::_exit(126);
    }
    ::close(fd);
    ::execv(args[0], args.data());
    char c = 'e';
    (void)!::write(pipefd[1], &c, 1);
    ::_exit(127);
  }
  ::close(pipefd[1]);
  // The pipe closes at the exec (O_CLOEXEC) or carries the failure; bounded.
  pollfd pfd{pipefd[0], POLLIN, 0};
  int ready = 0;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       ready == 0 && std::chrono::steady_clock::now() < end;) {
    ready = ::poll(&pfd, 1, 1000);
    if (ready < 0 && errno == EINTR) ready = 0;
  }
  if (ready == 0) {
    ::close(pipefd[0]);
    ::kill(pid, SIGKILL);
    reap(pid, std::chrono::seconds(30), "spawn");
    error_ = "spawn of " + argv[0] + " in " + rel + ": the child neither ran it nor failed within 60 s";
    return -1;
  }
  char c;
  ssize_t n = ::read(pipefd[0], &c, 1);
  ::close(pipefd[0]);
  if (n > 0) {
    reap(pid, std::chrono::seconds(30), "spawn");
    return -1;
  }
  children_.push_back(pid);
  return pid;
}

void SandboxCgroup::kill_all() {
  std::error_code ec;
  std::vector<std::string> dirs{root_};
  for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) dirs.push_back(it->path().string());
  }
  for (int round = 0; round < 20; ++round) {
    bool any = false;
    for (const auto& d : dirs) {
      for (pid_t p : procs_of(d)) {
        if (p > 1 && p != ::getpid()) {
          ::kill(p, SIGKILL);
          any = true;
        }
      }
    }
    for (pid_t c : children_) ::waitpid(c, nullptr, WNOHANG);
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Bounded: a child that cannot die (frozen, or in the kernel) is named and
  // left rather than waited for forever.
  for (pid_t c : children_) {
    ::kill(c, SIGKILL);
    reap(c, std::chrono::seconds(30), "kill_all");
  }
  children_.clear();
}

namespace {

bool has_word(const std::string& path, const std::string& word) {
  std::ifstream in(path);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

}  // namespace

bool SandboxCgroup::enable_controller(const std::string& rel, const std::string& controller) {
  if (!v2_) return true;
  const std::string dir = path(rel);
  if (has_word(dir + "/cgroup.subtree_control", controller)) return true;  // only where needed
  if (!has_word(dir + "/cgroup.controllers", controller)) {
    error_ = dir + " does not offer the " + controller + " controller (cgroup.controllers)";
    return false;
  }
  if (!write_file(dir + "/cgroup.subtree_control", "+" + controller)) {
    error_ = "enable +" + controller + " in " + dir + "/cgroup.subtree_control: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool SandboxCgroup::make_with(const std::string& rel, const std::string& controller) {
  if (!v2_) return make(rel);
  if (rel.empty()) return true;
  // Walk down from the sandbox root: enable the controller in each parent,
  // then create the child. Never writes above the sandbox root.
  std::string parent;
  std::size_t pos = 0;
  while (pos <= rel.size()) {
    std::size_t slash = rel.find('/', pos);
    std::string part = rel.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    pos = slash == std::string::npos ? rel.size() + 1 : slash + 1;
    if (part.empty()) continue;
    if (!enable_controller(parent, controller)) return false;
    std::string child = parent.empty() ? part : parent + "/" + part;
    if (::mkdir(path(child).c_str(), 0755) != 0 && errno != EEXIST) {
      error_ = "mkdir " + path(child) + ": " + std::strerror(errno);
      return false;
    }
    parent = child;
  }
  return true;
}

bool SandboxCgroup::set_memory_max(const std::string& rel, uint64_t bytes) {
  const std::string v = std::to_string(bytes);
  std::error_code ec;
  if (v2_) {
    if (!write(rel, "memory.max", v)) {
      error_ = "write " + path(rel) + "/memory.max: " + std::strerror(errno);
      return false;
    }
    // No swap for the sandbox: the limit is what the workload gets.
    if (fs::exists(path(rel) + "/memory.swap.max", ec) && !write(rel, "memory.swap.max", "0")) {
      error_ = "write " + path(rel) + "/memory.swap.max: " + std::strerror(errno);
      return false;
    }
    return true;
  }
  if (!write(rel, "memory.limit_in_bytes", v)) {
    error_ = "write " + path(rel) + "/memory.limit_in_bytes: " + std::strerror(errno);
    return false;
  }
  (void)write(rel, "memory.swappiness", "0");  // advisory: absent on some kernels
  return true;
}

bool SandboxCgroup::set_memory_high(const std::string& rel, uint64_t bytes) {
  if (!v2_) {
    error_ = "memory.high exists only on cgroup v2";
    return false;
  }
  if (!write(rel, "memory.high", std::to_string(bytes))) {
    error_ = "write " + path(rel) + "/memory.high: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool SandboxCgroup::move(const std::string& rel, pid_t pid) {
  if (!write(rel, "cgroup.procs", std::to_string(pid))) {
    error_ = "move " + std::to_string(pid) + " to " + path(rel) + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool SandboxCgroup::has_memory(const std::string& rel) const {
  std::error_code ec;
  return fs::exists(path(rel) + (v2_ ? "/memory.max" : "/memory.limit_in_bytes"), ec);
}

long long SandboxCgroup::read_key(const std::string& rel, const std::string& file, const std::string& key) const {
  std::ifstream in(path(rel) + "/" + file);
  std::string k;
  long long v;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return -1;
}

std::string SandboxCgroup::find_v2_memory_mount(std::string* why) {
  const std::string root = "/sys/fs/cgroup";
  auto fail = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return std::string();
  };
  std::error_code ec;
  if (!fs::exists(root + "/cgroup.controllers", ec))
    return fail("cgroup v2 is not mounted at " + root + " (hybrid/v1 host; the v2 tests run in vmtests)");
  if (!has_word(root + "/cgroup.controllers", "memory"))
    return fail("the cgroup v2 hierarchy at " + root + " has no memory controller (it is bound to cgroup v1 here)");
  if (!has_word(root + "/cgroup.subtree_control", "memory"))
    return fail("memory is not enabled in " + root + "/cgroup.subtree_control (the tests never change it)");
  return root;
}

bool SandboxCgroup::memory_controller_available(const std::string& mount) {
  if (::geteuid() != 0 || mount.empty()) return false;
  std::error_code ec;
  return fs::exists(mount + "/memory.usage_in_bytes", ec) || fs::exists(mount + "/memory.stat", ec) ||
         fs::exists(mount + "/cgroup.subtree_control", ec);
}

std::string SandboxCgroup::find_memory_mount() {
  std::error_code ec;
  if (fs::exists("/sys/fs/cgroup/memory/memory.usage_in_bytes", ec)) return "/sys/fs/cgroup/memory";
  std::ifstream in("/sys/fs/cgroup/cgroup.controllers");
  std::string word;
  while (in >> word) {
    if (word == "memory") return "/sys/fs/cgroup";
  }
  return {};
}

}  // namespace pressured::testing
