// The service notification protocol spoken without libsystemd: what a
// service manager listening on $NOTIFY_SOCKET receives, and the watchdog
// interval read from the environment (sd_notify(3), sd_watchdog_enabled(3)).
#include "daemon/systemd_notify.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "fakes/fake_node.hpp"

namespace pressured {
namespace {

// Sets an environment variable for one test, restoring it after.
class EnvVar {
 public:
  EnvVar(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~EnvVar() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A datagram socket bound where a service manager listens: a path, or an
// abstract name when `abstract` (NOTIFY_SOCKET "@name").
class Listener {
 public:
  Listener(const std::string& name, bool abstract) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (abstract) sa.sun_path[0] = '\0';
    else ++len;
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), len) == 0;
  }
  ~Listener() { ::close(fd_); }
  bool bound() const { return bound_; }
  // The next datagram, or "" when none is waiting.
  std::string receive() {
    char buf[512];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotify, SendsEachStateAsOneDatagramToAPathSocket) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/notify";
  Listener manager(path, false);
  ASSERT_TRUE(manager.bound()) << std::strerror(errno);
  EnvVar env("NOTIFY_SOCKET", path);
  EXPECT_TRUE(systemd::notify("READY=1\nSTATUS=running: 2 thresholds, 110 pods"));
  EXPECT_EQ(manager.receive(), "READY=1\nSTATUS=running: 2 thresholds, 110 pods");
  EXPECT_TRUE(systemd::notify("WATCHDOG=1"));
  EXPECT_EQ(manager.receive(), "WATCHDOG=1");
  EXPECT_EQ(manager.receive(), "") << "one datagram a state";
}

TEST(SystemdNotify, AnAtSignNamesAnAbstractSocket) {
  const std::string name = "@pressured-notify-test-" + std::to_string(::getpid());
  Listener manager(name, true);
  ASSERT_TRUE(manager.bound()) << std::strerror(errno);
  EnvVar env("NOTIFY_SOCKET", name);
  EXPECT_TRUE(systemd::notify("STOPPING=1"));
  EXPECT_EQ(manager.receive(), "STOPPING=1");
}

TEST(SystemdNotify, WithoutAServiceManagerNothingIsSent) {
  {
    EnvVar env("NOTIFY_SOCKET", std::nullopt);
    EXPECT_FALSE(systemd::notify("READY=1"));
  }
  for (const char* bad : {"", "relative/path", "vsock:2:1234", "@"}) {
    EnvVar env("NOTIFY_SOCKET", std::string(bad));
    EXPECT_FALSE(systemd::notify("READY=1")) << bad;
  }
  testing::TempDir dir;
  EnvVar env("NOTIFY_SOCKET", dir.path() + "/nobody-listens");
  EXPECT_FALSE(systemd::notify("READY=1"));
}

TEST(SystemdNotify, TheWatchdogIntervalIsOursOnly) {
  {
    EnvVar usec("WATCHDOG_USEC", std::nullopt);
    EnvVar pid("WATCHDOG_PID", std::nullopt);
    EXPECT_EQ(systemd::watchdog_interval(), Duration(0));
  }
  {
    EnvVar usec("WATCHDOG_USEC", std::string("20000000"));
    EnvVar pid("WATCHDOG_PID", std::nullopt);
    EXPECT_EQ(systemd::watchdog_interval(), std::chrono::seconds(20));
  }
  {
    EnvVar usec("WATCHDOG_USEC", std::string("20000000"));
    EnvVar pid("WATCHDOG_PID", std::to_string(::getpid()));
    EXPECT_EQ(systemd::watchdog_interval(), std::chrono::seconds(20));
  }
  {
    // Inherited from a parent the watchdog was set for: not this process's.
    EnvVar usec("WATCHDOG_USEC", std::string("20000000"));
    EnvVar pid("WATCHDOG_PID", std::to_string(::getpid() + 1));
    EXPECT_EQ(systemd::watchdog_interval(), Duration(0));
  }
  for (const char* bad : {"", "0", "-5", "20s", "1e6"}) {
    EnvVar usec("WATCHDOG_USEC", std::string(bad));
    EnvVar pid("WATCHDOG_PID", std::nullopt);
    EXPECT_EQ(systemd::watchdog_interval(), Duration(0)) << bad;
  }
}

}  // namespace
}  // namespace pressured
