#pragma once
// A process a test runs as its child (the built `pressured` binary, as the
// daemon's host and crash tests run it): started with its output appended to
// a log file, stopped as a supervisor stops it (SIGTERM, then SIGKILL), and
// every wait for it bounded.

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pressured::testing {

/// Reaps `pid` within `limit`: its wait status, or -1 if it has not exited.
inline int reap_within(pid_t pid, std::chrono::milliseconds limit) {
  for (auto end = std::chrono::steady_clock::now() + limit;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (std::chrono::steady_clock::now() >= end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// SIGTERM, then its wait status if it exits within `grace`; else SIGKILL
/// and its status within 30 s. -1 (and a line on stderr) if it could not be
/// reaped even then.
inline int stop_child(pid_t pid, std::chrono::milliseconds grace) {
  ::kill(pid, SIGTERM);
  int status = reap_within(pid, grace);
  if (status == -1) {
    ::kill(pid, SIGKILL);
    status = reap_within(pid, std::chrono::seconds(30));
    if (status == -1) std::fprintf(stderr, "child %d not reaped 30 s after SIGKILL\n", static_cast<int>(pid));
  }
  return status;
}

/// Forks and execs `argv` (argv[0] a path) with `env` (nullopt: this
/// process's environment), its stdout and stderr appended to `log`. The
/// child's pid, or -1 if the fork failed (a failed exec exits 127).
inline pid_t spawn_logged(std::vector<std::string> argv, const std::string& log,
                          std::optional<std::vector<std::string>> env = std::nullopt) {
  // Everything the child uses is built before the fork: the child of a
  // threaded test process may only make async-signal-safe calls until exec (a
  // malloc can wait forever on a lock another thread held at the fork; the
  // sanitizers' allocator is not fork-safe).
  std::vector<char*> a, e;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  if (env) {
    for (auto& s : *env) e.push_back(s.data());
    e.push_back(nullptr);
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    ::dup2(fd, 2);
    ::dup2(fd, 1);
    if (env) {
      ::execve(a[0], a.data(), e.data());
    } else {
      ::execv(a[0], a.data());
    }
    ::_exit(127);
  }
  return pid;
}

}  // namespace pressured::testing
