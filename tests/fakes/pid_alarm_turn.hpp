#pragma once
// The PID alarm counts every thread of the node, and the host tests of it
// fork and kill up to 200 tasks of their own: run side by side (ctest -j2
// runs each test as its own process, across binaries), they move each
// other's count by as much as the margins they test. Each takes this turn
// first. flock is released when the fd closes, also when a test fails or dies.

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace pressured::testing {

struct PidAlarmTurn {
  static constexpr const char* kPath = "/tmp/pressured-test-pid-alarm.lock";
  int fd = ::open(kPath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  bool held = fd >= 0 && ::flock(fd, LOCK_EX) == 0;
  PidAlarmTurn() = default;
  PidAlarmTurn(const PidAlarmTurn&) = delete;
  PidAlarmTurn& operator=(const PidAlarmTurn&) = delete;
  ~PidAlarmTurn() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace pressured::testing
