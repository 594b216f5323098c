// How pressured reaches a real kube-apiserver: in-cluster (env + token file +
// CA) and kubeconfig; a rotated token file; a wrong CA. And the deploy/
// manifests, accepted by the server (kubectl apply --dry-run=server -k).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "fakes/privilege.hpp"
#include "k8s/control_plane.hpp"
#include "k8s/reporter.hpp"
#include "metrics/exposition.hpp"
#include "pods/apiserver_source.hpp"

namespace pressured::k8s {
namespace {

using json = nlohmann::json;
using testing::scraped;
using namespace std::chrono_literals;
using Status = std::array<bool, kConditionCount>;

std::string pods_of_node(const std::string& node) { return "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node; }

// pressured's own calls: the node status patch and the pod list, as that identity.
void expect_pressured_calls_work(const testing::ControlPlane& cp, const ApiServer& s, const std::string& node) {
  ASSERT_TRUE(cp.create_node(node));
  ReporterOptions o;
  o.node_name = node;
  o.taint_nodes = true;
  Metrics metrics(MetricsOptions{.node = "node-a"});
  Reporter rep(ApiClient(s, 10s), o);
  rep.attach_metrics(metrics);
  rep.start();
  rep.report_conditions(Status{false, false, false}, Status{true, true, true});
  ASSERT_TRUE(rep.drain(30s));
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_node_condition_updates_total"), 1u);
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 0u);
  auto r = ApiClient(s, 10s).request("GET", pods_of_node(node));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(K8sConnection, InClusterEnvironmentTokenFileAndCa) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  std::string sa = cp->dir() + "/serviceaccount";
  std::filesystem::create_directories(sa);
  auto token = cp->token_for("pressured", "pressured");
  ASSERT_TRUE(token);
  std::ofstream(sa + "/token") << *token;
  std::filesystem::copy_file(cp->ca_file(), sa + "/ca.crt", std::filesystem::copy_options::overwrite_existing);
  ::setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", std::to_string(cp->port()).c_str(), 1);
  auto s = in_cluster_config(sa);
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->server, cp->server());
  expect_pressured_calls_work(*cp, *s, "incluster-node");
}

TEST(K8sConnection, KubeconfigWithTokenFileOrInlineCaData) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  auto id = cp->pressured_identity("kc.token");
  ASSERT_TRUE(id);
  std::string kc = cp->dir() + "/pressured.kubeconfig";
  std::ofstream(kc) << "apiVersion: v1\nkind: Config\ncurrent-context: p\nclusters:\n- name: c\n  cluster:\n"
                       "    server: " << cp->server() << "\n    certificate-authority: ca.crt\n"
                    << "users:\n- name: u\n  user:\n    tokenFile: kc.token\n"
                       "contexts:\n- name: p\n  context: {cluster: c, user: u}\n";
  auto s = load_kubeconfig(kc);
  ASSERT_TRUE(s) << s.error().message;
  expect_pressured_calls_work(*cp, *s, "kubeconfig-node");

  // The pod source as the daemon builds it from its config (pods.kind:
  // apiserver with the kubernetes section's kubeconfig and node).
  ASSERT_TRUE(cp->ensure_namespace("kc-pods"));
  auto uid = cp->create_pod("kc-pods", "one", "kubeconfig-node");
  ASSERT_TRUE(uid);
  PodSourceConfig pc;
  pc.kind = PodSourceKind::ApiServer;
  pc.kubeconfig = kc;
  pc.node_name = "kubeconfig-node";
  auto src = make_pod_metadata_source(pc);
  ASSERT_TRUE(src) << src.error().message;
  auto refreshed = (*src)->refresh();
  ASSERT_TRUE(refreshed) << refreshed.error().message;
  EXPECT_EQ((*src)->current()->count(*uid), 1u);
  EXPECT_EQ((*src)->describe().rfind("apiserver:", 0), 0u);

  // Inline CA data and token, as `kubectl config view --raw --flatten` writes.
  int st = 0;
  std::string b64;
  {
    FILE* p = ::popen(("base64 -w0 " + cp->ca_file()).c_str(), "r");
    char buf[8192];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) b64.append(buf, n);
    st = ::pclose(p);
  }
  ASSERT_EQ(st, 0);
  auto token = cp->token_for("pressured", "pressured");
  ASSERT_TRUE(token);
  std::string kc2 = cp->dir() + "/inline.kubeconfig";
  std::ofstream(kc2) << "apiVersion: v1\nkind: Config\ncurrent-context: p\nclusters:\n- name: c\n  cluster:\n"
                        "    server: " << cp->server() << "\n    certificate-authority-data: " << b64
                     << "\nusers:\n- name: u\n  user:\n    token: " << *token
                     << "\ncontexts:\n- name: p\n  context: {cluster: c, user: u}\n";
  auto s2 = load_kubeconfig(kc2);
  ASSERT_TRUE(s2) << s2.error().message;
  auto r = ApiClient(*s2, 10s).request("GET", pods_of_node("kubeconfig-node"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(K8sConnection, RotatedTokenFileIsPickedUp) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  // Tokens bound to a Secret die with it: the old token is revoked for real
  // after the rotation, so only a re-read file keeps pressured working.
  auto bound_token = [&](const std::string& secret) -> std::string {
    auto r = cp->admin_call("POST", "/api/v1/namespaces/pressured/secrets", json{{"metadata", {{"name", secret}}}});
    EXPECT_EQ(r.status, 201) << r.body;
    std::string uid = json::parse(r.body)["metadata"]["uid"];
    json req{{"apiVersion", "authentication.k8s.io/v1"},
             {"kind", "TokenRequest"},
             {"spec",
              {{"expirationSeconds", 3600},
               {"boundObjectRef", {{"kind", "Secret"}, {"apiVersion", "v1"}, {"name", secret}, {"uid", uid}}}}}};
    r = cp->admin_call("POST", "/api/v1/namespaces/pressured/serviceaccounts/pressured/token", req);
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body)["status"]["token"];
  };
  ASSERT_TRUE(cp->create_node("rotate-node"));
  ApiServer s;
  s.server = cp->server();
  s.ca_file = cp->ca_file();
  s.token_file = cp->dir() + "/rotating.token";
  const std::string first = bound_token("token-a");
  std::ofstream(s.token_file) << first << "\n";
  ReporterOptions o;
  o.node_name = "rotate-node";
  o.taint_nodes = false;
  o.max_attempts = 1;
  Metrics metrics(MetricsOptions{.node = "node-a"});
  Reporter rep(ApiClient(s, 10s), o);
  rep.attach_metrics(metrics);
  rep.start();
  rep.report_conditions(Status{false, false, false}, Status{true, true, true});
  ASSERT_TRUE(rep.drain(30s));
  ASSERT_EQ(scraped(metrics, "pressured_kubernetes_node_condition_updates_total"), 1u);

  // The kubelet rewrites the projected token; the old one is then revoked.
  std::string next = bound_token("token-b");
  {
    std::ofstream out(s.token_file + ".new");
    out << next << "\n";
  }
  std::filesystem::rename(s.token_file + ".new", s.token_file);
  auto d = cp->admin_call("DELETE", "/api/v1/namespaces/pressured/secrets/token-a");
  ASSERT_EQ(d.status, 200) << d.body;
  // The old token must really be dead before pressured's next call, or the
  // test proves nothing (the API server caches token reviews ~10 s).
  ApiServer old = s;
  old.token_file.clear();
  old.token = first;
  long old_status = 0;
  for (int i = 0; i < 150 && old_status != 401; ++i) {
    auto r = ApiClient(old, 10s).request("GET", "/api/v1/nodes/rotate-node");
    ASSERT_TRUE(r);
    old_status = r->status;
    if (old_status != 401) std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(old_status, 401) << "the first token still works 30 s after its Secret was deleted";

  rep.report_conditions(Status{true, false, false}, Status{true, false, false});
  ASSERT_TRUE(rep.drain(30s));
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_node_condition_updates_total"), 2u)
      << "the rotated token file was not re-read";
  EXPECT_EQ(scraped(metrics, "pressured_kubernetes_report_failures_total"), 0u);
}

TEST(K8sConnection, WrongCaFailsWithAClearErrorNotATimeout) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  auto id = cp->pressured_identity();
  ASSERT_TRUE(id);
  ApiServer s = *id;
  s.ca_file = cp->other_ca_file();
  auto r = ApiClient(s, 30s).request("GET", pods_of_node("x"));
  ASSERT_FALSE(r) << "a server signed by another CA was trusted";
  EXPECT_NE(r.error().message.find("wrong CA?"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(cp->other_ca_file()), std::string::npos) << r.error().message;

  pods::ApiServerSourceOptions o;
  o.server = s;
  o.node_name = "x";
  pods::ApiServerPodSource src(o);
  auto l = src.refresh();
  ASSERT_FALSE(l);
  EXPECT_NE(l.error().message.find("wrong CA?"), std::string::npos) << l.error().message;
}

TEST(K8sManifests, DeployKustomizationIsAcceptedByTheServer) {
  PRESSURED_REQUIRE_CONTROL_PLANE(cp);
  // The path of 1.20-1.29 clusters: deploy/ through deploy/overlays/before-1.30.
  std::string deploy = std::string(PRESSURED_SOURCE_DIR) + "/deploy/overlays/before-1.30";
  // kubectl 1.20 with its client-side schema validation on, against the 1.20
  // server's admission and validation: what an operator of the oldest
  // supported cluster runs. Fields newer than 1.20 (securityContext.
  // appArmorProfile, 1.30, which deploy/ itself sets) would fail here; the
  // overlay's AppArmor annotation passes.
  std::string out;
  int rc = cp->kubectl({"apply", "--dry-run=server", "-k", deploy}, &out);
  EXPECT_EQ(rc, 0) << out;
  for (const char* what : {"namespace/pressured", "serviceaccount/pressured", "clusterrole.rbac.authorization.k8s.io/pressured",
                           "clusterrolebinding.rbac.authorization.k8s.io/pressured", "configmap/pressured-config-",
                           "resourcequota/pressured-critical-pods", "daemonset.apps/pressured"}) {
    EXPECT_NE(out.find(std::string(what)), std::string::npos) << what << " not in: " << out;
  }
  // What the server would store: the annotation kept, the init container
  // that installs the seccomp profile before the Localhost profile is used.
  rc = cp->kubectl({"apply", "--dry-run=server", "-k", deploy, "-o", "json"}, &out);
  ASSERT_EQ(rc, 0) << out;
  // One pretty-printed object per applied resource (or one List): split at
  // the top-level braces; kubectl's warnings (stderr) are interleaved.
  std::vector<nlohmann::json> objects;
  std::string chunk, line;
  std::istringstream lines(out);
  while (std::getline(lines, line)) {
    if (chunk.empty() && line != "{") continue;
    chunk += line + "\n";
    if (line == "}") {
      auto j = nlohmann::json::parse(chunk, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << chunk;
      if (j.value("kind", "") == "List") {
        for (auto& item : j["items"]) objects.push_back(item);
      } else {
        objects.push_back(j);
      }
      chunk.clear();
    }
  }
  const nlohmann::json* ds = nullptr;
  for (const auto& o : objects) {
    if (o.value("kind", "") == "DaemonSet") ds = &o;
  }
  ASSERT_NE(ds, nullptr) << out;
  const auto& tmpl = (*ds)["spec"]["template"];
  EXPECT_EQ(tmpl["metadata"]["annotations"].value("container.apparmor.security.beta.kubernetes.io/pressured", ""),
            "unconfined");
  EXPECT_FALSE(tmpl["spec"]["containers"][0]["securityContext"].contains("appArmorProfile")) << tmpl.dump();
  // The generated ConfigMap's hashed name is what the pods mount (a change rolls them).
  std::string cm;
  for (const auto& v : tmpl["spec"]["volumes"]) {
    if (v.contains("configMap")) cm = v["configMap"].value("name", "");
  }
  EXPECT_EQ(cm.rfind("pressured-config-", 0), 0u) << tmpl.dump();
  EXPECT_NE(out.find("\"name\": \"" + cm + "\""), std::string::npos) << cm << " is not among the applied objects";
  EXPECT_EQ(tmpl["spec"]["nodeSelector"].value("kubernetes.io/os", ""), "linux");
  ASSERT_EQ(tmpl["spec"]["initContainers"].size(), 1u) << tmpl.dump();
  const auto& init = tmpl["spec"]["initContainers"][0];
  EXPECT_EQ(init["args"][0], "install-seccomp");
  EXPECT_EQ(init["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(init["image"], tmpl["spec"]["containers"][0]["image"]);
  EXPECT_EQ(tmpl["spec"]["containers"][0]["securityContext"]["seccompProfile"]["type"], "Localhost");
  // Dry run: nothing was created.
  auto r = cp->admin_call("GET", "/apis/apps/v1/namespaces/pressured/daemonsets/pressured");
  EXPECT_EQ(r.status, 404);
}

}  // namespace
}  // namespace pressured::k8s
