#include "daemon/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace pressured {
namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/pressured-ckpt-XXXXXX";
  return ::mkdtemp(tmpl);
}

Checkpoint sample() {
  Checkpoint cp;
  cp.boot_id = "boot-1";
  const ThresholdKey soft_mem{Signal::AllocatableMemoryAvailable, ThresholdKind::Soft};
  cp.engine.threshold_first_observed[soft_mem] = TimePoint(std::chrono::seconds(42));
  cp.engine.threshold_met[soft_mem] = true;
  cp.engine.conditions[0] = true;
  cp.engine.condition_last_met[0] = TimePoint(std::chrono::seconds(43));
  EvictionRecord f;
  Eviction& p = f.eviction;
  p.id = "ev-1";
  p.uid = "uid-a";
  p.name = "a";
  p.namespace_ = "ns";
  p.cgroup_path = "/sys/fs/cgroup/memory/kubepods/besteffort/poduid-a";
  p.qos = QosClass::Burstable;
  p.metadata_known = true;
  p.signal = Signal::AllocatableMemoryAvailable;
  p.kind = ThresholdKind::Soft;
  p.observed = 1.5e8;
  p.threshold_value = 2e8;
  p.grace_period_seconds = 30;
  p.usage_at_decision = 123456789;
  p.decided_at = TimePoint(std::chrono::seconds(44));
  p.keys = RankKeys{false, false, QosClass::Burstable, true, -3, 123456789, 100000000};
  p.runner_up = RunnerUp{"uid-b", "b", "ns", RankKeys{false, true, QosClass::Guaranteed, false, 2000, 5, 10}};
  p.wake_source = "psi";
  p.detection_latency_seconds = 0.0125;
  f.kill_at = TimePoint(std::chrono::seconds(74));
  f.phase_deadline = TimePoint(std::chrono::seconds(104));
  f.killed = true;
  f.delegated = true;
  f.escalated = true;
  f.api = EvictionRecord::Api::Sent;
  f.status = EvictionRecord::Status::Undone;
  f.undone = RecordUndone::PhaseReverted;
  f.killed_at = TimePoint(std::chrono::seconds(45));
  f.next_check = TimePoint(std::chrono::seconds(46));
  cp.policy.records.push_back(f);
  EvictionRecord confirmed;
  confirmed.eviction = p;
  confirmed.eviction.id = "ev-0";
  confirmed.eviction.uid = "uid-old";
  confirmed.local = EvictionRecord::Local::Done;
  confirmed.excluded = true;
  confirmed.api = EvictionRecord::Api::Confirmed;
  cp.policy.records.push_back(confirmed);
  EvictionRecord pending;
  pending.eviction = p;
  pending.eviction.id = "ev-2";
  pending.eviction.uid = "uid-c";
  pending.local = EvictionRecord::Local::Stuck;
  pending.api = EvictionRecord::Api::Pending;
  cp.policy.records.push_back(pending);
  cp.policy.refused = {"uid-refused"};
  cp.policy.lanes = {LanePhase::Evicting, LanePhase::ReclaimingDisk, LanePhase::Idle};
  cp.policy.disk_reclaim_done_at = TimePoint(std::chrono::seconds(40));
  cp.policy.sequence = 7;
  cp.relief.backoff["/sys/fs/cgroup/kubepods/burstable/poduid-a"] = TimePoint(std::chrono::seconds(344));
  return cp;
}

TEST(Checkpoint, RoundTripsEveryField) {
  Checkpoint cp = sample();
  auto back = decode_checkpoint(encode_checkpoint(cp));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->boot_id, "boot-1");
  EXPECT_EQ(back->engine, cp.engine);
  EXPECT_EQ(back->policy, cp.policy);
  EXPECT_EQ(back->relief, cp.relief);
}

// The reclaim stage's back-off came after version 3 without a new version: a
// checkpoint without it loads with none (and a daemon before it ignores it).
TEST(Checkpoint, ReliefBackoffIsOptionalAndItsCgroupsAbsolute) {
  Checkpoint cp = sample();
  auto j = nlohmann::json::parse(encode_checkpoint(cp));
  EXPECT_EQ(j["version"], 4);
  EXPECT_EQ(j["relief"]["backoff_until_ns"]["/sys/fs/cgroup/kubepods/burstable/poduid-a"], 344'000'000'000LL);
  j.erase("relief");
  auto back = decode_checkpoint(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_TRUE(back->relief.backoff.empty());
  EXPECT_EQ(back->policy, cp.policy);

  j = nlohmann::json::parse(encode_checkpoint(cp));
  j["relief"]["backoff_until_ns"]["kubepods/pod-x"] = 1;
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok()) << "a relative cgroup path is corrupt";
  j = nlohmann::json::parse(encode_checkpoint(cp));
  j["relief"]["backoff_until_ns"]["/sys/fs/cgroup/kubepods/pod-x"] = 1.5;
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok());
  j = nlohmann::json::parse(encode_checkpoint(cp));
  j["relief"].erase("backoff_until_ns");
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok()) << "a relief section always has its back-off";
}

// Each phase is written by its name; a name the daemon does not know is
// corrupt, not a default. A relief run does not survive a restart: its lane
// is written idle.
TEST(Checkpoint, RecordPhasesAreNamesAndUnknownOnesCorrupt) {
  Checkpoint cp = sample();
  auto j = nlohmann::json::parse(encode_checkpoint(cp));
  const auto& r = j["policy"]["records"][0];
  EXPECT_EQ(r["local"], "terminating");
  EXPECT_EQ(r["api"], "sent");
  EXPECT_EQ(r["status"], "undone");
  EXPECT_EQ(r["undone"], "phase");
  EXPECT_EQ(j["policy"]["records"][2]["local"], "stuck");
  EXPECT_EQ(j["policy"]["records"][2]["killed_at_ns"], nullptr);
  EXPECT_EQ(j["policy"]["lanes"]["disk"], "reclaiming_disk");
  for (auto [field, value] : std::vector<std::pair<std::string, std::string>>{
           {"local", "later"}, {"api", "lost"}, {"status", "kept"}, {"undone", "later"}}) {
    auto bad = j;
    bad["policy"]["records"][0][field] = value;
    EXPECT_FALSE(decode_checkpoint(bad.dump()).ok()) << field << "=" << value;
  }
  auto bad = j;
  bad["policy"]["lanes"]["pids"] = "busy";
  EXPECT_FALSE(decode_checkpoint(bad.dump()).ok());
  bad = j;
  bad["policy"]["records"][0].erase("next_check_ns");
  EXPECT_FALSE(decode_checkpoint(bad.dump()).ok());
  bad = j;
  bad["policy"].erase("records");
  EXPECT_FALSE(decode_checkpoint(bad.dump()).ok()) << "version 4 always has the list";

  cp.policy.lanes[0] = LanePhase::Relieving;
  auto back = decode_checkpoint(encode_checkpoint(cp));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->policy.lane(Lane::Memory), LanePhase::Idle);
}

// The fuzzer's seeds are checkpoints the daemon accepts (a seed that fails
// to decode would fuzz only the error paths): version 3's and this version's.
TEST(Checkpoint, TheFuzzSeedsLoad) {
  auto read = [](const char* name) {
    std::ifstream in(std::string(PRESSURED_SOURCE_DIR "/tests/fuzz/corpus/checkpoint/") + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  };
  auto v3 = decode_checkpoint(read("v3_api.json"));
  ASSERT_TRUE(v3.ok()) << v3.error().message;
  EXPECT_EQ(std::count_if(v3->policy.records.begin(), v3->policy.records.end(),
                          [](const auto& r) { return r.api == EvictionRecord::Api::Sent; }),
            1);
  auto v4 = decode_checkpoint(read("v4_records.json"));
  ASSERT_TRUE(v4.ok()) << v4.error().message;
  EXPECT_EQ(v4->policy, sample().policy) << "the seed is sample()'s";
  EXPECT_EQ(encode_checkpoint(*v3), encode_checkpoint(*decode_checkpoint(encode_checkpoint(*v3))));
}

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(PRESSURED_FIXTURES_DIR "/checkpoint/") + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A checkpoint version 3 daemon wrote (tests/fixtures/checkpoint: written by
// e8de3a5's encoder, not by hand): each eviction, kept there in up to three
// places, loads as one record with its phases.
TEST(Checkpoint, TheLastFormatBeforeRecordsLoadsAsOneRecordPerEviction) {
  const std::string text = fixture("v3-e8de3a5.json");
  ASSERT_FALSE(text.empty());
  auto cp = decode_checkpoint(text);
  ASSERT_TRUE(cp.ok()) << cp.error().message;
  using L = EvictionRecord::Local;
  using A = EvictionRecord::Api;
  using S = EvictionRecord::Status;
  const auto& rs = cp->policy.records;
  ASSERT_EQ(rs.size(), 4u);
  // In flight and sent to the API: one record, the API's copy (the soft
  // grace it was sent with); the escalation shows as a local grace of 0.
  EXPECT_EQ(rs[0].eviction.id, "ev-1");
  EXPECT_EQ(rs[0].local, L::Terminating);
  EXPECT_TRUE(rs[0].killed && rs[0].delegated && rs[0].escalated);
  EXPECT_EQ(rs[0].eviction.grace_period_seconds, 30);
  EXPECT_EQ(rs[0].local_eviction().grace_period_seconds, 0);
  EXPECT_EQ(rs[0].api, A::Sent);
  EXPECT_EQ(rs[0].killed_at, TimePoint(std::chrono::seconds(74)));
  ASSERT_EQ(rs[0].eviction.containers.size(), 2u);
  EXPECT_EQ(rs[0].eviction.pod_level_request, 60000000u);
  // In flight, never reported.
  EXPECT_EQ(rs[1].eviction.id, "ev-3");
  EXPECT_EQ(rs[1].local, L::Releasing);
  EXPECT_EQ(rs[1].api, A::None);
  EXPECT_EQ(rs[1].eviction.local_storage_rule, "emptydirfs.limit");
  // Done with locally: left out of ranking while "evicted" listed it.
  EXPECT_EQ(rs[2].eviction.id, "ev-0");
  EXPECT_EQ(rs[2].local, L::Done);
  EXPECT_TRUE(rs[2].excluded);
  EXPECT_EQ(rs[2].api, A::Confirmed);
  EXPECT_EQ(rs[2].status, S::Seen);
  EXPECT_EQ(rs[3].eviction.id, "ev-2");
  EXPECT_FALSE(rs[3].excluded) << "uid-c was not in \"evicted\": its pod was gone";
  EXPECT_EQ(rs[3].api, A::Pending);
  EXPECT_EQ(rs[3].status, S::Undone);
  EXPECT_EQ(rs[3].undone, RecordUndone::PhaseReverted);
  EXPECT_EQ(cp->policy.refused, std::vector<std::string>{"uid-refused"}) << "no record holds it";
  EXPECT_EQ(cp->policy.lane(Lane::Memory), LanePhase::Evicting);
  EXPECT_EQ(cp->policy.lane(Lane::Disk), LanePhase::ReclaimingDisk);
  EXPECT_EQ(cp->policy.lane(Lane::Pids), LanePhase::Idle);
  EXPECT_EQ(cp->policy.sequence, 7u);
  EXPECT_EQ(cp->relief.backoff.size(), 1u);
  EXPECT_EQ(cp->engine.threshold_met.size(), 2u);
  // Written again in this version, it reads back the same.
  auto again = decode_checkpoint(encode_checkpoint(*cp));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->policy, cp->policy);
  EXPECT_EQ(nlohmann::json::parse(encode_checkpoint(*cp))["version"], 4);
  // Restored, the disk reclaim command of the previous process is not waited for.
  EvictionPolicy policy{PolicyConfig{}};
  policy.restore(cp->policy);
  EXPECT_EQ(policy.lane(Lane::Disk), LanePhase::Evicting);
  EXPECT_FALSE(policy.state().lane(Lane::Disk) == LanePhase::ReclaimingDisk);
}

// Version 2 (before API evictions were recorded): the evictions in flight
// resume; there are no API evictions to send.
TEST(Checkpoint, VersionTwoStillLoads) {
  auto j = nlohmann::json::parse(fixture("v3-e8de3a5.json"));
  j["version"] = 2;
  j["policy"].erase("api");
  auto back = decode_checkpoint(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->policy.records.size(), 2u);
  for (const auto& r : back->policy.records) {
    EXPECT_TRUE(r.in_flight()) << r.eviction.id;
    EXPECT_EQ(r.api, EvictionRecord::Api::None);
  }
  EXPECT_EQ(back->policy.records[0].eviction.grace_period_seconds, 0) << "only the local copy was kept";
  EXPECT_EQ(back->policy.refused, (std::vector<std::string>{"uid-old", "uid-refused"}));
  j["policy"]["in_flight"][0]["phase"] = "waiting";
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok()) << "an unknown phase is corrupt";
}

// Records written before the ranking keys were recorded still load: the
// eviction resumes, only its explanation is empty.
TEST(Checkpoint, EvictionRecordsWithoutRankingKeysStillLoad) {
  Checkpoint cp = sample();
  auto j = nlohmann::json::parse(encode_checkpoint(cp));
  auto& record = j["policy"]["records"][0]["eviction"];
  ASSERT_TRUE(record.contains("ranking"));
  EXPECT_EQ(record["ranking"]["runner_up"]["uid"], "uid-b");
  EXPECT_EQ(record["ranking"]["victim"]["priority"], -3);
  record.erase("ranking");
  record.erase("wake_source");
  record.erase("detection_latency_seconds");
  auto back = decode_checkpoint(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  cp.policy.records[0].eviction.keys = RankKeys{};
  cp.policy.records[0].eviction.runner_up.reset();
  cp.policy.records[0].eviction.wake_source.clear();
  cp.policy.records[0].eviction.detection_latency_seconds.reset();
  EXPECT_EQ(back->policy, cp.policy);

  // A runner-up of null: the victim was alone.
  j = nlohmann::json::parse(encode_checkpoint(sample()));
  j["policy"]["records"][0]["eviction"]["ranking"]["runner_up"] = nullptr;
  back = decode_checkpoint(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_FALSE(back->policy.records[0].eviction.runner_up);
  EXPECT_EQ(back->policy.records[0].eviction.keys.priority, -3);
}

// A local ephemeral-storage eviction keeps its reason across a restart.
TEST(Checkpoint, LocalStorageReasonRoundTrips) {
  Checkpoint cp = sample();
  Eviction& e = cp.policy.records[0].eviction;
  e.signal = Signal::NodefsAvailable;
  e.local_storage_rule = "ephemeralcontainerfs.limit";
  e.local_storage_message = "Container app exceeded its local ephemeral storage limit \"1Gi\". ";
  auto j = nlohmann::json::parse(encode_checkpoint(cp));
  EXPECT_EQ(j["policy"]["records"][0]["eviction"]["local_storage_rule"], "ephemeralcontainerfs.limit");
  auto back = decode_checkpoint(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->policy, cp.policy);
  // Node-threshold records carry no such field.
  EXPECT_FALSE(nlohmann::json::parse(encode_checkpoint(sample()))["policy"]["records"][0]["eviction"].contains(
      "local_storage_rule"));
  j["policy"]["records"][0]["eviction"].erase("local_storage_message");
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok()) << "a rule without its message";
}

// Which container grew and who was hurt are in the record as they were in
// the log line; a record without them (older daemons, v1) loads without.
TEST(Checkpoint, TheContainerThatGrewAndTheStallsRoundTrip) {
  Checkpoint cp = sample();
  Eviction& e = cp.policy.records[0].eviction;
  e.containers = {{"app", 400u << 20, 100u << 20, 150u << 20, 8.0, PsiStats{{30.25, 12.5, 3.0, 987654}, PsiLine{20, 9, 2, 12345}}},
                  {"sidecar", 10u << 20, 20u << 20, std::nullopt, std::nullopt, std::nullopt}};
  e.grew = ContainerGrowth{"app", ContainerGrowth::Basis::Growth, 400u << 20, 100u << 20, 250 << 20, 8.0};
  e.memory_pressure = PsiStats{{12.5, 6.0, 1.5, 55555}, std::nullopt};
  auto j = nlohmann::json::parse(encode_checkpoint(cp));
  EXPECT_EQ(j["policy"]["records"][0]["eviction"]["grew"]["container"], "app");
  auto back = decode_checkpoint(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message;
  const Eviction& b = back->policy.records[0].eviction;
  EXPECT_EQ(b.grew, e.grew);
  EXPECT_EQ(b.memory_pressure, e.memory_pressure);
  ASSERT_EQ(b.containers.size(), 2u);
  EXPECT_EQ(b.containers[0].memory_pressure, e.containers[0].memory_pressure);
  EXPECT_FALSE(b.containers[1].memory_pressure);
  j["policy"]["records"][0]["eviction"]["grew"]["basis"] = "sideways";
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok()) << "an unknown basis is corrupt";
  EXPECT_FALSE(nlohmann::json::parse(encode_checkpoint(sample()))["policy"]["records"][0]["eviction"].contains("grew"));
}

TEST(Checkpoint, MalformedRankingKeysAreErrors) {
  for (auto [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"qos", "Gold"}, {"priority", 1e12}, {"priority", 3000000000LL}, {"usage", -1}, {"over_request", "yes"}}) {
    auto j = nlohmann::json::parse(encode_checkpoint(sample()));
    j["policy"]["records"][0]["eviction"]["ranking"]["victim"][field] = value;
    EXPECT_FALSE(decode_checkpoint(j.dump()).ok()) << field << "=" << value.dump();
  }
  auto j = nlohmann::json::parse(encode_checkpoint(sample()));
  j["policy"]["records"][0]["eviction"]["ranking"]["runner_up"].erase("uid");
  EXPECT_FALSE(decode_checkpoint(j.dump()).ok());
}

TEST(Checkpoint, CorruptInputsAreErrorsNotCrashes) {
  const std::string policy = R"("policy":{"in_flight":[],"evicted":[],"disk_reclaim_running":false,"disk_reclaim_done_at_ns":null,"sequence":0})";
  for (std::string bad : {std::string(""), std::string("{"), std::string("[]"), std::string("{\"version\":2}"),
                          std::string("{\"version\":99,\"boot_id\":\"x\"}"), std::string("\x01\x02garbage"),
                          // version 1 kept engine state by threshold position
                          std::string(R"({"version":1,"boot_id":"b","engine":{"threshold_first_observed_ns":{"0":1},"threshold_met":{},"conditions":[false,false,false],"condition_last_met_ns":[null,null,null],"terminating_pods":[]},"evicting":[]})"),
                          R"({"version":2,"boot_id":"b","engine":{"threshold_first_observed_ns":{"x":1},"threshold_met":{},"conditions":[false,false,false],"condition_last_met_ns":[null,null,null]},)" + policy + "}",
                          R"({"version":2,"boot_id":"b","engine":{"threshold_first_observed_ns":{"memory.available/medium":1},"threshold_met":{},"conditions":[false,false,false],"condition_last_met_ns":[null,null,null]},)" + policy + "}",
                          R"({"version":2,"boot_id":"b","engine":{"threshold_first_observed_ns":{},"threshold_met":{},"conditions":[false],"condition_last_met_ns":[null]},)" + policy + "}",
                          // numbers a cast cannot hold (found by fuzz.checkpoint): errors, not UB
                          std::string("{\"version\":22222222222222222222222222222222222}"),
                          std::string("{\"version\":2.0e34}"),
                          R"({"version":2,"boot_id":"b","engine":{"threshold_first_observed_ns":{"memory.available/hard":1e300},"threshold_met":{},"conditions":[false,false,false],"condition_last_met_ns":[null,null,null]},)" + policy + "}",
                          std::string(R"({"version":2,"boot_id":"b","engine":{"threshold_first_observed_ns":{},"threshold_met":{},"conditions":[false,false,false],"condition_last_met_ns":[null,null,null]},"policy":{"in_flight":[],"evicted":[],"disk_reclaim_running":false,"disk_reclaim_done_at_ns":null,"sequence":-1}})")}) {
    auto r = decode_checkpoint(bad);
    EXPECT_FALSE(r.ok()) << "accepted: " << bad;
  }
}

TEST(Checkpoint, AtomicWriteAndLoad) {
  std::string dir = temp_dir();
  std::string path = dir + "/sub/state.json";  // directory created on demand
  Checkpoint cp = sample();
  ASSERT_TRUE(write_file_atomically(path, encode_checkpoint(cp)).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto l = load_checkpoint(path, "boot-1");
  EXPECT_EQ(l.status, CheckpointLoad::Restored) << l.error;
  EXPECT_EQ(l.checkpoint.policy.records.size(), 3u);

  auto other = load_checkpoint(path, "boot-2");
  EXPECT_EQ(other.status, CheckpointLoad::OtherBoot);

  std::ofstream(path) << "{ truncated";
  auto bad = load_checkpoint(path, "boot-1");
  EXPECT_EQ(bad.status, CheckpointLoad::Corrupt);
  EXPECT_FALSE(bad.error.empty());

  EXPECT_EQ(load_checkpoint(dir + "/missing.json", "boot-1").status, CheckpointLoad::Missing);
  std::filesystem::remove_all(dir);
}

// A link planted at the temporary name points outside the state directory:
// the writer removes the link and writes a new file; the outside file is
// neither written nor chmod'ed.
TEST(Checkpoint, ALinkAtTheTemporaryNameIsNeverWrittenThrough) {
  const std::string dir = temp_dir();
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "not pressured's";
  ASSERT_EQ(::chmod(victim.c_str(), 0644), 0);
  std::filesystem::create_directories(dir + "/state");
  const std::string path = dir + "/state/state.json";
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(write_file_atomically(path, encode_checkpoint(sample())));
  std::ifstream in(victim);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "not pressured's");
  struct stat st {};
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "chmod'ed through the link";
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(load_checkpoint(path, "boot-1").status, CheckpointLoad::Restored);
  std::filesystem::remove_all(dir);
}

// A FIFO at the state file: the daemon's start neither blocks in the load
// (it would wait for a writer forever) nor replaces it.
TEST(Checkpoint, AFifoAtThePathIsRefusedWithoutBlocking) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/state.json";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto loading = std::async(std::launch::async, [&] { return load_checkpoint(path, "boot-1"); });
  if (loading.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Release the blocked open so that the test can end, then fail.
    int w = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);  // the reader then reads the end of the FIFO
    loading.wait();
    ADD_FAILURE() << "load_checkpoint blocked on a FIFO";
  } else {
    const LoadedCheckpoint l = loading.get();
    EXPECT_EQ(l.status, CheckpointLoad::Corrupt);
    EXPECT_NE(l.error.find("FIFO"), std::string::npos) << l.error;
  }
  EXPECT_FALSE(write_file_atomically(path, encode_checkpoint(sample())));
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "replaced";
  std::filesystem::remove_all(dir);
}

// A link at the state file is not followed on load.
TEST(Checkpoint, ALinkAtThePathIsNotFollowed) {
  const std::string dir = temp_dir();
  ASSERT_TRUE(write_file_atomically(dir + "/elsewhere.json", encode_checkpoint(sample())));
  ASSERT_EQ(::symlink((dir + "/elsewhere.json").c_str(), (dir + "/state.json").c_str()), 0);
  const LoadedCheckpoint l = load_checkpoint(dir + "/state.json", "boot-1");
  EXPECT_EQ(l.status, CheckpointLoad::Corrupt);
  EXPECT_NE(l.error.find("symbolic link"), std::string::npos) << l.error;
  std::filesystem::remove_all(dir);
}

// Nesting past the JSON depth bound is corrupt, whatever member holds it; an
// error message that printed the value (dump() recurses) would overflow the stack.
TEST(Checkpoint, DeepNestingIsCorruptNotAStackOverflow) {
  const std::size_t depth = 1u << 20;
  const std::string deep = std::string(depth, '[') + std::string(depth, ']');
  for (const std::string& text : {"{\"version\":" + deep + "}", "{\"version\":3,\"boot_id\":" + deep + "}"}) {
    auto r = decode_checkpoint(text);
    EXPECT_FALSE(r.ok());
  }
}

TEST(Checkpoint, BootIdIsReadFromProc) {
  std::string id = read_boot_id();
  EXPECT_EQ(id.size(), 36u) << id;
  std::string dir = temp_dir();
  std::filesystem::create_directories(dir + "/sys/kernel/random");
  std::ofstream(dir + "/sys/kernel/random/boot_id") << "abc\n";
  EXPECT_EQ(read_boot_id(dir), "abc");
  std::filesystem::remove_all(dir);
}

TEST(Checkpointer, WritesAStructuralChangeAtOnceAndLastMetTimesAtMostEveryInterval) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/state.json";
  Checkpointer c(path, "boot-1", std::chrono::seconds(5));
  std::vector<bool> results;
  c.on_write([&](bool ok) { results.push_back(ok); });
  Checkpoint cp = sample();
  const TimePoint t0(std::chrono::seconds(100));
  c.maybe_save(cp.engine, cp.policy, t0);
  EXPECT_EQ(c.writes(), 1u) << "nothing written yet: the first state is a change";
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(1));
  EXPECT_EQ(c.writes(), 1u) << "unchanged: not written again";
  cp.engine.condition_last_met[0] = TimePoint(std::chrono::seconds(101));
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(2));
  EXPECT_EQ(c.writes(), 1u) << "only a last-met time moved, within the interval";
  cp.policy.records.erase(cp.policy.records.begin());  // an eviction ended: structure
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(3));
  EXPECT_EQ(c.writes(), 2u);
  cp.engine.condition_last_met[0] = TimePoint(std::chrono::seconds(108));
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(9));
  EXPECT_EQ(c.writes(), 3u) << "the interval since the last write has passed";
  auto loaded = load_checkpoint(path, "boot-1");
  ASSERT_EQ(loaded.status, CheckpointLoad::Restored);
  EXPECT_EQ(loaded.checkpoint.policy.records.size(), 2u);
  EXPECT_EQ(results, (std::vector<bool>{true, true, true}));
  std::filesystem::remove_all(dir);
}

// Every evaluation offers the state; most (every idle tick) change nothing
// and are recognised without encoding it. Any change inside it still counts.
TEST(Checkpointer, AChangeDeepInsideAnEvictionIsWrittenAndARevertIsNot) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/state.json";
  Checkpointer c(path, "boot-1", std::chrono::seconds(5));
  Checkpoint cp = sample();
  ASSERT_FALSE(cp.policy.records.empty());
  const TimePoint t0(std::chrono::seconds(100));
  c.maybe_save(cp.engine, cp.policy, t0);
  ASSERT_EQ(c.writes(), 1u);
  for (int i = 1; i <= 3; ++i) c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(i));
  EXPECT_EQ(c.writes(), 1u);
  const Checkpoint written = cp;
  cp.policy.records[0].killed = !cp.policy.records[0].killed;
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(4));
  EXPECT_EQ(c.writes(), 2u) << "the victim's killed flag moved: written at once";
  auto loaded = load_checkpoint(path, "boot-1");
  ASSERT_EQ(loaded.status, CheckpointLoad::Restored);
  EXPECT_EQ(loaded.checkpoint.policy.records.at(0).killed, cp.policy.records[0].killed);
  cp.engine.condition_last_met[0] = TimePoint(std::chrono::seconds(104));  // within the interval: held
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(5));
  EXPECT_EQ(c.writes(), 2u);
  c.maybe_save(written.engine, cp.policy, t0 + std::chrono::seconds(6));
  EXPECT_EQ(c.writes(), 2u) << "back to what the file holds";
  cp.policy.records[0].api = EvictionRecord::Api::Confirmed;
  c.maybe_save(written.engine, cp.policy, t0 + std::chrono::seconds(7));
  EXPECT_EQ(c.writes(), 3u) << "the API confirmed an eviction: written at once (a restart would send it again)";
  std::filesystem::remove_all(dir);
}

TEST(Checkpointer, AReclaimBackoffStartingOrEndingIsWrittenAtOnce) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/state.json";
  Checkpointer c(path, "boot-1", std::chrono::seconds(5));
  Checkpoint cp = sample();
  const TimePoint t0(std::chrono::seconds(100));
  c.maybe_save(cp.engine, cp.policy, t0, cp.relief);
  ASSERT_EQ(c.writes(), 1u);
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(1), cp.relief);
  EXPECT_EQ(c.writes(), 1u);
  cp.relief.backoff["/sys/fs/cgroup/kubepods/besteffort/poduid-b"] = TimePoint(std::chrono::seconds(402));
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(2), cp.relief);
  EXPECT_EQ(c.writes(), 2u) << "a cgroup began to back off: within the interval, written anyway";
  auto loaded = load_checkpoint(path, "boot-1");
  ASSERT_EQ(loaded.status, CheckpointLoad::Restored);
  EXPECT_EQ(loaded.checkpoint.relief, cp.relief);
  cp.relief.backoff.clear();
  c.maybe_save(cp.engine, cp.policy, t0 + std::chrono::seconds(3), cp.relief);
  EXPECT_EQ(c.writes(), 3u);
  EXPECT_TRUE(load_checkpoint(path, "boot-1").checkpoint.relief.backoff.empty());
  std::filesystem::remove_all(dir);
}

TEST(Checkpointer, ARestoredCheckpointIsNotWrittenBackUnchanged) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/state.json";
  const Checkpoint cp = sample();
  ASSERT_TRUE(write_file_atomically(path, encode_checkpoint(cp)));
  Checkpointer c(path, "boot-1");
  ASSERT_EQ(c.load().status, CheckpointLoad::Restored);
  c.maybe_save(cp.engine, cp.policy, TimePoint(std::chrono::seconds(1)), cp.relief);
  EXPECT_EQ(c.writes(), 0u);
  std::filesystem::remove_all(dir);
}

TEST(Checkpointer, FailedWritesAreCountedAndReported) {
  // A directory where the file should be: the rename fails.
  const std::string dir = temp_dir();
  std::filesystem::create_directories(dir + "/state.json/occupied");
  Checkpointer c(dir + "/state.json", "boot-1");
  std::vector<bool> results;
  c.on_write([&](bool ok) { results.push_back(ok); });
  const Checkpoint cp = sample();
  EXPECT_FALSE(c.save(cp.engine, cp.policy));
  EXPECT_FALSE(c.save(cp.engine, cp.policy));
  EXPECT_EQ(c.write_failures(), 2u);
  EXPECT_EQ(c.writes(), 0u);
  EXPECT_EQ(results, (std::vector<bool>{false, false}));
  std::filesystem::remove_all(dir);
}

TEST(Checkpointer, AnEmptyPathWritesNothing) {
  Checkpointer c("", "boot-1");
  const Checkpoint cp = sample();
  EXPECT_FALSE(c.enabled());
  EXPECT_TRUE(c.save(cp.engine, cp.policy));
  c.maybe_save(cp.engine, cp.policy, TimePoint(std::chrono::seconds(1)));
  EXPECT_EQ(c.writes(), 0u);
  EXPECT_EQ(c.load().status, CheckpointLoad::Missing);
}

}  // namespace
}  // namespace pressured
