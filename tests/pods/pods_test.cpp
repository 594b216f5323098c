// Pod metadata: Pod/PodList JSON and YAML, QoS derivation, critical/static/
// DaemonSet, file and directory sources, the kubelet source over HTTP (a
// local one-shot server), and the merge into the observer with mismatches.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <functional>
#include <thread>

#include "fakes/fake_node.hpp"
#include "pods/pod_json.hpp"
#include "pressured/engine.hpp"
#include "metrics/exposition.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::exported;

constexpr uint64_t MiB = 1ULL << 20;

const char* kPodList = R"({
  "kind": "PodList", "apiVersion": "v1", "metadata": {},
  "items": [
    {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u-web",
                  "labels": {"app": "web", "app.kubernetes.io/part-of": "shop"},
                  "ownerReferences": [{"kind": "ReplicaSet", "name": "web"}]},
     "spec": {"priority": 0, "terminationGracePeriodSeconds": 45,
              "containers": [
                {"name": "app", "resources": {"requests": {"memory": "128Mi", "cpu": "100m"},
                                               "limits": {"memory": "256Mi"}}},
                {"name": "sidecar", "resources": {"requests": {"memory": "64Mi", "ephemeral-storage": "1Gi"}}}]},
     "status": {"phase": "Running", "qosClass": "Burstable"}},
    {"metadata": {"name": "agent-x", "namespace": "kube-system", "uid": "u-ds",
                  "ownerReferences": [{"kind": "DaemonSet", "name": "agent"}]},
     "spec": {"priorityClassName": "system-node-critical",
              "containers": [{"name": "a", "resources": {"limits": {"memory": "100Mi", "cpu": "1"}}}]},
     "status": {"phase": "Running"}},
    {"metadata": {"name": "etcd-node1", "namespace": "kube-system", "uid": "u-static",
                  "annotations": {"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": "abc"}},
     "spec": {"priority": 2000001000, "containers": [{"name": "etcd"}]},
     "status": {"phase": "Running"}},
    {"metadata": {"name": "batch", "namespace": "default", "uid": "u-be"},
     "spec": {"containers": [{"name": "b"}],
              "initContainers": [{"name": "init", "resources": {"requests": {"memory": "1Gi"}}}]},
     "status": {"phase": "Succeeded"}},
    {"kind": "Service", "metadata": {"name": "not-a-pod"}}
  ]})";

TEST(PodJson, PodListFromTheKubelet) {
  // An operator's file: a class name alone makes a pod critical there.
  auto r = pods::parse_pod_documents(kPodList, pods::DocumentFormat::Auto, pods::PodTrust::File);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->pods.size(), 4u);
  EXPECT_EQ(r->skipped, 1u);
  const PodMetadata& web = r->pods[0];
  EXPECT_EQ(web.uid, "u-web");
  EXPECT_EQ(web.name, "web-1");
  EXPECT_EQ(web.namespace_, "shop");
  EXPECT_EQ(web.qos, QosClass::Burstable);
  EXPECT_EQ(web.requests.memory_bytes, 192 * MiB);
  EXPECT_EQ(web.requests.ephemeral_storage_bytes, 1024 * MiB);
  EXPECT_EQ(web.limits.memory_bytes, 0u) << "sidecar has no limit: pod unlimited";
  EXPECT_EQ(web.termination_grace_period_seconds, 45);
  EXPECT_FALSE(web.critical);
  EXPECT_FALSE(web.daemonset);
  EXPECT_EQ(web.phase, "Running");

  const PodMetadata& ds = r->pods[1];
  EXPECT_TRUE(ds.daemonset);
  EXPECT_TRUE(ds.critical) << "system-node-critical";
  EXPECT_EQ(ds.priority, 2000001000);
  EXPECT_EQ(ds.qos, QosClass::Guaranteed) << "derived: limits only, requests default to limits";
  EXPECT_EQ(ds.requests.memory_bytes, 100 * MiB);
  EXPECT_EQ(ds.limits.memory_bytes, 100 * MiB);

  const PodMetadata& st = r->pods[2];
  EXPECT_TRUE(st.static_pod);
  EXPECT_TRUE(st.critical);
  EXPECT_EQ(st.qos, QosClass::BestEffort);

  const PodMetadata& be = r->pods[3];
  EXPECT_EQ(be.requests.memory_bytes, 1024 * MiB) << "max(sum(containers), max(init))";
  EXPECT_EQ(be.qos, QosClass::Burstable);
  EXPECT_EQ(be.phase, "Succeeded");
}

TEST(PodJson, YamlMultiDocumentAndMirrorPod) {
  const char* yaml = R"(apiVersion: v1
kind: Pod
metadata:
  name: kube-proxy-abc
  namespace: kube-system
  uid: 1111-2222
  annotations:
    kubernetes.io/config.mirror: "deadbeef"
spec:
  priority: 100
  terminationGracePeriodSeconds: 5
  containers:
  - name: p
    resources:
      requests: {memory: 50Mi, cpu: 100m}
      limits: {memory: 50Mi, cpu: 100m}
---
apiVersion: v1
kind: Pod
metadata: {name: plain, uid: "3333"}
spec:
  containers: [{name: c}]
---
)";
  auto r = pods::parse_pod_documents(yaml);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->pods.size(), 2u);
  EXPECT_TRUE(r->pods[0].static_pod);
  EXPECT_TRUE(r->pods[0].critical);
  EXPECT_EQ(r->pods[0].priority, 100);
  EXPECT_EQ(r->pods[0].termination_grace_period_seconds, 5);
  EXPECT_EQ(r->pods[0].qos, QosClass::Guaranteed);
  EXPECT_EQ(r->pods[1].namespace_, "default");
  EXPECT_EQ(r->pods[1].qos, QosClass::BestEffort);
  EXPECT_EQ(r->pods[1].termination_grace_period_seconds, 30);
}

TEST(PodJson, ErrorsAreClear) {
  // A bad quantity costs that pod's resource only: it is kept, marked, and
  // the reason is reported.
  auto bad = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x","name":"n"},
    "spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"12Qi"}}}]}})");
  ASSERT_TRUE(bad) << bad.error().message;
  ASSERT_EQ(bad->pods.size(), 1u);
  EXPECT_FALSE(bad->pods[0].unparsable);
  EXPECT_TRUE(bad->pods[0].memory_spec_unparsable);
  EXPECT_EQ(bad->skipped, 0u);
  ASSERT_EQ(bad->errors.size(), 1u);
  EXPECT_NE(bad->errors[0].find("memory"), std::string::npos);
  auto syntax = pods::parse_pod_documents("{\"kind\": ");
  ASSERT_FALSE(syntax);
  EXPECT_NE(syntax.error().message.find("syntax"), std::string::npos);
  auto prio = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x"},"spec":{"priority":"high"}})");
  ASSERT_TRUE(prio);
  ASSERT_EQ(prio->pods.size(), 1u);
  EXPECT_TRUE(prio->pods[0].unparsable);
  auto nouid = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"name":"x"},"spec":{}})");
  ASSERT_TRUE(nouid);
  EXPECT_EQ(nouid->pods.size(), 0u);
  EXPECT_EQ(nouid->skipped, 1u);
}

// metadata.labels: read sorted, shared, and bounded. A label that cannot be
// kept costs that label (the pod's labels are marked incomplete, the reason
// reported), never the pod.
TEST(PodJson, LabelsAreReadSortedAndBounded) {
  auto r = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x","name":"n",
    "labels":{"tier":"db","app.kubernetes.io/name":"pg","empty":""}},"spec":{}})");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->pods.size(), 1u);
  ASSERT_NE(r->pods[0].labels, nullptr);
  using Entries = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(r->pods[0].labels->entries, (Entries{{"app.kubernetes.io/name", "pg"}, {"empty", ""}, {"tier", "db"}}));
  EXPECT_FALSE(r->pods[0].labels->incomplete);
  EXPECT_TRUE(r->errors.empty());

  // YAML: scalars are strings, as the API server would store them.
  auto y = pods::parse_pod_documents("kind: Pod\nmetadata:\n  uid: y\n  labels: {app: web, replicas: 3}\nspec: {}\n");
  ASSERT_TRUE(y) << y.error().message;
  ASSERT_NE(y->pods.at(0).labels, nullptr);
  EXPECT_EQ(y->pods[0].labels->entries, (Entries{{"app", "web"}, {"replicas", "3"}}));

  // Not strings, over the API's own limits: left out, named.
  const std::string long_value(64, 'v');
  auto bad = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x","name":"n","namespace":"ns",
    "labels":{"ok":"1","num":5,"long":")" + long_value + R"("}},"spec":{}})");
  ASSERT_TRUE(bad) << bad.error().message;
  ASSERT_EQ(bad->pods.size(), 1u);
  EXPECT_FALSE(bad->pods[0].unparsable) << "a label never costs the pod";
  ASSERT_NE(bad->pods[0].labels, nullptr);
  EXPECT_EQ(bad->pods[0].labels->entries, (Entries{{"ok", "1"}}));
  EXPECT_TRUE(bad->pods[0].labels->incomplete);
  ASSERT_EQ(bad->errors.size(), 2u);
  EXPECT_NE(bad->errors[0].find("pod ns/n metadata.labels.long: "), std::string::npos) << bad->errors[0];
  EXPECT_NE(bad->errors[1].find("metadata.labels.num: not a string"), std::string::npos) << bad->errors[1];

  auto not_map = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x","labels":["a"]},"spec":{}})");
  ASSERT_TRUE(not_map);
  ASSERT_NE(not_map->pods.at(0).labels, nullptr);
  EXPECT_TRUE(not_map->pods[0].labels->entries.empty());
  EXPECT_TRUE(not_map->pods[0].labels->incomplete);
  ASSERT_EQ(not_map->errors.size(), 1u);
  EXPECT_NE(not_map->errors[0].find("metadata.labels: not a map"), std::string::npos) << not_map->errors[0];
}

TEST(PodJson, LabelsPastTheCountOrSizeBoundAreLeftOutAndSaid) {
  // 100 labels: the first 64 (by key) are kept.
  std::string many;
  for (int i = 0; i < 100; ++i) many += fmt::format(R"({}"k{:03}":"v")", i ? "," : "", i);
  auto r = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x","labels":{)" + many + "}},\"spec\":{}}");
  ASSERT_TRUE(r) << r.error().message;
  const auto& l = *r->pods.at(0).labels;
  ASSERT_EQ(l.entries.size(), pods::kMaxPodLabels);
  EXPECT_EQ(l.entries.front().first, "k000");
  EXPECT_EQ(l.entries.back().first, "k063");
  EXPECT_TRUE(l.incomplete);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_NE(r->errors[0].find("100 labels, 36 left out"), std::string::npos) << r->errors[0];

  // 40 labels of 63-byte values and 40-byte keys: 4 KiB holds 39 of them.
  std::string big;
  for (int i = 0; i < 40; ++i) big += fmt::format(R"({}"{:040}":"{}")", i ? "," : "", i, std::string(63, 'v'));
  auto b = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"x","labels":{)" + big + "}},\"spec\":{}}");
  ASSERT_TRUE(b) << b.error().message;
  const auto& bl = *b->pods.at(0).labels;
  std::size_t bytes = 0;
  for (const auto& [k, v] : bl.entries) bytes += k.size() + v.size();
  EXPECT_LE(bytes, pods::kMaxPodLabelBytes);
  EXPECT_EQ(bl.entries.size(), pods::kMaxPodLabelBytes / (40 + 63));
  EXPECT_TRUE(bl.incomplete);
}

TEST(PodJson, LocalStorageLimitsPerContainerAndEmptyDir) {
  auto r = pods::parse_pod_documents(R"(
kind: Pod
metadata: {uid: u1, name: web, namespace: shop}
spec:
  initContainers:
  - {name: init, resources: {limits: {ephemeral-storage: 3Gi}}}
  containers:
  - {name: app, resources: {limits: {ephemeral-storage: 1Gi}}}
  - {name: side, resources: {limits: {ephemeral-storage: 512Mi}}}
  - {name: nolimit}
  volumes:
  - {name: cache, emptyDir: {sizeLimit: 100Mi}}
  - {name: scratch, emptyDir: {}}
  - {name: cfg, configMap: {name: x}}
status:
  containerStatuses:
  - {name: side, containerID: "containerd://abc123"}
  - {name: app, containerID: "cri-o://def456"}
)");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->pods.size(), 1u);
  const LocalStorageSpec& ls = r->pods[0].local_storage;
  ASSERT_EQ(ls.containers.size(), 3u);
  EXPECT_EQ(ls.containers[0].name, "app");
  EXPECT_EQ(ls.containers[0].id, "def456");
  EXPECT_EQ(ls.containers[0].ephemeral_storage_limit_bytes, 1024 * MiB);
  EXPECT_EQ(ls.containers[1].id, "abc123");
  EXPECT_EQ(ls.containers[1].ephemeral_storage_limit_bytes, 512 * MiB);
  EXPECT_EQ(ls.containers[2].id, "");
  EXPECT_FALSE(ls.containers[2].ephemeral_storage_limit_bytes.has_value());
  ASSERT_EQ(ls.empty_dirs.size(), 2u);  // configMap is not an emptyDir
  EXPECT_EQ(ls.empty_dirs[0].name, "cache");
  EXPECT_EQ(ls.empty_dirs[0].size_limit_bytes, 100 * MiB);
  EXPECT_EQ(ls.empty_dirs[1].name, "scratch");
  EXPECT_FALSE(ls.empty_dirs[1].size_limit_bytes.has_value());
  // The kubelet adds up the limits that are set (1Gi + 512Mi), at least the
  // largest init container's (3Gi), even though one container has none...
  EXPECT_EQ(ls.pod_limit_bytes, 3072 * MiB);
  // ...while the ranking's pod limit needs every container limited.
  EXPECT_EQ(r->pods[0].limits.ephemeral_storage_bytes, 0u);

  auto none = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"u2"},"spec":{"containers":[{"name":"c"}]}})");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->pods[0].local_storage.pod_limit_bytes.has_value());
  EXPECT_TRUE(none->pods[0].local_storage.empty_dirs.empty());
}

TEST(PodJson, BadLocalStorageLimitsAreErrorsNotDefaults) {
  // A bad quantity makes the pod's storage unknown (never evicted for
  // storage); a volume without a name, the whole pod.
  auto parse_one = [](const char* text, bool whole = false) {
    auto r = pods::parse_pod_documents(text);
    EXPECT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->pods.size(), 1u);
    EXPECT_EQ(r->pods[0].unparsable, whole);
    EXPECT_EQ(r->pods[0].storage_spec_unparsable, !whole);
    return r->errors.empty() ? std::string() : r->errors[0];
  };
  auto e = parse_one(R"({"kind":"Pod","metadata":{"uid":"x","name":"n"},
    "spec":{"volumes":[{"name":"cache","emptyDir":{"sizeLimit":"1Gx"}}]}})");
  EXPECT_NE(e.find("volume cache.emptyDir.sizeLimit"), std::string::npos) << e;
  e = parse_one(R"({"kind":"Pod","metadata":{"uid":"x","name":"n"},
    "spec":{"volumes":[{"name":"cache","emptyDir":{"sizeLimit":"-1Gi"}}]}})");
  EXPECT_NE(e.find("must not be negative"), std::string::npos) << e;
  e = parse_one(R"({"kind":"Pod","metadata":{"uid":"x","name":"n"},
    "spec":{"containers":[{"name":"c","resources":{"limits":{"ephemeral-storage":"-5"}}}]}})");
  EXPECT_NE(e.find("container c.limits.ephemeral-storage: must not be negative"), std::string::npos) << e;
  e = parse_one(R"({"kind":"Pod","metadata":{"uid":"x","name":"n"},
    "spec":{"containers":[{"name":"c","resources":{"limits":{"ephemeral-storage":"lots"}}}]}})");
  EXPECT_NE(e.find("ephemeral-storage"), std::string::npos) << e;
  e = parse_one(R"({"kind":"Pod","metadata":{"uid":"x","name":"n"},"spec":{"volumes":[{"emptyDir":{}}]}})", true);
  EXPECT_NE(e.find("without a name"), std::string::npos) << e;
}

TEST(PodJson, OneBadPodIsSkippedNotTheList) {
  auto r = pods::parse_pod_documents(R"({"kind":"PodList","items":[
    {"metadata":{"uid":"good","name":"web"},"spec":{"containers":[{"name":"c"}]}},
    {"metadata":{"uid":"bad","name":"odd","namespace":"kube-system"},
     "spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"12Qi"}}}]}},
    {"metadata":{"uid":"crit"},"spec":{"priorityClassName":"system-node-critical"}},
    {"metadata":{"uid":"worse","name":"odder"},"spec":{"priority":"high"}}]})",
                                     pods::DocumentFormat::Auto, pods::PodTrust::File);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->pods.size(), 4u);
  EXPECT_FALSE(r->pods[0].unparsable);
  EXPECT_FALSE(r->pods[1].unparsable);
  EXPECT_TRUE(r->pods[1].memory_spec_unparsable);
  EXPECT_EQ(r->pods[1].namespace_, "kube-system");
  EXPECT_TRUE(r->pods[2].critical);
  EXPECT_TRUE(r->pods[3].unparsable);
  EXPECT_EQ(r->skipped, 1u);
}

TEST(PodJson, NumbersOutOfRangeNeitherWrapNorCrash) {
  // 1e300 cast to int64 is undefined behaviour (UBSan aborts the test).
  auto prio = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"p"},"spec":{"priority":1e300}})");
  ASSERT_TRUE(prio);
  EXPECT_TRUE(prio->pods[0].unparsable);
  auto req = pods::parse_pod_documents(R"({"kind":"Pod","metadata":{"uid":"r"},"spec":{"containers":[
    {"name":"c","resources":{"requests":{"memory":1e30}}}]}})");
  ASSERT_TRUE(req);
  EXPECT_FALSE(req->pods[0].unparsable);
  EXPECT_EQ(req->pods[0].requests.memory_bytes, UINT64_MAX) << "saturates, never 0";
  auto big = pods::parse_pod_documents("kind: Pod\nmetadata: {uid: q}\nspec:\n  containers:\n  - name: c\n"
                                       "    resources: {requests: {memory: 1e30}}\n");
  ASSERT_TRUE(big) << big.error().message;
  EXPECT_EQ(big->pods[0].requests.memory_bytes, UINT64_MAX);
}

TEST(PodJson, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep;
  for (int i = 0; i < 20000; ++i) deep += R"({"kind":"List","items":[)";
  deep += "{}";
  for (int i = 0; i < 20000; ++i) deep += "]}";
  auto r = pods::parse_pod_documents(deep);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nested"), std::string::npos) << r.error().message;
  std::string deep_uid = R"({"kind":"Pod","metadata":{"uid":)" + std::string(20000, '[') + std::string(20000, ']') + "}}";
  EXPECT_FALSE(pods::parse_pod_documents(deep_uid));
  std::string yaml = "kind: List\nitems: ";
  for (int i = 0; i < 5000; ++i) yaml += "[";
  for (int i = 0; i < 5000; ++i) yaml += "]";
  EXPECT_FALSE(pods::parse_pod_documents(yaml, pods::DocumentFormat::Yaml));
}

// Runs `fn` in a child bounded in time and resident memory, so a parser that
// hangs or grows fails the test instead of eating the machine. (RLIMIT_AS is
// useless under AddressSanitizer, which reserves terabytes of shadow.)
// Returns the child's exit code, or -1 when it had to be killed.
int run_bounded(const std::function<int()>& fn, std::chrono::milliseconds limit, uint64_t max_rss_kib,
                std::string* why) {
  pid_t child = ::fork();
  if (child == 0) ::_exit(fn());
  auto end = std::chrono::steady_clock::now() + limit;
  while (true) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::ifstream st("/proc/" + std::to_string(child) + "/status");
    std::string line;
    uint64_t rss = 0;
    while (std::getline(st, line)) {
      if (line.rfind("VmRSS:", 0) == 0) rss = std::strtoull(line.c_str() + 6, nullptr, 10);
    }
    const bool late = std::chrono::steady_clock::now() > end;
    if (late || rss > max_rss_kib) {
      *why = late ? "still running after the time limit" : "resident memory over the limit: " + std::to_string(rss) + " KiB";
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// yaml-cpp 0.7's LoadAll() never returns on a stray ',' and grows by about
// 200 MB a second: the pod file path must fail fast instead.
TEST(PodYaml, StrayCommaFailsFastInsteadOfHanging) {
  for (std::string text : {std::string(","), std::string("kind: Pod\nmetadata: {uid: a}\n---\n,\n"),
                           std::string("- a\n,"), std::string("a: b\n, c\n")}) {
    std::string why;
    int rc = run_bounded(
        [&] {
          auto r = pods::parse_pod_documents(text, pods::DocumentFormat::Yaml);
          return r ? 0 : 3;
        },
        std::chrono::seconds(10), 512 * 1024, &why);
    EXPECT_NE(rc, -1) << "parsing " << ::testing::PrintToString(text) << ": " << why;
  }
  auto r = pods::parse_pod_documents(",", pods::DocumentFormat::Yaml);
  EXPECT_FALSE(r);
}

TEST(PodYaml, AliasBombsAndDuplicateKeysAreRefused) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  char prev = 'a';
  for (char c = 'b'; c <= 'k'; ++c, ++prev) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", *" : "*") + prev;
    bomb += "]\n";
  }
  std::string why;
  int rc = run_bounded([&] { return pods::parse_pod_documents(bomb, pods::DocumentFormat::Yaml) ? 0 : 3; },
                       std::chrono::seconds(10), 512 * 1024, &why);
  EXPECT_EQ(rc, 3) << why;
  auto dup = pods::parse_pod_documents("kind: Pod\nmetadata: {uid: a, uid: b}\n", pods::DocumentFormat::Yaml);
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.error().message.find("duplicate"), std::string::npos) << dup.error().message;
}

TEST(PodSources, FileAndDirectory) {
  testing::TempDir dir;
  testing::write_text(dir.path() + "/pods/a.json", kPodList);
  testing::write_text(dir.path() + "/pods/b.yaml", "kind: Pod\nmetadata: {name: y, uid: u-y}\nspec: {}\n");
  testing::write_text(dir.path() + "/pods/ignored.txt", "not parsed");
  PodSourceConfig c;
  c.kind = PodSourceKind::File;
  c.path = dir.path() + "/pods";
  auto src = make_pod_metadata_source(c);
  ASSERT_TRUE(src);
  EXPECT_EQ((*src)->current()->size(), 0u);
  ASSERT_TRUE((*src)->refresh());
  auto m = (*src)->current();
  EXPECT_EQ(m->size(), 5u);
  EXPECT_TRUE(m->count("u-y"));
  EXPECT_EQ((*src)->stats().skipped_objects, 1u);
  // A broken file: refresh fails, the previous map stays.
  testing::write_text(dir.path() + "/pods/c.json", "{broken");
  auto r = (*src)->refresh();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("c.json"), std::string::npos);
  EXPECT_EQ((*src)->current()->size(), 5u);
  EXPECT_EQ((*src)->stats().refresh_failures, 1u);
  // Background thread: start, request, stop; never blocks current().
  (*src)->start(std::chrono::milliseconds(20));
  (*src)->request_refresh();
  for (int i = 0; i < 1000 && (*src)->stats().refresh_failures < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*src)->stop();
  EXPECT_GE((*src)->stats().refresh_failures, 2u);

  PodSourceConfig bad;
  bad.kind = PodSourceKind::File;
  EXPECT_FALSE(make_pod_metadata_source(bad));
}

// An HTTP server on 127.0.0.1 answering `connections` connections, one
// after the other, each with `body` and `status`.
class OneShotServer {
 public:
  OneShotServer(int status, std::string body, int delay_ms = 0, int connections = 1) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 1);
    thread_ = std::thread([this, status, body = std::move(body), delay_ms, connections] {
      for (int i = 0; i < connections; ++i) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[4096];
        ssize_t n = ::recv(c, buf, sizeof buf - 1, 0);
        request_ = std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        std::string resp = "HTTP/1.1 " + std::to_string(status) +
                           " X\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                           "\r\nConnection: close\r\n\r\n" + body;
        (void)!::send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/pods"; }
  const std::string& request() const { return request_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::string request_;
};

// A kubelet pod source pointed at `server`; null (the test failed) when the config is refused.
std::unique_ptr<PodMetadataSource> kubelet_source(const OneShotServer& server) {
  PodSourceConfig c;
  c.kind = PodSourceKind::Kubelet;
  c.kubelet_url = server.url();
  auto src = make_pod_metadata_source(c);
  EXPECT_TRUE(src) << src.error().message;
  return src ? std::move(*src) : nullptr;
}

TEST(PodSources, KubeletOverHttp) {
  OneShotServer server(200, kPodList);
  auto src = kubelet_source(server);
  ASSERT_TRUE(src);
  auto r = src->refresh();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(src->current()->size(), 4u);
  EXPECT_NE(server.request().find("GET /pods"), std::string::npos);
  EXPECT_EQ(src->describe(), "kubelet:" + server.url());
}

// A polled list that did not change is not parsed again: the map (the same
// shared map, so nothing downstream re-indexes it) and its stats stay, and
// the fetch counts as a success. Any byte that differs is parsed.
TEST(PodSources, AnUnchangedInputIsNotParsedAgain) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/pods.json";
  testing::write_text(path, kPodList);
  PodSourceConfig c;
  c.kind = PodSourceKind::File;
  c.path = path;
  auto src = make_pod_metadata_source(c);
  ASSERT_TRUE(src);
  ASSERT_TRUE((*src)->refresh());
  auto first = (*src)->current();
  ASSERT_EQ(first->size(), 4u);
  ASSERT_TRUE((*src)->refresh());
  EXPECT_EQ((*src)->current(), first) << "an unchanged file was parsed into a new map";
  EXPECT_EQ((*src)->stats().refreshes, 2u);
  EXPECT_EQ((*src)->stats().unchanged_refreshes, 1u);

  // The same length, one name changed: parsed.
  std::string changed = kPodList;
  auto at = changed.find("web-1");
  ASSERT_NE(at, std::string::npos);
  changed[at] = 'z';
  testing::write_text(path, changed);
  ASSERT_TRUE((*src)->refresh());
  auto second = (*src)->current();
  ASSERT_NE(second, first);
  EXPECT_EQ(second->at("u-web").name, "zeb-1");
  EXPECT_EQ((*src)->stats().unchanged_refreshes, 1u);

  // Broken, then back to what the map was parsed from: the failure is
  // counted and cleared, and the kept map is the right one, not re-parsed.
  testing::write_text(path, "{broken");
  ASSERT_FALSE((*src)->refresh());
  EXPECT_FALSE((*src)->stats().last_error.empty());
  testing::write_text(path, changed);
  ASSERT_TRUE((*src)->refresh());
  EXPECT_EQ((*src)->current(), second);
  EXPECT_TRUE((*src)->stats().last_error.empty());
  EXPECT_EQ((*src)->stats().unchanged_refreshes, 2u);
  EXPECT_EQ((*src)->stats().refresh_failures, 1u);

  // Back to the first bytes: a different input from the current map's, parsed.
  testing::write_text(path, kPodList);
  ASSERT_TRUE((*src)->refresh());
  EXPECT_NE((*src)->current(), second);
  EXPECT_EQ((*src)->stats().unchanged_refreshes, 2u);
}

TEST(PodSources, AnUnchangedKubeletAnswerIsNotParsedAgain) {
  OneShotServer server(200, kPodList, 0, 2);
  auto src = kubelet_source(server);
  ASSERT_TRUE(src);
  auto r = src->refresh();
  ASSERT_TRUE(r) << r.error().message;
  auto first = src->current();
  r = src->refresh();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(src->current(), first);
  EXPECT_EQ(src->stats().refreshes, 2u);
  EXPECT_EQ(src->stats().unchanged_refreshes, 1u);
}

TEST(PodSources, KubeletErrorsAndTimeout) {
  {
    OneShotServer server(401, "Unauthorized");
    auto src = kubelet_source(server);
    ASSERT_TRUE(src);
    auto r = src->refresh();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("401"), std::string::npos);
  }
  {
    OneShotServer server(200, kPodList, /*delay_ms=*/1500);
    PodSourceConfig c;
    c.kind = PodSourceKind::Kubelet;
    c.kubelet_url = server.url();
    c.timeout = std::chrono::milliseconds(200);
    auto src = make_pod_metadata_source(c);
    ASSERT_TRUE(src);
    // The server answers a good pod list after 1.5 s: only the 200 ms timeout makes this fail.
    auto r = (*src)->refresh();
    EXPECT_FALSE(r) << "the timeout was not honoured";
  }
  PodSourceConfig bad;
  bad.kind = PodSourceKind::Kubelet;
  bad.kubelet_url = "ftp://x";
  EXPECT_FALSE(make_pod_metadata_source(bad));
  bad.kubelet_url = "https://127.0.0.1:10250/pods";
  bad.token_file = "/nonexistent/token";
  auto e = make_pod_metadata_source(bad);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("token"), std::string::npos);
}

// Labels only advise plugins: a source configured without them (no
// plugins.directory) drops every pod's labels at the parse, and says nothing
// about labels it did not keep.
TEST(PodSources, LabelsAreDroppedUnlessPluginsReadThem) {
  testing::TempDir dir;
  testing::write_text(dir.path() + "/pods.json",
                      R"({"kind":"PodList","items":[{"metadata":{"name":"a","namespace":"ns","uid":"u-a",)"
                      R"("labels":{"app":"web","bad":7}},"spec":{"containers":[{"name":"c"}]},)"
                      R"("status":{"phase":"Running","qosClass":"BestEffort"}}]})");
  for (bool keep : {false, true}) {
    PodSourceConfig pc;
    pc.kind = PodSourceKind::File;
    pc.path = dir.path() + "/pods.json";
    pc.keep_labels = keep;
    auto src = make_pod_metadata_source(pc);
    ASSERT_TRUE(src) << src.error().message;
    ASSERT_TRUE((*src)->refresh());
    auto cur = (*src)->current();
    ASSERT_NE(cur, nullptr);
    const auto& a = cur->at("u-a");
    if (keep) {
      ASSERT_NE(a.labels, nullptr);
      EXPECT_EQ(a.labels->entries.size(), 1u);
      EXPECT_TRUE(a.labels->incomplete);
    } else {
      EXPECT_EQ(a.labels, nullptr) << "no plugin reads them";
    }
  }
  auto dropped = pods::parse_pod_documents(R"({"metadata":{"uid":"u","labels":{"n":1}},"spec":{}})",
                                           pods::DocumentFormat::Json, pods::PodTrust::File, pods::PodLabelUse::Drop);
  ASSERT_TRUE(dropped);
  EXPECT_TRUE(dropped->errors.empty()) << dropped->errors.at(0);
  auto kept = pods::parse_pod_documents(R"({"metadata":{"uid":"u","labels":{"n":1}},"spec":{}})",
                                        pods::DocumentFormat::Json, pods::PodTrust::File, pods::PodLabelUse::Keep);
  ASSERT_TRUE(kept);
  EXPECT_FALSE(kept->errors.empty()) << "a label that is not a string is said when labels are kept";
}

TEST(PodSources, MergedIntoTheObserverWithMismatchesCounted) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.add_pod("u-web", QosClass::Burstable, testing::FakePodMemory{300 * MiB, 250 * MiB, 50 * MiB, 0, 0});
  node.add_pod("u-ds", QosClass::Guaranteed, testing::FakePodMemory{50 * MiB, 50 * MiB, 0, 0, 0});
  node.add_pod("u-unknown", QosClass::BestEffort, testing::FakePodMemory{10 * MiB, 10 * MiB, 0, 0, 0});
  testing::write_text(node.root() + "/pods.json", kPodList);
  PodSourceConfig pc;
  pc.kind = PodSourceKind::File;
  pc.path = node.root() + "/pods.json";
  pc.keep_labels = true;  // as with plugins.directory set
  auto src = make_pod_metadata_source(pc);
  ASSERT_TRUE(src);
  std::shared_ptr<PodMetadataSource> md = std::move(*src);
  ASSERT_TRUE(md->refresh());
  auto obs = make_node_observer(node.config(), md);
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(1)));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 3u);
  for (const auto& p : snap->pods) {
    if (p.uid == "u-web") {
      EXPECT_TRUE(p.metadata_known);
      EXPECT_EQ(p.name, "web-1");
      EXPECT_EQ(p.requests.memory_bytes, 192 * MiB);
      EXPECT_EQ(p.termination_grace_period_seconds, 45);
      // The snapshot points at the source's one copy of the labels.
      ASSERT_NE(p.labels, nullptr);
      EXPECT_EQ(p.labels, md->current()->at("u-web").labels);
      EXPECT_EQ(p.labels->entries.size(), 2u);
    } else if (p.uid == "u-ds") {
      EXPECT_EQ(p.labels, nullptr) << "a pod without labels carries no label block";
      EXPECT_TRUE(p.daemonset);
      EXPECT_TRUE(p.critical);
    } else {
      EXPECT_FALSE(p.metadata_known);
      EXPECT_EQ(p.qos, QosClass::BestEffort) << "QoS from the cgroup path";
      EXPECT_EQ(p.requests.memory_bytes, 0u);
    }
  }
  EXPECT_EQ(exported((*obs)->counters(), "pressured_observer_pods_without_metadata"), 1);
  // u-static is Running in metadata but has no cgroup; u-be Succeeded does not count.
  EXPECT_EQ(exported((*obs)->counters(), "pressured_observer_metadata_without_cgroup"), 1);
  // The source answered without u-unknown: it might be a static pod without
  // a mirror, or one the source lags; the kubelet would not evict it either.
  EXPECT_EQ(exported((*obs)->counters(), "pressured_pods_unevictable_without_metadata"), 1);
}

// A configured source with no good answer (startup, 401, TLS, ...): pods known
// only from cgroups might be critical or static, so none is ever evicted.
TEST(PodSources, PodsWithoutMetadataAreNeverEvictedWhileTheSourceFails) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);
  node.add_pod("u-crit", QosClass::Guaranteed, testing::FakePodMemory{300 * MiB, 250 * MiB, 0, 0, 0});
  node.add_pod("u-be", QosClass::BestEffort, testing::FakePodMemory{10 * MiB, 10 * MiB, 0, 0, 0});
  OneShotServer server(401, "Unauthorized");
  PodSourceConfig pc;
  pc.kind = PodSourceKind::Kubelet;
  pc.kubelet_url = server.url();
  auto src = make_pod_metadata_source(pc);
  ASSERT_TRUE(src);
  std::shared_ptr<PodMetadataSource> md = std::move(*src);
  ASSERT_FALSE(md->refresh());
  auto obs = make_node_observer(node.config(), md);
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(1)));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 2u);
  EvictionConfig ec;
  for (const auto& p : snap->pods) {
    EXPECT_TRUE(p.metadata_unavailable) << p.uid;
    EXPECT_TRUE(never_evicted(p, ec)) << p.uid;
  }
  EXPECT_TRUE(rank_pods(snap->pods, StarvedResource::Memory, ec).empty());
  EXPECT_EQ(exported((*obs)->counters(), "pressured_pods_unevictable_without_metadata"), 2);

  // An answer listing one pod unparsably: that pod stays protected, the rest
  // of the list is used.
  testing::write_text(node.root() + "/pods.json", R"({"kind":"PodList","items":[
    {"metadata":{"uid":"u-be","name":"batch"},"spec":{"containers":[{"name":"c"}]}},
    {"metadata":{"uid":"u-crit","name":"etcd"},"spec":{"priority":"x"}}]})");
  pc.kind = PodSourceKind::File;
  pc.path = node.root() + "/pods.json";
  auto file_src = make_pod_metadata_source(pc);
  ASSERT_TRUE(file_src);
  std::shared_ptr<PodMetadataSource> fmd = std::move(*file_src);
  ASSERT_TRUE(fmd->refresh());
  auto obs2 = make_node_observer(node.config(), fmd);
  ASSERT_TRUE(obs2);
  snap = (*obs2)->observe(TimePoint(std::chrono::seconds(2)));
  ASSERT_TRUE(snap);
  auto ranked = rank_pods(snap->pods, StarvedResource::Memory, ec);
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0]->uid, "u-be");
  EXPECT_EQ(exported((*obs2)->counters(), "pressured_pods_unevictable_without_metadata"), 1);
}

}  // namespace
}  // namespace pressured
