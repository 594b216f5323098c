#include "daemon/disk_reclaim.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

extern char** environ;

namespace pressured {

DiskReclaimRunner::~DiskReclaimRunner() {
  if (thread_.joinable()) thread_.join();
}

void DiskReclaimRunner::start(std::vector<std::string> argv, Duration timeout, std::function<void()> on_done) {
  if (thread_.joinable()) thread_.join();
  thread_ = std::thread([this, argv = std::move(argv), timeout, on_done = std::move(on_done)] {
    auto r = run_command_with_timeout(argv, timeout);
    if (!r) {
      spdlog::warn("disk reclaim command failed: {}", r.error().message);
    } else {
      spdlog::info("disk reclaim command exited with status {}", *r);
    }
    finished_ = true;  // handed to the policy by the next evaluation
    if (loop_ != nullptr && on_done) (void)loop_->post(on_done);  // else: the next tick
  });
}

Result<int> run_command_with_timeout(const std::vector<std::string>& argv, Duration timeout) {
  if (argv.empty()) return Error{EINVAL, "empty command"};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);  // the reactor blocks signals; the child must not
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], nullptr, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Error::from_errno(rc, "spawn " + argv[0]);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (w < 0 && errno != EINTR) return Error::from_errno(errno, "waitpid");
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return Error{ETIMEDOUT, argv[0] + " timed out after " + std::to_string(std::chrono::duration<double>(timeout).count()) + "s and was killed"};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace pressured
