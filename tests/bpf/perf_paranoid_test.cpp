// kernel.perf_event_paranoid: read from a fake /proc, and the kprobe refusal
// an operator reads in the log and in pressured_bpf_program_info's reason.
#include "bpf/perf_paranoid.hpp"

#include <gtest/gtest.h>

#include <cerrno>

#include "fakes/fake_node.hpp"

namespace pressured::bpf {
namespace {

using pressured::testing::TempDir;
using pressured::testing::write_text;

std::optional<int> paranoid_of(const char* text) {
  TempDir proc;
  write_text(proc.path() + "/sys/kernel/perf_event_paranoid", text);
  return read_perf_event_paranoid(proc.path());
}

TEST(PerfParanoid, ReadsTheSysctlUnderTheGivenProcRoot) {
  EXPECT_EQ(paranoid_of("3\n"), 3);
  EXPECT_EQ(paranoid_of("2\n"), 2);
  EXPECT_EQ(paranoid_of("-1\n"), -1);
}

TEST(PerfParanoid, UnreadableOrGarbledIsUnknown) {
  TempDir empty;
  EXPECT_EQ(read_perf_event_paranoid(empty.path()), std::nullopt);
  EXPECT_EQ(paranoid_of(""), std::nullopt);
  EXPECT_EQ(paranoid_of("three\n"), std::nullopt);
  EXPECT_EQ(paranoid_of("3 4\n"), std::nullopt);
}

TEST(PerfParanoid, RefusalAboveTwoNamesTheSysctlItsValueAndTheRemedy) {
  for (int err : {EACCES, EPERM}) {
    const std::string r = perf_event_refusal("perf_event_open kprobe", err, 3);
    EXPECT_EQ(r.rfind("perf_event_open kprobe: ", 0), 0u) << r;
    EXPECT_NE(r.find("kernel.perf_event_paranoid is 3"), std::string::npos) << r;
    EXPECT_NE(r.find("CAP_SYS_ADMIN"), std::string::npos) << r;
    EXPECT_NE(r.find("kernel.perf_event_paranoid=2"), std::string::npos) << r;
    EXPECT_NE(r.find("PSI"), std::string::npos) << r;
  }
}

TEST(PerfParanoid, TheSysctlIsNotBlamedWhereItIsNotTheCause) {
  // At 2 and below CAP_PERFMON suffices: a refusal there has another cause.
  EXPECT_EQ(perf_event_refusal("perf_event_open kprobe", EACCES, 2), "perf_event_open kprobe: Permission denied");
  // Unknown value: nothing is claimed.
  EXPECT_EQ(perf_event_refusal("perf_event_open kprobe", EACCES, std::nullopt),
            "perf_event_open kprobe: Permission denied");
  // Not a permission refusal (a missing symbol, say).
  EXPECT_EQ(perf_event_refusal("perf_event_open kprobe", ENOENT, 3),
            "perf_event_open kprobe: No such file or directory");
}

TEST(PerfParanoid, AnOffReasonLedByTheSysctlKeepsTheRemedyInTheLabel) {
  const std::string refusal = perf_event_refusal("perf_event_open kprobe", EACCES, 4);
  const std::string r = lead_with_perf_paranoid("every candidate refused: fentry f: attach: 524; kprobe f: " + refusal);
  EXPECT_EQ(r.rfind("kernel.perf_event_paranoid=4 refuses kprobes without CAP_SYS_ADMIN", 0), 0u) << r;
  EXPECT_NE(r.substr(0, 128).find("kernel.perf_event_paranoid=2"), std::string::npos) << r;
  EXPECT_NE(r.find("every candidate refused: fentry f"), std::string::npos) << r;
  // Any other reason stays as it is.
  EXPECT_EQ(lead_with_perf_paranoid("every candidate refused: kprobe f: perf_event_open kprobe: Permission denied"),
            "every candidate refused: kprobe f: perf_event_open kprobe: Permission denied");
}

}  // namespace
}  // namespace pressured::bpf
