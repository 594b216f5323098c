// The request a pod is ranked by, as the kubelet computes it: its
// GetResourceRequestQuantity over component-helpers' PodRequests. Each test
// is named after the kubelet test (and case) it ports; the kubelet's cases use
// CPU where noted, the formula is the same for every resource, so they are
// walked here with memory and ephemeral-storage, the two resources ranked.
#include <gtest/gtest.h>

#include <string>

#include "pods/pod_json.hpp"

namespace pressured {
namespace {

constexpr uint64_t Mi = 1ULL << 20;

// Parses one pod whose spec is `spec` (a JSON object's members) and returns it.
PodMetadata pod_with(const std::string& spec, const std::string& status = "{}") {
  const std::string doc = R"({"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u"},"spec":{)" + spec +
                          R"(},"status":)" + status + "}";
  auto parsed = pods::parse_pod_documents(doc);
  EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error().message);
  if (!parsed || parsed->pods.size() != 1) {
    ADD_FAILURE() << "not one pod parsed from " << doc;
    return {};
  }
  EXPECT_FALSE(parsed->pods[0].unparsable) << (parsed->errors.empty() ? "" : parsed->errors[0]);
  return parsed->pods[0];
}

std::string mem(const std::string& name, const std::string& request, bool restartable = false) {
  return R"({"name":")" + name + R"(",)" + (restartable ? R"("restartPolicy":"Always",)" : "") +
         R"("resources":{"requests":{"memory":")" + request + R"("}}})";
}

// TestPodResourceRequests "nil options, larger init container"
TEST(PodResourceRequests, LargerInitContainer) {
  auto p = pod_with(R"("initContainers":[)" + mem("i", "4Mi") + R"(],"containers":[)" + mem("c", "1Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 4 * Mi);
}

// TestPodResourceRequests "nil options, larger containers"
TEST(PodResourceRequests, LargerContainers) {
  auto p = pod_with(R"("initContainers":[)" + mem("i", "2Mi") + R"(],"containers":[)" + mem("c1", "2Mi") + "," +
                    mem("c2", "3Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 5 * Mi);
}

// TestPodResourceRequests "restartable init container": sidecar + regular.
TEST(PodResourceRequests, RestartableInitContainer) {
  auto p = pod_with(R"("initContainers":[)" + mem("s", "1Mi", true) + R"(],"containers":[)" + mem("c", "1Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 2 * Mi);
}

// TestPodResourceRequests "multiple restartable init containers":
// max(5, sidecars 3+2+1 + regular 1) = 7.
TEST(PodResourceRequests, MultipleRestartableInitContainers) {
  auto p = pod_with(R"("initContainers":[)" + mem("i1", "5Mi") + "," + mem("s1", "1Mi", true) + "," +
                    mem("s2", "2Mi", true) + "," + mem("s3", "3Mi", true) + R"(],"containers":[)" + mem("c", "1Mi") +
                    "]");
  EXPECT_EQ(p.requests.memory_bytes, 7 * Mi);
}

// TestPodResourceRequests "multiple restartable and regular init containers":
// init-2 needs 5 plus the sidecars started before it (1+2) = 8; the sidecar
// declared after it does not count for it.
TEST(PodResourceRequests, MultipleRestartableAndRegularInitContainers) {
  auto p = pod_with(R"("initContainers":[)" + mem("i1", "5Mi") + "," + mem("s1", "1Mi", true) + "," +
                    mem("s2", "2Mi", true) + "," + mem("i2", "5Mi") + "," + mem("s3", "3Mi", true) +
                    R"(],"containers":[)" + mem("c", "1Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 8 * Mi);
}

// TestPodResourceRequests "restartable-init, init and regular": a sidecar
// declared before a larger init container adds to that container's peak:
// max(10 + 200, 10 + 100) = 210.
TEST(PodResourceRequests, RestartableInitInitAndRegular) {
  auto p = pod_with(R"("initContainers":[)" + mem("s", "10Mi", true) + "," + mem("i", "200Mi") +
                    R"(],"containers":[)" + mem("c", "100Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 210 * Mi);
}

// TestPodResourceRequests "pod overhead included", read through
// GetResourceRequestQuantity (pkg/api/v1/resource): overhead is added to a
// request that is not zero...
TEST(GetResourceRequestQuantity, OverheadAddedToNonZeroRequest) {
  auto p = pod_with(R"("overhead":{"memory":"1Gi","ephemeral-storage":"1Gi"},"containers":[)"
                    R"({"name":"c","resources":{"requests":{"memory":"2Mi","ephemeral-storage":"3Mi"}}}])");
  EXPECT_EQ(p.requests.memory_bytes, 1024 * Mi + 2 * Mi);
  EXPECT_EQ(p.requests.ephemeral_storage_bytes, 1024 * Mi + 3 * Mi);
}

// ...and never to a zero one: a BestEffort pod with a RuntimeClass overhead
// still requests nothing, so it is "over its request" as soon as it uses memory.
TEST(GetResourceRequestQuantity, OverheadNotAddedToZeroRequest) {
  auto p = pod_with(R"("overhead":{"memory":"120Mi"},"containers":[{"name":"c"}])");
  EXPECT_EQ(p.requests.memory_bytes, 0u);
  auto only_cpu = pod_with(R"("overhead":{"memory":"120Mi"},"containers":[)"
                           R"({"name":"c","resources":{"requests":{"cpu":"1"}}}])");
  EXPECT_EQ(only_cpu.requests.memory_bytes, 0u);
}

// Pod-level resources (PodLevelResources, on by default from 1.34): the
// pod-level request replaces the container sum; GetResourceRequestQuantity
// then skips container requests altogether.
TEST(GetResourceRequestQuantity, PodLevelRequestReplacesContainerSum) {
  auto p = pod_with(R"("resources":{"requests":{"memory":"300Mi"}},"containers":[)" + mem("c1", "100Mi") + "," +
                    mem("c2", "50Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 300 * Mi);
}

// A pod with only pod-level requests used to read as request 0 ("over its
// request") and be evicted early.
TEST(GetResourceRequestQuantity, OnlyPodLevelRequests) {
  auto p = pod_with(R"("resources":{"requests":{"memory":"1Gi","cpu":"1"}},"containers":[{"name":"c"}])");
  EXPECT_EQ(p.requests.memory_bytes, 1024 * Mi);
}

// ephemeral-storage is not a pod-level resource: with pod-level resources set
// the kubelet skips the container requests and reads 0 for it.
TEST(GetResourceRequestQuantity, PodLevelResourcesSkipContainerEphemeralStorage) {
  auto p = pod_with(R"("resources":{"requests":{"cpu":"1","memory":"64Mi"}},"containers":[)"
                    R"({"name":"c","resources":{"requests":{"memory":"8Mi","ephemeral-storage":"1Gi"}}}])");
  EXPECT_EQ(p.requests.memory_bytes, 64 * Mi);
  EXPECT_EQ(p.requests.ephemeral_storage_bytes, 0u);
}

// Pod-level requests set for CPU only (no pod-level limits, so nothing is
// defaulted): the memory request is the pod-level one, absent, hence 0.
TEST(GetResourceRequestQuantity, PodLevelCpuOnlyLeavesMemoryZero) {
  auto p = pod_with(R"("resources":{"requests":{"cpu":"1"}},"containers":[)" + mem("c", "100Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 0u);
}

// Pod-level resources naming nothing the feature supports are not pod-level
// resources: the container sum stands.
TEST(GetResourceRequestQuantity, UnsupportedPodLevelResourceIgnored) {
  auto p = pod_with(R"("resources":{"requests":{"ephemeral-storage":"5Gi"}},"containers":[)"
                    R"({"name":"c","resources":{"requests":{"memory":"100Mi","ephemeral-storage":"1Gi"}}}])");
  EXPECT_EQ(p.requests.memory_bytes, 100 * Mi);
  EXPECT_EQ(p.requests.ephemeral_storage_bytes, 1024 * Mi);
}

// The API server's defaulting (defaultPodRequests) for a document that did
// not go through it: with pod-level limits, an unset pod-level request takes
// the containers' aggregate request, or else the pod-level limit.
TEST(GetResourceRequestQuantity, PodLevelRequestDefaultsLikeTheApiServer) {
  auto from_containers = pod_with(R"("resources":{"limits":{"memory":"1Gi"}},"containers":[)" + mem("s", "10Mi") +
                                  "," + mem("c", "100Mi") + "]");
  EXPECT_EQ(from_containers.requests.memory_bytes, 110 * Mi);
  auto from_limit = pod_with(R"("resources":{"limits":{"memory":"1Gi"}},"containers":[{"name":"c"}])");
  EXPECT_EQ(from_limit.requests.memory_bytes, 1024 * Mi);
}

// Overhead goes on top of a pod-level request too (not zero).
TEST(GetResourceRequestQuantity, OverheadOnPodLevelRequest) {
  auto p = pod_with(R"("overhead":{"memory":"20Mi"},"resources":{"requests":{"memory":"100Mi"}},)" +
                    std::string(R"("containers":[{"name":"c"}])"));
  EXPECT_EQ(p.requests.memory_bytes, 120 * Mi);
}

// TestPodResourceRequests "resized, infeasible, but don't use status": the
// eviction manager reads the spec, never status, while a resize is pending.
TEST(PodResourceRequests, ResizedInfeasibleButDontUseStatus) {
  const std::string status = R"({"conditions":[{"type":"PodResizePending","status":"True","reason":"Infeasible"}],)"
                             R"("containerStatuses":[{"name":"c","allocatedResources":{"memory":"2Mi"},)"
                             R"("resources":{"requests":{"memory":"2Mi"}}}]})";
  auto p = pod_with(R"("containers":[)" + mem("c", "4Mi") + "]", status);
  EXPECT_EQ(p.requests.memory_bytes, 4 * Mi);
}

// The container-level request defaults to its limit (API defaulting), for a
// sidecar as for any container.
TEST(PodResourceRequests, SidecarRequestDefaultsToItsLimit) {
  auto p = pod_with(
      R"("initContainers":[{"name":"s","restartPolicy":"Always","resources":{"limits":{"memory":"30Mi"}}}],)"
      R"("containers":[)" +
      mem("c", "10Mi") + "]");
  EXPECT_EQ(p.requests.memory_bytes, 40 * Mi);
}

}  // namespace
}  // namespace pressured
