#include "engine/simulator.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "engine_helpers.hpp"

namespace pressured {
namespace {

using namespace pressured::testing;

EvictionConfig mem_hard(double bytes) { return config({hard(Signal::MemoryAvailable, qty(bytes))}); }

std::string run(const std::string& timeline, const EvictionConfig& c, std::string* error = nullptr) {
  std::istringstream in(timeline);
  std::ostringstream out;
  auto r = simulate_stream(in, out, c);
  if (error) *error = r.ok() ? "" : r.error().message;
  else EXPECT_TRUE(r.ok()) << r.error().message;
  return out.str();
}

TEST(SimulatorQos, DerivedAsTheKubeletDoes) {
  using O = std::optional<double>;
  EXPECT_EQ(derive_qos(O{}, O{}, O{}, O{}), QosClass::BestEffort);
  EXPECT_EQ(derive_qos(O{0}, O{0}, O{}, O{}), QosClass::BestEffort) << "zero counts as unset";
  EXPECT_EQ(derive_qos(O{}, O{kGi}, O{}, O{}), QosClass::Burstable);
  EXPECT_EQ(derive_qos(O{}, O{}, O{1}, O{kGi}), QosClass::Guaranteed) << "requests default to limits";
  EXPECT_EQ(derive_qos(O{1}, O{kGi}, O{1}, O{kGi}), QosClass::Guaranteed);
  EXPECT_EQ(derive_qos(O{0.5}, O{kGi}, O{1}, O{kGi}), QosClass::Burstable) << "cpu request below limit";
  EXPECT_EQ(derive_qos(O{}, O{}, O{}, O{kGi}), QosClass::Burstable) << "no cpu limit";
  EXPECT_EQ(derive_qos(O{1}, O{}, O{}, O{}), QosClass::Burstable);
}

TEST(Simulator, HardEvictionAndConditionLines) {
  std::string out = run(R"({"t":0,"kind":"observe","signals":{"memory.available":{"available":"2Gi","capacity":"16Gi"}}}
{"t":0,"kind":"pod","uid":"u1","name":"web","namespace":"shop","qosClass":"Burstable","requests":{"memory":"1Gi"},"usage":{"memory":"1536Mi"}}
{"t":1,"kind":"tick"}
{"t":2.5,"kind":"observe","signals":{"memory.available":{"available":"50Mi"}}}
{"t":2.5,"kind":"tick"}
)",
                        mem_hard(100 * kMi));
  EXPECT_EQ(out,
            R"({"t":2.5,"kind":"condition","condition":"MemoryPressure","status":true}
{"t":2.5,"kind":"evict","uid":"u1","name":"web","namespace":"shop","signal":"memory.available","threshold":"hard","gracePeriodSeconds":0,"why":{"victim":{"qos":"Burstable","overRequest":true,"priority":0,"usage":1610612736,"request":1073741824,"amount":536870912,"zeroUsage":false,"daemonsetLast":false},"runnerUp":null,"decidedBy":null}}
)");
}

TEST(Simulator, PodUpdatesMergeAndRequestsDefaultToLimits) {
  Simulator sim(mem_hard(kGi));
  std::vector<std::string> out;
  ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"pod","uid":"g","name":"db","limits":{"cpu":"1","memory":"2Gi"},"usage":{"memory":"1Gi"}})", out).ok());
  // Update only usage: the rest is kept.
  ASSERT_TRUE(sim.feed(R"({"t":1,"kind":"pod","uid":"g","usage":{"memory":"3Gi"}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":1,"kind":"pod","uid":"b","requests":{"memory":"100Mi"},"usage":{"memory":"10Mi"}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":2,"kind":"observe","signals":{"memory.available":{"available":1000,"capacity":"16Gi"}}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":3,"kind":"tick"})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":4,"kind":"tick"})", out).ok());
  ASSERT_EQ(out.size(), 3u);
  // b is Burstable (derived) and goes first; g is Guaranteed (derived), over its 2Gi request.
  EXPECT_NE(out[1].find(R"("uid":"b")"), std::string::npos) << out[1];
  EXPECT_NE(out[2].find(R"("uid":"g","name":"db")"), std::string::npos) << out[2];
}

TEST(Simulator, PodDeletedEndsTerminatingAndUnknownUidsAreErrors) {
  Simulator sim(mem_hard(kGi));
  std::vector<std::string> out;
  ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"observe","signals":{"memory.available":{"available":"1Mi","capacity":"16Gi"}}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"pod","uid":"a","usage":{"memory":"1Mi"}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":1,"kind":"tick"})", out).ok());
  ASSERT_EQ(out.size(), 2u);  // condition, evict
  out.clear();
  ASSERT_TRUE(sim.feed(R"({"t":1.5,"kind":"tick"})", out).ok());
  EXPECT_EQ(out, std::vector<std::string>{R"({"t":1.5,"kind":"noCandidates","signal":"memory.available"})"})
      << "a is terminating";
  ASSERT_TRUE(sim.feed(R"({"t":2,"kind":"podDeleted","uid":"a"})", out).ok());
  out.clear();
  ASSERT_TRUE(sim.feed(R"({"t":2,"kind":"pod","uid":"a","usage":{"memory":"1Mi"}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":2,"kind":"tick"})", out).ok());
  ASSERT_EQ(out.size(), 1u) << "a new pod with that uid is a candidate again";
  EXPECT_NE(out[0].find(R"("kind":"evict","uid":"a")"), std::string::npos) << out[0];
  ASSERT_TRUE(sim.feed(R"({"t":2.5,"kind":"podDeleted","uid":"a"})", out).ok());
  auto r = sim.feed(R"({"t":3,"kind":"podDeleted","uid":"a"})", out);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unknown pod uid \"a\""), std::string::npos);
}

TEST(Simulator, NoCandidatesLine) {
  std::string out = run(R"({"t":0,"kind":"observe","signals":{"memory.available":{"available":"1Mi","capacity":"1Gi"}}}
{"t":0,"kind":"pod","uid":"k","critical":true,"usage":{"memory":"500Mi"}}
{"t":0,"kind":"tick"}
)",
                        mem_hard(kGi));
  EXPECT_EQ(out, R"({"t":0,"kind":"condition","condition":"MemoryPressure","status":true}
{"t":0,"kind":"noCandidates","signal":"memory.available"}
)");
}

TEST(Simulator, SignalsCanBeUnobservedWithNull) {
  std::string out = run(R"({"t":0,"kind":"observe","signals":{"memory.available":{"available":"1Mi","capacity":"1Gi"}}}
{"t":0,"kind":"tick"}
{"t":1,"kind":"observe","signals":{"memory.available":null}}
{"t":1,"kind":"tick"}
)",
                        mem_hard(kGi));
  EXPECT_EQ(out, R"({"t":0,"kind":"condition","condition":"MemoryPressure","status":true}
{"t":0,"kind":"noCandidates","signal":"memory.available"}
{"t":1,"kind":"condition","condition":"MemoryPressure","status":false}
)");
}

TEST(Simulator, BlankLinesAndCommentsAreSkipped) {
  std::string out = run("\n# a comment\n   \n{\"t\":0,\"kind\":\"tick\"}\n", mem_hard(kGi));
  EXPECT_EQ(out, "");
}

TEST(Simulator, MalformedLineStopsTheReplayWithItsLineNumber) {
  std::string error;
  std::string out = run(R"({"t":0,"kind":"observe","signals":{"memory.available":{"available":"1Mi","capacity":"1Gi"}}}
{"t":0,"kind":"tick"}
{"t":1,"kind":"tick"
{"t":2,"kind":"podDeleted","uid":"x"}
{"t":3,"kind":"tick"}
)",
                        mem_hard(kGi), &error);
  EXPECT_EQ(error.rfind("line 3: malformed JSON", 0), 0u) << error;
  // What came before line 3 was printed; nothing after it was processed.
  EXPECT_EQ(out, R"({"t":0,"kind":"condition","condition":"MemoryPressure","status":true}
{"t":0,"kind":"noCandidates","signal":"memory.available"}
)");
}

TEST(Simulator, InputErrorsAreSpecific) {
  struct Case {
    const char* line;
    const char* message;
  };
  const Case cases[] = {
      {R"([1,2])", "must be a JSON object"},
      {R"({"kind":"tick"})", "missing \"t\""},
      {R"({"t":"5","kind":"tick"})", "\"t\" must be a number"},
      {R"({"t":-1,"kind":"tick"})", "must not be negative"},
      {R"({"t":1e12,"kind":"tick"})", "too large"},
      {R"({"t":1})", "missing \"kind\""},
      {R"({"t":1,"kind":"explode"})", "unknown kind \"explode\""},
      {R"({"t":1,"kind":"tick","extra":1})", "unknown key \"extra\""},
      {R"({"t":1,"kind":"observe"})", "needs a \"signals\" object"},
      {R"({"t":1,"kind":"observe","signals":{"memory.free":{"available":1}}})", "unknown signal \"memory.free\""},
      {R"({"t":1,"kind":"observe","signals":{"memory.available":{"available":"1Gb"}}})", "'1Gb' is not a valid quantity"},
      {R"({"t":1,"kind":"observe","signals":{"memory.available":{"capacity":"1Gi"}}})", "needs \"available\""},
      {R"({"t":1,"kind":"observe","signals":{"memory.pressure.some.avg10":{"value":101}}})", "at most 100"},
      {R"({"t":1,"kind":"observe","signals":{"memory.available":{"available":1,"avail":2}}})", "unknown key \"avail\""},
      {R"({"t":1,"kind":"pod"})", "non-empty \"uid\""},
      {R"({"t":1,"kind":"pod","uid":"a","qosClass":"Gold"})", "qosClass \"Gold\""},
      {R"({"t":1,"kind":"pod","uid":"a","priority":"high"})", "priority must be an integer"},
      {R"({"t":1,"kind":"pod","uid":"a","usage":{"memory":"-1Gi"}})", "usage.memory must not be negative"},
      {R"({"t":1,"kind":"pod","uid":"a","usage":{"rss":1}})", "unknown key \"rss\""},
      {R"({"t":1,"kind":"pod","uid":"a","requests":{"gpu":1}})", "unknown key \"gpu\""},
      {R"({"t":1,"kind":"pod","uid":"a","critical":"yes"})", "critical must be true or false"},
      {R"({"t":1,"kind":"pod","uid":"a","terminationGracePeriodSeconds":-3})", "must not be negative"},
  };
  for (const auto& c : cases) {
    Simulator sim(mem_hard(kGi));
    std::vector<std::string> out;
    auto r = sim.feed(c.line, out);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << c.line << " -> " << r.error().message;
  }
}

TEST(Simulator, TimeMustNotGoBackwards) {
  Simulator sim(mem_hard(kGi));
  std::vector<std::string> out;
  ASSERT_TRUE(sim.feed(R"({"t":5,"kind":"tick"})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":5,"kind":"tick"})", out).ok());
  auto r = sim.feed(R"({"t":4.5,"kind":"tick"})", out);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("goes backwards"), std::string::npos);
}

TEST(Simulator, ABadObserveLineChangesNothing) {
  Simulator sim(mem_hard(kGi));
  std::vector<std::string> out;
  ASSERT_FALSE(
      sim.feed(R"({"t":0,"kind":"observe","signals":{"memory.available":{"available":"1Mi"},"bogus":{}}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"tick"})", out).ok());
  EXPECT_TRUE(out.empty()) << "memory.available from the rejected line must not have been applied";
}

// A request past 2^64 bytes saturates; the float-to-int cast was UB (UBSan
// aborts the test) and read as 0 in release builds.
TEST(Simulator, HugeRequestsSaturateInsteadOfWrapping) {
  Simulator sim(mem_hard(kGi));
  std::vector<std::string> out;
  ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"pod","uid":"h","requests":{"memory":1e30},"usage":{"memory":"1Gi"}})", out).ok());
  ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"pod","uid":"s","requests":{"memory":"1e30"},"usage":{"memory":"1Gi"}})", out).ok());
}

// The local ephemeral-storage fields: the pod spec's shapes and the walk's
// parts; a pod over its emptyDir sizeLimit is evicted with the rule's name.
TEST(SimulatorLocalStorage, FieldsAndTheEvictLine) {
  std::string out = run(
      R"({"t":0,"kind":"pod","uid":"a","name":"a","namespace":"ns","volumes":[{"name":"cache","emptyDir":{"sizeLimit":"4Mi"}}],"containers":[{"name":"app","limits":{"ephemeral-storage":"1Gi"}}],"storage":{"emptyDir":{"cache":"5Mi"},"logs":{"app":"1Mi"},"writableLayers":{"app":"1Mi"}}}
{"t":0,"kind":"tick"}
)",
      config({}));
  EXPECT_EQ(out,
            R"({"t":0,"kind":"evict","uid":"a","name":"a","namespace":"ns","signal":"emptydirfs.limit","threshold":"hard",)"
            R"("gracePeriodSeconds":0,"message":"Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". ",)"
            R"("usage":5242880,"limit":4194304,"why":{"victim":{"qos":"BestEffort","overRequest":true,"priority":0,)"
            R"("usage":7340032,"request":0,"amount":7340032,"zeroUsage":false,"daemonsetLast":false},"runnerUp":null,)"
            R"("decidedBy":null}})"
            "\n");
  // Within its limits, or not walked (no "storage"): nothing.
  EXPECT_EQ(run(R"({"t":0,"kind":"pod","uid":"a","volumes":[{"name":"cache","emptyDir":{"sizeLimit":"4Mi"}}],"storage":{"emptyDir":{"cache":"4Mi"}}}
{"t":0,"kind":"pod","uid":"b","volumes":[{"name":"cache","emptyDir":{"sizeLimit":"4Mi"}}],"usage":{"ephemeral-storage":"1Gi"}}
{"t":0,"kind":"tick"}
)",
                config({})),
            "");
  // The feature gate off: nothing either.
  EvictionConfig off = config({});
  off.local_storage_capacity_isolation = false;
  EXPECT_EQ(run(R"({"t":0,"kind":"pod","uid":"a","volumes":[{"name":"cache","emptyDir":{"sizeLimit":"4Mi"}}],"storage":{"emptyDir":{"cache":"5Mi"}}}
{"t":0,"kind":"tick"}
)",
                off),
            "");
}

TEST(SimulatorLocalStorage, InputErrorsAreSpecificAndChangeNothing) {
  struct Case {
    const char* line;
    const char* message;
  };
  const Case cases[] = {
      {R"({"t":1,"kind":"pod","uid":"a","containers":{"app":1}})", "containers must be a list"},
      {R"({"t":1,"kind":"pod","uid":"a","containers":[{"limits":{}}]})", "containers[0] needs a non-empty \"name\""},
      {R"({"t":1,"kind":"pod","uid":"a","containers":[{"name":"x","limits":{"memory":1}}]})", "unknown key \"memory\""},
      {R"({"t":1,"kind":"pod","uid":"a","containers":[{"name":"x","limits":{"ephemeral-storage":"-1Gi"}}]})",
       "containers[0].limits.ephemeral-storage must not be negative"},
      {R"({"t":1,"kind":"pod","uid":"a","volumes":[{"name":"v"}]})", "volumes[0] needs an \"emptyDir\" object"},
      {R"({"t":1,"kind":"pod","uid":"a","volumes":[{"name":"v","emptyDir":{"medium":"Memory"}}]})",
       "unknown key \"medium\""},
      {R"({"t":1,"kind":"pod","uid":"a","volumes":[{"name":"v","emptyDir":{"sizeLimit":"4Mb"}}]})", "'4Mb'"},
      {R"({"t":1,"kind":"pod","uid":"a","storage":{"tmp":{}}})", "unknown key \"tmp\""},
      {R"({"t":1,"kind":"pod","uid":"a","storage":{"logs":["app"]}})", "storage.logs must be an object"},
      {R"({"t":1,"kind":"pod","uid":"a","storage":{"emptyDir":{"v":-5}}})", "storage.emptyDir.v must not be negative"},
      {R"({"t":1,"kind":"pod","uid":"a","usage":{"ephemeral-storage":1},"storage":{}})", "are both given"},
  };
  for (const auto& c : cases) {
    Simulator sim(config({}));
    std::vector<std::string> out;
    // A pod over its limit is there before: a bad line must leave it as it was.
    ASSERT_TRUE(sim.feed(R"({"t":0,"kind":"pod","uid":"a","volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Mi"}}],"storage":{"emptyDir":{"v":"2Mi"}}})", out).ok());
    auto r = sim.feed(c.line, out);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << c.line << " -> " << r.error().message;
    ASSERT_TRUE(sim.feed(R"({"t":2,"kind":"tick"})", out).ok());
    ASSERT_EQ(out.size(), 1u) << c.line;
    EXPECT_NE(out[0].find("emptydirfs.limit"), std::string::npos) << out[0];
  }
}

}  // namespace
}  // namespace pressured
