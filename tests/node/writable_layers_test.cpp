// Writable container layers in pod ephemeral storage, on fake trees: fake pod
// and container cgroups, fake <proc_root>/<pid>/mountinfo files in the
// kernel's format, fake upper dirs below a fake runtime root.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "fakes/fake_node.hpp"
#include "node/tree_usage.hpp"
#include "config/load.hpp"
#include "engine/local_storage.hpp"
#include "node/top_view.hpp"
#include "node/writable_layers.hpp"
#include "pressured/observer.hpp"

namespace pressured {
namespace {

using testing::write_text;

// As the kernel writes a path into mountinfo (seq_escape with ", \t\n\\").
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\\') {
      char b[8];
      std::snprintf(b, sizeof b, "\\%03o", static_cast<unsigned char>(c));
      out += b;
    } else {
      out += c;
    }
  }
  return out;
}

// A containerd container's mountinfo (containerd 1.7, kernel 6.x), with the
// overlay's directories replaced by `upper`/`lower` and the rest verbatim.
std::string containerd_mountinfo(const std::string& upper, const std::string& lower, const std::string& work) {
  return "1520 1416 0:254 / / rw,relatime master:582 - overlay overlay rw,lowerdir=" + escape(lower) +
         ",upperdir=" + escape(upper) + ",workdir=" + escape(work) +
         "\n"
         "1521 1520 0:259 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n"
         "1522 1520 0:260 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
         "1523 1522 0:261 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5,mode=620,ptmxmode=666\n"
         "1525 1520 0:245 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
         "1526 1525 0:29 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw,nsdelegate,memory_recursiveprot\n"
         "1527 1520 254:1 /var/lib/kubelet/pods/0aa1/etc-hosts /etc/hosts rw,relatime - ext4 /dev/vda rw\n"
         "1530 1520 0:244 / /var/run/secrets/kubernetes.io/serviceaccount ro,relatime - tmpfs tmpfs rw,size=65536k\n";
}

// This machine's own mountinfo lines (a host process: "/" is ext4).
const char* kHostMountinfo =
    "21 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
    "24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334524k,nr_inodes=3083631,mode=755\n";

using testing::allocated;
using testing::tree_usage;

TEST(MountOptions, UpperdirIsUnescapedAndCommaSafe) {
  using node::mount_option_value;
  EXPECT_EQ(mount_option_value("rw,lowerdir=/l,upperdir=/u/fs,workdir=/w", "upperdir"), "/u/fs");
  EXPECT_EQ(mount_option_value("rw,lowerdir=/l,upperdir=/u/fs,workdir=/w", "workdir"), "/w");
  EXPECT_EQ(mount_option_value("rw,lowerdir=/l,workdir=/w", "upperdir"), std::nullopt);
  // A comma, a space and a backslash inside the value are octal escapes.
  EXPECT_EQ(mount_option_value("rw,upperdir=/a\\054b\\040c\\134d,workdir=/w", "upperdir"), "/a,b c\\d");
  // "upperdir" as a prefix of another key or inside a value does not match.
  EXPECT_EQ(mount_option_value("rw,upperdirx=/no,lowerdir=/x/upperdir=/no", "upperdir"), std::nullopt);
  EXPECT_EQ(node::unescape_mount_text("/x\\011y\\012z"), "/x\ty\nz");
  EXPECT_EQ(node::unescape_mount_text("/trailing\\04"), "/trailing\\04") << "an incomplete escape stays";
}

TEST(MountOptions, OverlayRootUpperdirFromRealLines) {
  const std::string up = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/312/fs";
  EXPECT_EQ(node::overlay_root_upperdir(containerd_mountinfo(up, "/var/lib/containerd/s/298/fs", "/w")), up);
  // A space in the path comes back from its \040.
  EXPECT_EQ(node::overlay_root_upperdir(containerd_mountinfo("/r/my layer/fs", "/l", "/w")), "/r/my layer/fs");
  // A host process: "/" is ext4.
  EXPECT_EQ(node::overlay_root_upperdir(kHostMountinfo), std::nullopt);
  // An overlay mounted elsewhere (this machine's line from `mount -t overlay`) is not the root.
  EXPECT_EQ(node::overlay_root_upperdir(std::string(kHostMountinfo) +
                                        "65 43 0:39 / /tmp/tmp.lLCUz6I5u0/m rw,relatime - overlay overlay "
                                        "rw,lowerdir=/tmp/tmp.lLCUz6I5u0/l,upperdir=/tmp/tmp.lLCUz6I5u0/u,"
                                        "workdir=/tmp/tmp.lLCUz6I5u0/w,uuid=on\n"),
            std::nullopt);
  // A read-only overlay (no upperdir) has no writable layer.
  EXPECT_EQ(node::overlay_root_upperdir("1 0 0:40 / / ro,relatime - overlay overlay ro,lowerdir=/a:/b\n"), std::nullopt);
  // Stacked on "/": the topmost (last) mount wins.
  EXPECT_EQ(node::overlay_root_upperdir(containerd_mountinfo("/r/fs", "/l", "/w") +
                                        "1600 1520 0:300 / / rw,relatime - tmpfs tmpfs rw\n"),
            std::nullopt);
  EXPECT_EQ(node::overlay_root_upperdir("1 0 0:300 / / rw,relatime - tmpfs tmpfs rw\n" +
                                        containerd_mountinfo("/r/fs", "/l", "/w")),
            "/r/fs");
  EXPECT_EQ(node::overlay_root_upperdir(""), std::nullopt);
  EXPECT_EQ(node::overlay_root_upperdir("garbage line\n"), std::nullopt);
}

TEST(MountOptions, PathUnder) {
  EXPECT_TRUE(node::path_under("/var/lib/containerd/a", "/var/lib/containerd"));
  EXPECT_TRUE(node::path_under("/var/lib/containerd", "/var/lib/containerd"));
  EXPECT_FALSE(node::path_under("/var/lib/containerd2/a", "/var/lib/containerd"));
  EXPECT_FALSE(node::path_under("/var/lib", "/var/lib/containerd"));
  EXPECT_FALSE(node::path_under("", "/x"));
}

// A fake node with a runtime root, pods whose containers point at fake procs.
class LayerNode {
 public:
  explicit LayerNode(CgroupVersion v = CgroupVersion::V1, CgroupDriver d = CgroupDriver::Cgroupfs) : node(v, d) {
    runtime_root = node.root() + "/var/lib/containerd";
    testing::mkdirs(runtime_root);
  }
  std::string snapshot(int n) const {
    return runtime_root + "/io.containerd.snapshotter.v1.overlayfs/snapshots/" + std::to_string(n);
  }
  // A container cgroup below `pod_dir` with `procs` as its cgroup.procs.
  std::string container(const std::string& pod_dir, const std::string& name, const std::string& procs) {
    std::string dir = pod_dir + "/" + name;
    testing::mkdirs(dir);
    write_text(dir + "/cgroup.procs", procs);
    return dir;
  }
  // <proc_root>/<pid>/mountinfo for a containerd container with `upper`.
  void proc(int pid, const std::string& upper) {
    write_text(node.root() + "/proc/" + std::to_string(pid) + "/mountinfo",
               containerd_mountinfo(upper, snapshot(1) + "/fs", upper + "/../work"));
  }
  testing::FakeNode node;
  std::string runtime_root;
};

constexpr uint64_t MiB = 1ULL << 20;

TEST(WritableLayers, CountedPerPodWithFailuresByReason) {
  LayerNode n;
  const testing::FakePodMemory mem{MiB, MiB, 0, 0, 0};
  // Pod a: an app container with 3 files in its layer, and the pause container (empty layer).
  std::string pa = n.node.add_pod("u-a", QosClass::Burstable, mem, "pause0");
  const std::string up_app = n.snapshot(12) + "/fs", up_pause = n.snapshot(13) + "/fs";
  write_text(up_app + "/tmp/a.bin", std::string(100000, 'a'));
  write_text(up_app + "/tmp/b.bin", std::string(20000, 'b'));
  write_text(up_app + "/etc/c.conf", "c\n");
  testing::mkdirs(up_pause);
  write_text(pa + "/pause0/cgroup.procs", "101\n");
  n.proc(101, up_pause);
  n.container(pa, "app1", "202\n");
  n.proc(202, up_app);
  // Logs of pod a, to check the three parts add up.
  write_text(n.node.root() + "/var/log/pods/shop_a_u-a/app/0.log", std::string(5000, 'l'));

  // Pod b: one good container plus one of each failure.
  std::string pb = n.node.add_pod("u-b", QosClass::BestEffort, mem, "good");
  const std::string up_space = n.snapshot(20) + "/my layer,x";  // escaped \040 and \054 in mountinfo
  write_text(up_space + "/data", std::string(4096 * 3, 'd'));
  write_text(pb + "/good/cgroup.procs", "301\n");
  n.proc(301, up_space);
  n.container(pb, "empty", "");                      // no pid
  n.container(pb, "gone", "302\n");                  // pid exited: no /proc/302
  n.container(pb, "exiting", "303\n");               // exited while mountinfo was read: empty read
  write_text(n.node.root() + "/proc/303/mountinfo", "");
  n.container(pb, "outside", "304\n");               // upper dir outside the runtime root
  write_text(n.node.root() + "/elsewhere/upper/big", std::string(200000, 'o'));
  n.proc(304, n.node.root() + "/elsewhere/upper");
  n.container(pb, "symlinked", "305\n");             // below the root by name, outside by realpath
  testing::mkdirs(n.snapshot(30));
  ASSERT_EQ(::symlink((n.node.root() + "/elsewhere/upper").c_str(), (n.snapshot(30) + "/fs").c_str()), 0);
  n.proc(305, n.snapshot(30) + "/fs");
  n.container(pb, "hostroot", "306\n");              // "/" is not an overlay
  write_text(n.node.root() + "/proc/306/mountinfo", kHostMountinfo);
  n.container(pb, "shared", "307\n");                // same upper dir as pod a's app: counted once
  n.proc(307, up_app);
  n.container(pb, "missing", "308\n");               // upper dir below the root but not there
  n.proc(308, n.snapshot(99) + "/fs");
  n.container(pb, "second-pid", "309\n310\n");       // first pid gone, the second one works
  const std::string up_second = n.snapshot(40) + "/fs";
  write_text(up_second + "/x", std::string(8192, 'x'));
  n.proc(310, up_second);

  auto src = make_pod_storage_source(n.node.config());
  src->walk_now(TimePoint(std::chrono::seconds(7)));

  auto a = src->lookup("u-a");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->complete);
  const auto& ba = a->breakdown;
  EXPECT_TRUE(ba.writable_layers_measured);
  EXPECT_EQ(ba.containers, 2u);
  EXPECT_EQ(ba.writable_layers, 2u);
  EXPECT_EQ(ba.unresolved_containers, 0u);
  auto [app_bytes, app_inodes] = tree_usage(up_app);
  auto [pause_bytes, pause_inodes] = tree_usage(up_pause);
  EXPECT_EQ(app_inodes, 6u);  // fs, tmp, a.bin, b.bin, etc, c.conf
  EXPECT_EQ(ba.writable_layers_bytes, app_bytes + pause_bytes);
  EXPECT_EQ(ba.writable_layers_inodes, app_inodes + pause_inodes);
  EXPECT_GE(ba.writable_layers_bytes, 120000u) << "the files' data is counted";
  auto [log_bytes, log_inodes] = tree_usage(n.node.root() + "/var/log/pods/shop_a_u-a");
  EXPECT_EQ(ba.logs_bytes, log_bytes);
  // Layer by layer, named by the container's runtime id.
  ASSERT_EQ(ba.container_layers.size(), 2u);
  for (const auto& l : ba.container_layers) {
    if (l.name == "app1") EXPECT_EQ(l.bytes, app_bytes);
    else EXPECT_EQ(l.name, "pause0");
  }
  ASSERT_EQ(ba.container_logs.size(), 1u);
  EXPECT_EQ(ba.container_logs[0].name, "app");
  EXPECT_EQ(ba.container_logs[0].bytes, tree_usage(n.node.root() + "/var/log/pods/shop_a_u-a/app").first);
  EXPECT_EQ(ba.logs_inodes, log_inodes);
  EXPECT_EQ(a->bytes, ba.logs_bytes + ba.empty_dir_bytes + ba.writable_layers_bytes);
  EXPECT_EQ(a->inodes, ba.logs_inodes + ba.empty_dir_inodes + ba.writable_layers_inodes);

  auto b = src->lookup("u-b");
  ASSERT_TRUE(b);
  const auto& bb = b->breakdown;
  EXPECT_EQ(bb.containers, 10u);
  EXPECT_EQ(bb.writable_layers, 2u);  // good + second-pid
  auto [space_bytes, space_inodes] = tree_usage(up_space);
  auto [second_bytes, second_inodes] = tree_usage(up_second);
  EXPECT_EQ(bb.writable_layers_bytes, space_bytes + second_bytes) << "outside/symlinked/shared not counted";
  EXPECT_EQ(bb.writable_layers_inodes, space_inodes + second_inodes);
  EXPECT_EQ(bb.unresolved_containers, 7u);  // all but good, second-pid and shared
  EXPECT_EQ(b->bytes, bb.writable_layers_bytes);

  auto st = src->stats().writable_layers;
  EXPECT_TRUE(st.measured);
  EXPECT_EQ(st.runtime_root, std::filesystem::canonical(n.runtime_root).string());
  EXPECT_EQ(st.containers, 12u);
  EXPECT_EQ(st.layers, 4u);
  EXPECT_EQ(st.shared, 1u);
  auto count = [&](LayerFailure f) { return st.unresolved[static_cast<std::size_t>(f)]; };
  EXPECT_EQ(count(LayerFailure::NoPid), 1u);
  EXPECT_EQ(count(LayerFailure::PidVanished), 2u);  // gone, exiting
  EXPECT_EQ(count(LayerFailure::OutsideRuntimeRoot), 2u);  // outside, symlinked
  EXPECT_EQ(count(LayerFailure::NoOverlayRoot), 1u);
  EXPECT_EQ(count(LayerFailure::LayerNotFound), 1u);
  EXPECT_EQ(count(LayerFailure::PermissionDenied), 0u);
  EXPECT_EQ(st.unresolved_total(), 7u);

  // Walked again after the app container's layer grew: the cache follows.
  write_text(up_app + "/tmp/more.bin", std::string(50000, 'm'));
  src->walk_now(TimePoint(std::chrono::seconds(8)));
  auto a2 = src->lookup("u-a");
  ASSERT_TRUE(a2);
  auto [app_bytes2, app_inodes2] = tree_usage(up_app);
  EXPECT_EQ(a2->breakdown.writable_layers_bytes, app_bytes2 + pause_bytes);
  EXPECT_EQ(a2->breakdown.writable_layers_inodes, app_inodes + 1 + pause_inodes);
  EXPECT_EQ(a2->measured_at, TimePoint(std::chrono::seconds(8)));
}

// The kubelet's local storage limits end to end on a fake node: pod specs
// from a metadata file, usage from the walker (per volume, per container),
// the rules on the observer's snapshot.
TEST(LocalStorageLimits, EachRuleOnAFakeTree) {
  LayerNode n;
  const testing::FakePodMemory mem{MiB, MiB, 0, 0, 0};
  const std::string logs = n.node.root() + "/var/log/pods/", vols = n.node.root() + "/var/lib/kubelet/pods/";
  const std::string ed = "/volumes/kubernetes.io~empty-dir/";
  // u-ed: emptyDir "cache" (sizeLimit 100Ki) holds 200 kB; "scratch" has no limit.
  n.node.add_pod("u-ed", QosClass::BestEffort, mem);
  write_text(vols + "u-ed" + ed + "cache/blob", std::string(200000, 'c'));
  write_text(vols + "u-ed" + ed + "scratch/blob", std::string(400000, 's'));
  // u-ctr: container "app" (limit 100Ki) writes 150 kB in its layer, a little in its logs.
  std::string pc = n.node.add_pod("u-ctr", QosClass::Burstable, mem, "app2");
  const std::string up = n.snapshot(50) + "/fs";
  write_text(up + "/tmp/junk", std::string(150000, 'j'));
  write_text(pc + "/app2/cgroup.procs", "401\n");
  n.proc(401, up);
  write_text(logs + "shop_ctr_u-ctr/app/0.log", std::string(1000, 'l'));
  // u-pod: two containers of 64Ki each, within their own limits, but an
  // emptyDir without a limit takes the pod past their sum.
  n.node.add_pod("u-pod", QosClass::Burstable, mem);
  write_text(logs + "shop_pod_u-pod/a/0.log", std::string(100, 'a'));
  write_text(vols + "u-pod" + ed + "data/blob", std::string(300000, 'd'));
  // u-ok: everything within its limits; u-static: over, but a static pod.
  n.node.add_pod("u-ok", QosClass::Burstable, mem);
  write_text(vols + "u-ok" + ed + "cache/blob", std::string(1000, 'o'));
  n.node.add_pod("u-static", QosClass::Burstable, mem);
  write_text(vols + "u-static" + ed + "cache/blob", std::string(200000, 'x'));
  write_text(n.node.root() + "/pods.yaml", R"(
kind: PodList
items:
- metadata: {uid: u-ed, name: ed, namespace: shop}
  spec:
    containers: [{name: app}]
    volumes: [{name: cache, emptyDir: {sizeLimit: 100Ki}}, {name: scratch, emptyDir: {}}]
- metadata: {uid: u-ctr, name: ctr, namespace: shop}
  spec:
    containers:
    - {name: app, resources: {limits: {ephemeral-storage: 100Ki}}}
    - {name: side, resources: {limits: {ephemeral-storage: 1Gi}}}
  status:
    containerStatuses: [{name: app, containerID: "containerd://app2"}]
- metadata: {uid: u-pod, name: pod, namespace: shop}
  spec:
    containers:
    - {name: a, resources: {limits: {ephemeral-storage: 64Ki}}}
    - {name: b, resources: {limits: {ephemeral-storage: 64Ki}}}
    volumes: [{name: data, emptyDir: {}}]
- metadata: {uid: u-ok, name: ok, namespace: shop}
  spec:
    containers: [{name: app, resources: {limits: {ephemeral-storage: 1Gi}}}]
    volumes: [{name: cache, emptyDir: {sizeLimit: 1Mi}}]
- metadata: {uid: u-static, name: st, namespace: kube-system, annotations: {kubernetes.io/config.source: file}}
  spec:
    containers: [{name: app}]
    volumes: [{name: cache, emptyDir: {sizeLimit: 100Ki}}]
)");
  PodSourceConfig pcfg;
  pcfg.kind = PodSourceKind::File;
  pcfg.path = n.node.root() + "/pods.yaml";
  auto md_src = make_pod_metadata_source(pcfg);
  ASSERT_TRUE(md_src);
  std::shared_ptr<PodMetadataSource> md = std::move(*md_src);
  ASSERT_TRUE(md->refresh());
  std::shared_ptr<PodStorageSource> storage = make_pod_storage_source(n.node.config());
  storage->walk_now(TimePoint(std::chrono::seconds(1)));
  auto obs = make_node_observer(n.node.config(), md, storage);
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint(std::chrono::seconds(2)));
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 5u);

  auto v = local_storage_violations(*snap, LocalStorageOptions{});
  ASSERT_EQ(v.size(), 3u);
  std::map<std::string, LocalStorageViolation> by_uid;
  for (auto& x : v) by_uid[x.uid] = x;
  ASSERT_TRUE(by_uid.count("u-ed"));
  EXPECT_EQ(by_uid["u-ed"].rule, LocalStorageRule::EmptyDir);
  EXPECT_EQ(by_uid["u-ed"].usage_bytes, tree_usage(vols + "u-ed" + ed + "cache").first);
  EXPECT_EQ(by_uid["u-ed"].message, "Usage of EmptyDir volume \"cache\" exceeds the limit \"100Ki\". ");
  ASSERT_TRUE(by_uid.count("u-ctr"));
  EXPECT_EQ(by_uid["u-ctr"].rule, LocalStorageRule::Container);
  EXPECT_EQ(by_uid["u-ctr"].usage_bytes, tree_usage(up).first + tree_usage(logs + "shop_ctr_u-ctr/app").first)
      << "writable layer + logs";
  EXPECT_EQ(by_uid["u-ctr"].message, "Container app exceeded its local ephemeral storage limit \"100Ki\". ");
  ASSERT_TRUE(by_uid.count("u-pod"));
  EXPECT_EQ(by_uid["u-pod"].rule, LocalStorageRule::Pod);
  EXPECT_EQ(by_uid["u-pod"].limit_bytes, 128u * 1024);
  EXPECT_EQ(by_uid["u-pod"].message, "Pod ephemeral local storage usage exceeds the total limit of containers 128Ki. ");
  EXPECT_FALSE(by_uid.count("u-ok"));
  EXPECT_FALSE(by_uid.count("u-static")) << "the kubelet never evicts a static pod";

  // With the layers on a dedicated image filesystem only logs count for a
  // container: app's 1 kB of logs is within its limit.
  LocalStorageOptions dedicated;
  dedicated.dedicated_imagefs = true;
  for (const auto& x : local_storage_violations(*snap, dedicated)) EXPECT_NE(x.uid, "u-ctr");
}

TEST(WritableLayers, UnknownRuntimeRootIsReportedNotSkipped) {
  testing::FakeNode node(CgroupVersion::V1, CgroupDriver::Cgroupfs);  // no <root>/var/lib/containerd
  std::string pd = node.add_pod("u-a", QosClass::Burstable, testing::FakePodMemory{MiB, MiB, 0, 0, 0});
  write_text(pd + "/abc123/cgroup.procs", "101\n");
  write_text(node.root() + "/proc/101/mountinfo", containerd_mountinfo(node.root() + "/var/lib/containerd/s/1/fs", "/l", "/w"));
  write_text(node.root() + "/var/log/pods/ns_a_u-a/c/0.log", "hello\n");
  auto src = make_pod_storage_source(node.config());
  src->walk_now(TimePoint{});
  auto st = src->stats().writable_layers;
  EXPECT_FALSE(st.measured);
  EXPECT_NE(st.not_measured_reason.find(node.root() + "/var/lib/containerd"), std::string::npos) << st.not_measured_reason;
  EXPECT_EQ(st.containers, 0u);
  auto u = src->lookup("u-a");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->breakdown.writable_layers_measured);
  EXPECT_GT(u->breakdown.logs_bytes, 0u);
  EXPECT_EQ(u->bytes, u->breakdown.logs_bytes);

  // The top view says so too.
  auto obs = make_node_observer(node.config(), nullptr, std::shared_ptr<PodStorageSource>(std::move(src)));
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint{});
  ASSERT_TRUE(snap);
  EvictionConfig ev;
  node::TopInput in;
  in.snapshot = &*snap;
  in.layout = &(*obs)->layout();
  in.eviction = &ev;
  in.storage = PodStorageStats{};
  in.storage->walks = 1;
  in.storage->writable_layers = st;
  EXPECT_NE(node::render_top_text(in).find("writable layers NOT measured: runtime root"), std::string::npos)
      << node::render_top_text(in);
  auto j = node::render_top_json(in);
  EXPECT_EQ(j["storage"]["writable_layers"]["measured"], false);
  EXPECT_EQ(j["pods"][0]["ephemeral_storage"]["writable_layers_measured"], false);
}

// CRI-O on cgroup v2 with the systemd driver: crio-<id>.scope containers,
// upper dirs at <storage>/overlay/<layer>/diff, conmon in its own cgroup,
// a container whose processes sit in a nested cgroup (systemd inside).
TEST(WritableLayers, CrioSystemdV2WithConmonAndNestedCgroups) {
  testing::FakeNode node(CgroupVersion::V2, CgroupDriver::Systemd);
  const std::string storage = node.root() + "/var/lib/containers/storage";
  const std::string uid = "5f3c1d2e-0000-4000-8000-00000000000a";
  std::string pd = node.add_pod(uid, QosClass::Guaranteed, testing::FakePodMemory{MiB, MiB, 0, 0, 0}, "aaa111");
  testing::TempDir::remove_tree(pd + "/cri-containerd-aaa111.scope");  // CRI-O names its scopes crio-<id>
  write_text(pd + "/crio-aaa111.scope/cgroup.procs", "401\n");
  const std::string up1 = storage + "/overlay/0f1e2d/diff";
  write_text(up1 + "/var/cache/x", std::string(30000, 'x'));
  write_text(node.root() + "/proc/401/mountinfo",
             "2301 2200 0:412 / / rw,relatime - overlay overlay rw,lowerdir=" + storage + "/overlay/l/ABC:" + storage +
                 "/overlay/l/DEF,upperdir=" + up1 + ",workdir=" + storage + "/overlay/0f1e2d/work,metacopy=on,volatile\n"
                 "2302 2301 0:413 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw\n");
  testing::mkdirs(pd + "/crio-conmon-aaa111.scope");
  write_text(pd + "/crio-conmon-aaa111.scope/cgroup.procs", "400\n");
  write_text(node.root() + "/proc/400/mountinfo", kHostMountinfo);
  // systemd in a container: its processes live in <container>/init.scope.
  testing::mkdirs(pd + "/crio-bbb222.scope/init.scope");
  write_text(pd + "/crio-bbb222.scope/cgroup.procs", "");
  write_text(pd + "/crio-bbb222.scope/init.scope/cgroup.procs", "402\n");
  const std::string up2 = storage + "/overlay/9a8b7c/diff";
  write_text(up2 + "/etc/machine-id", "0123456789abcdef\n");
  write_text(node.root() + "/proc/402/mountinfo",
             "2401 2200 0:414 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=" + up2 + ",workdir=/w\n");

  ObserveConfig c = node.config();
  c.runtime_root = storage;  // imagefs stays where it is; the layers are below the CRI-O storage root
  auto src = make_pod_storage_source(c);
  src->walk_now(TimePoint{});
  auto u = src->lookup(uid);
  ASSERT_TRUE(u);
  EXPECT_EQ(u->breakdown.containers, 2u) << "conmon is not a container";
  EXPECT_EQ(u->breakdown.writable_layers, 2u);
  EXPECT_EQ(u->breakdown.unresolved_containers, 0u);
  auto [b1, i1] = tree_usage(up1);
  auto [b2, i2] = tree_usage(up2);
  EXPECT_EQ(u->breakdown.writable_layers_bytes, b1 + b2);
  EXPECT_EQ(u->breakdown.writable_layers_inodes, i1 + i2);
  auto st = src->stats().writable_layers;
  EXPECT_EQ(st.skipped, 1u);
  EXPECT_EQ(st.unresolved_total(), 0u);

  // The observer carries the breakdown into the snapshot.
  auto obs = make_node_observer(c, nullptr, std::shared_ptr<PodStorageSource>(std::move(src)));
  ASSERT_TRUE(obs);
  auto snap = (*obs)->observe(TimePoint{});
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->pods.size(), 1u);
  ASSERT_TRUE(snap->pods[0].ephemeral_storage);
  EXPECT_EQ(snap->pods[0].ephemeral_storage->writable_layers_bytes, b1 + b2);
  EXPECT_EQ(snap->pods[0].usage.ephemeral_storage_bytes, u->bytes);
}

TEST(WritableLayers, PermissionDeniedIsCounted) {
  LayerNode n;
  std::string pd = n.node.add_pod("u-p", QosClass::Burstable, testing::FakePodMemory{MiB, MiB, 0, 0, 0}, "c1");
  write_text(pd + "/c1/cgroup.procs", "501\n");
  n.proc(501, n.snapshot(5) + "/fs");
  testing::mkdirs(n.snapshot(5) + "/fs");
  const std::string mi = n.node.root() + "/proc/501/mountinfo";
  const std::string root_real = std::filesystem::canonical(n.runtime_root).string();
  // Readable: resolved.
  auto ok = node::resolve_container_layer(pd + "/c1", n.node.root() + "/proc", root_real);
  ASSERT_FALSE(ok.failure) << ok.detail;
  EXPECT_EQ(ok.upper_dir, std::filesystem::canonical(n.snapshot(5) + "/fs").string());
  // mountinfo readable by its owner only; read as another user (root ignores modes).
  ASSERT_EQ(::chmod(n.node.root().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(mi.c_str(), 0600), 0);
  auto as_other_user = [&]() -> int {
    auto r = node::resolve_container_layer(pd + "/c1", n.node.root() + "/proc", root_real);
    if (!r.failure) return 1;
    return *r.failure == LayerFailure::PermissionDenied ? 0 : 10 + static_cast<int>(*r.failure);
  };
  int rc = 0;
  if (::geteuid() != 0) {
    rc = as_other_user();
  } else {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
      ::_exit(as_other_user());
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    rc = WIFEXITED(status) ? WEXITSTATUS(status) : 99;
  }
  EXPECT_EQ(rc, 0) << "expected PermissionDenied (10+n: LayerFailure n instead)";
}

TEST(WritableLayers, BoundedByTheWalkBudget) {
  LayerNode n;
  std::string pd = n.node.add_pod("u-big", QosClass::BestEffort, testing::FakePodMemory{MiB, MiB, 0, 0, 0}, "c1");
  write_text(pd + "/c1/cgroup.procs", "601\n");
  const std::string up = n.snapshot(6) + "/fs";
  for (int i = 0; i < 100; ++i) write_text(up + "/d/f" + std::to_string(i), "x");
  n.proc(601, up);
  ObserveConfig c = n.node.config();
  c.disk_walk_max_entries = 20;
  auto src = make_pod_storage_source(c);
  src->walk_now(TimePoint{});
  auto u = src->lookup("u-big");
  ASSERT_TRUE(u);
  EXPECT_FALSE(u->complete);
  EXPECT_LE(u->breakdown.writable_layers_inodes, 22u);
  EXPECT_EQ(src->stats().incomplete_walks, 1u);
}

TEST(WritableLayers, RuntimeRootSetting) {
  auto c = parse_config_yaml("cgroup:\n  runtimeRoot: /var/lib/containers/storage\n");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->observe.runtime_root, "/var/lib/containers/storage");
  auto d = parse_config_yaml("cgroup: {}\n");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->observe.runtime_root, "") << "default: the imagefs path";
  for (const char* bad : {"relative/path", "/", "//"}) {
    auto e = parse_config_yaml(std::string("cgroup:\n  runtimeRoot: \"") + bad + "\"\n");
    ASSERT_FALSE(e) << bad;
    EXPECT_NE(e.error().message.find("cgroup.runtimeRoot"), std::string::npos) << e.error().message;
  }
}

}  // namespace
}  // namespace pressured
