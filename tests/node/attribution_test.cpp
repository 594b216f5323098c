// Which container of a memory eviction's victim grew, and who was hurt
// (node/attribution.hpp): growth since the reading before first, else the
// container furthest over its request (the kubelet's offending container),
// and the pod's and containers' own memory stall time (v2).
#include "engine/eviction_words.hpp"
#include "node/attribution.hpp"

#include <gtest/gtest.h>

namespace pressured::node {
namespace {

constexpr uint64_t MiB = 1ULL << 20;

ContainerUsage usage(std::string name, uint64_t mib, uint64_t request_mib, std::optional<uint64_t> before_mib = {},
                     double seconds = 10) {
  ContainerUsage u{std::move(name), mib * MiB, request_mib * MiB};
  if (before_mib) {
    u.previous_usage = *before_mib * MiB;
    u.previous_age_seconds = seconds;
  }
  return u;
}

PsiStats psi(double avg10) {
  PsiStats p;
  p.some.avg10 = avg10;
  return p;
}

TEST(Attribution, TheContainerThatGrewMostIsNamedEvenUnderItsRequest) {
  // app is furthest over its request but stood still; cache grew 300 MiB and is still under its request.
  auto g = grown_container({usage("app", 900, 500, 900), usage("cache", 400, 512, 100, 12.5), usage("side", 60, 64, 50)});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name, "cache");
  EXPECT_EQ(g->basis, ContainerGrowth::Basis::Growth);
  EXPECT_EQ(g->bytes, static_cast<int64_t>(300 * MiB));
  EXPECT_DOUBLE_EQ(g->seconds, 12.5);
  EXPECT_EQ(g->usage, 400 * MiB);
  EXPECT_EQ(g->request, 512 * MiB);
}

TEST(Attribution, WithoutAReadingBeforeTheContainerFurthestOverItsRequestIsNamed) {
  auto g = grown_container({usage("app", 700, 500), usage("side", 300, 64), usage("idle", 10, 64)});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name, "side") << "236 MiB over beats 200 MiB over";
  EXPECT_EQ(g->basis, ContainerGrowth::Basis::OverRequest);
  EXPECT_EQ(g->bytes, static_cast<int64_t>(236 * MiB));
}

TEST(Attribution, GrowthBelowAMebibyteIsNoiseNotGrowth) {
  ContainerUsage jitter = usage("app", 100, 500, 100);
  jitter.usage += 512 * 1024;
  auto g = grown_container({jitter, usage("side", 80, 64, 80)});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->name, "side");
  EXPECT_EQ(g->basis, ContainerGrowth::Basis::OverRequest);
}

TEST(Attribution, NoneGrewAndNoneOverItsRequestNamesNone) {
  EXPECT_FALSE(grown_container({usage("app", 100, 500, 120), usage("side", 10, 64)}));
  EXPECT_FALSE(grown_container({}));
}

TEST(Attribution, TheEvictionGetsItsContainersTheOneThatGrewAndThePodsStall) {
  Pod pod;
  pod.uid = "u";
  pod.containers = {ContainerSpec{"app", "aaa", false, 100 * MiB, 0}, ContainerSpec{"log", "bbb", false, 64 * MiB, 0}};
  pod.memory_pressure = psi(12.5);
  ContainerMemory a{"aaa", 400 * MiB, 420 * MiB};
  a.previous_working_set_bytes = 150 * MiB;
  a.previous_age_seconds = 8;
  a.memory_pressure = psi(30.25);
  ContainerMemory b{"bbb", 70 * MiB, 70 * MiB};
  b.previous_working_set_bytes = 70 * MiB;
  b.previous_age_seconds = 8;
  b.memory_pressure = psi(0);
  Eviction e;
  attribute_containers(e, pod, {a, b});
  ASSERT_EQ(e.containers.size(), 2u);
  EXPECT_EQ(e.containers[0].previous_usage, 150 * MiB);
  ASSERT_TRUE(e.grew);
  EXPECT_EQ(e.grew->name, "app");
  EXPECT_EQ(e.memory_pressure, psi(12.5));
  EXPECT_EQ(attribution_sentences(e),
            " Grew: container app grew by 250Mi in 8.0s to 400Mi (request 100Mi). Hurt: memory stall (some avg10): "
            "pod 12.50%, app 30.25%, log 0.00%.");
  const auto j = attribution_json(e, true);
  EXPECT_EQ(j["grew"]["container"], "app");
  EXPECT_EQ(j["grew"]["basis"], "growth");
  EXPECT_EQ(j["grew"]["bytes"], 250 * MiB);
  EXPECT_EQ(j["memoryStall"]["pod"], 12.5);
  EXPECT_EQ(j["memoryStall"]["containers"]["app"], 30.25);
  EXPECT_TRUE(attribution_json(e, false).contains("memory_stall"));
}

TEST(Attribution, V1HasNoStallAndNothingToSayIsSaidAsNothing) {
  Eviction e;
  e.containers = {usage("app", 700, 500)};
  e.grew = grown_container(e.containers);
  EXPECT_EQ(attribution_sentences(e),
            " Grew: container app is 200Mi over its request (700Mi of 500Mi; no reading before to tell growth).");
  EXPECT_FALSE(attribution_json(e, false).contains("memory_stall"));
  Eviction none;
  EXPECT_EQ(attribution_sentences(none), "");
  EXPECT_TRUE(attribution_json(none, false).empty());
}

}  // namespace
}  // namespace pressured::node
