// Host (root): kernel symbol addresses asked of the kernel
// (bpf/kernel_symbol.bpf.c) against /proc/kallsyms, the ground truth, and the
// PID alarm's count where the kernel's nr_threads resolves and where it does not.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "bpf/bpf_events.hpp"
#include "bpf/features.hpp"
#include "bpf/kernel_symbol.hpp"
#include "fakes/event_test_helpers.hpp"
#include "fakes/kernel_release.hpp"
#include "fakes/pid_alarm_turn.hpp"
#include "fakes/privilege.hpp"
#include "pressured/clock.hpp"
#include "pressured/events.hpp"

extern char** environ;

namespace pressured {
namespace {

using namespace std::chrono_literals;
using events_test::loadavg_tasks;

// The address /proc/kallsyms gives `name` (0 when hidden from us); nullopt when absent.
std::optional<uint64_t> kallsyms_address(const std::string& name) {
  std::ifstream in("/proc/kallsyms");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string addr, type, sym, module;
    if (!(f >> addr >> type >> sym)) continue;
    if (sym == name && !(f >> module)) return std::stoull(addr, nullptr, 16);
  }
  return std::nullopt;
}

TEST(HostBpfKernelSymbol, AgreesWithKallsyms) {
  PRESSURED_REQUIRE_ROOT();
  auto text = bpf::lookup_kernel_symbol("schedule");
  if (!text) {
    ASSERT_EQ(text.error().code, ENOTSUP) << text.error().message;
    ASSERT_FALSE(testing::kernel_at_least(5, 16)) << "bpf_kallsyms_lookup_name is in every kernel since 5.16: "
                                         << text.error().message;
    GTEST_SKIP() << "NOT APPLICABLE before 5.16: " << text.error().message;
  }
  auto truth = kallsyms_address("schedule");
  ASSERT_TRUE(truth.has_value()) << "schedule is not in /proc/kallsyms";
  ASSERT_NE(*truth, 0u) << "kallsyms hides addresses from root here (kptr_restrict=2?)";
  EXPECT_EQ(*text, *truth);

  // nr_threads is data: in kallsyms only with CONFIG_KALLSYMS_ALL (not on this host; on the VM's Debian kernels).
  auto nr = bpf::lookup_kernel_symbol("nr_threads");
  auto nr_truth = kallsyms_address("nr_threads");
  ::testing::Test::RecordProperty("nr_threads", nr ? "resolved" : nr.error().message);
  if (nr_truth) {
    ASSERT_TRUE(nr) << nr.error().message;
    EXPECT_EQ(*nr, *nr_truth);
  } else {
    ASSERT_FALSE(nr) << "resolved to " << *nr << " though /proc/kallsyms lacks it";
    EXPECT_EQ(nr.error().code, ENOENT) << nr.error().message;
  }

  auto none = bpf::lookup_kernel_symbol("pressured_no_such_symbol_xyz");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ENOENT) << none.error().message;
  auto empty = bpf::lookup_kernel_symbol("");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, EINVAL);
  auto overlong = bpf::lookup_kernel_symbol(std::string(64, 'x'));
  ASSERT_FALSE(overlong);
  EXPECT_EQ(overlong.error().code, EINVAL);
}

// Seeded far too low (1 task), the two counts part: the kernel's nr_threads
// is above an alarm at half the real count at the next fork, the seeded
// fork/free delta stays near 1 and never reaches it.
TEST(HostPidAlarm, CountsTheKernelsTasksWhereResolvableElseTheSeededDelta) {
  PRESSURED_REQUIRE_ROOT();
  auto features = make_kernel_bpf_features();
  PRESSURED_REQUIRE(features->bpf_available(), "BPF");
  testing::PidAlarmTurn turn;  // the other PID-alarm tests' forks would cross a seeded alarm
  ASSERT_TRUE(turn.held) << "the PID-alarm tests' lock " << testing::PidAlarmTurn::kPath << ": " << std::strerror(errno);
  EventStats stats;
  bpf::BpfEventsOptions o;
  auto src = bpf::BpfEventSource::create(o, *features, stats);
  ASSERT_TRUE(src) << src.error().message;
  ASSERT_TRUE((*src)->pid_count_active()) << stats.attach_reason(BpfProgram::TaskFork);
  EXPECT_FALSE((*src)->counts_kernel_tasks()) << "looked up before any alarm was set";

  const uint64_t real = loadavg_tasks();
  ASSERT_GT(real, 20u);
  const uint64_t alarm = real / 2;
  ASSERT_TRUE((*src)->set_pid_alarm(alarm, 1));
  const bool resolvable = bpf::lookup_kernel_symbol("nr_threads").ok();
  ::testing::Test::RecordProperty("count", resolvable ? "kernel nr_threads" : "seeded delta");
  ASSERT_EQ((*src)->counts_kernel_tasks(), resolvable);

  // One fork and free of our own; the rest of the host forks too.
  pid_t child = -1;
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  ASSERT_EQ(::posix_spawn(&child, "/bin/true", nullptr, nullptr, argv, environ), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);

  std::vector<PressureEvent> events;
  std::optional<PressureEvent> up;
  MonotonicClock clock;
  for (int i = 0; i < 40 && !up; ++i) {  // 2 s at most
    events.clear();
    (*src)->drain(events, clock.now());
    for (const auto& e : events)
      if (e.type == EventType::PidAlarmUp) up = e;
    if (!up) std::this_thread::sleep_for(50ms);
  }
  if (resolvable) {
    ASSERT_TRUE(up.has_value()) << "no PidAlarmUp at " << alarm << " tasks with the kernel's count (~" << real << ")";
    EXPECT_GE(up->value, static_cast<int64_t>(alarm));
    EXPECT_LE(up->value, static_cast<int64_t>(real * 2)) << "not the kernel's task count";
  } else {
    EXPECT_FALSE(up.has_value()) << "PidAlarmUp at " << up->value << " tasks: not the seeded count";
    EXPECT_LT((*src)->pid_count(), static_cast<int64_t>(alarm));
  }
}

}  // namespace
}  // namespace pressured
