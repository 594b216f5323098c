#pragma once
// A real Kubernetes control plane for tests: etcd + kube-apiserver 1.20 (built
// by scripts/build-control-plane, cached outside the clone) on 127.0.0.1 only,
// ephemeral ports, TLS with a throwaway CA, RBAC, a ServiceAccount signing
// key. No scheduler and no controller-manager: pods are created with
// spec.nodeName, each namespace's `default` ServiceAccount is created here,
// and PodDisruptionBudget status is written through its status subresource.
//
// Every process is started with PR_SET_PDEATHSIG(SIGKILL) in its own process
// group, so a crashing test binary leaves nothing behind; the destructor stops
// them cleanly and removes the temporary directory.

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/api_client.hpp"
#include "pressured/result.hpp"

namespace pressured::testing {

/// Where the binaries are; `missing` names what is not there (empty: all found).
struct ControlPlaneBinaries {
  std::string apiserver, etcd, kubectl;
  std::string missing;
};
ControlPlaneBinaries find_control_plane_binaries();

class ControlPlane {
 public:
  /// Certificates, etcd, kube-apiserver; waits for /readyz; applies
  /// deploy/base/namespace.yaml + deploy/base/rbac.yaml; creates `default`
  /// ServiceAccounts. An Error says what failed (with the log tail).
  static Result<std::unique_ptr<ControlPlane>> start();
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  const std::string& server() const { return server_; }  // https://127.0.0.1:<port>
  const std::string& dir() const { return dir_; }
  std::string ca_file() const { return dir_ + "/ca.crt"; }
  std::string other_ca_file() const { return dir_ + "/other-ca.crt"; }  // a CA that did not sign the server
  int port() const { return port_; }

  /// Cluster-admin (system:masters client certificate). For setup and checks only.
  k8s::ApiServer admin() const;
  /// A request as admin; the network error is returned as status 0.
  k8s::HttpResponse admin_call(const std::string& method, const std::string& path, const nlohmann::json& body = {},
                               const std::string& content_type = "application/json") const;

  /// A TokenRequest token for a ServiceAccount.
  Result<std::string> token_for(const std::string& ns, const std::string& sa, int64_t seconds = 3600) const;
  /// pressured's identity from deploy/base/rbac.yaml: a token file (written under
  /// dir()) and the CA. Nothing else: the daemon's calls run with exactly
  /// the shipped ClusterRole.
  Result<k8s::ApiServer> pressured_identity(const std::string& token_file_name = "pressured.token") const;
  /// An admin kubeconfig (client certificate), for kubectl.
  std::string admin_kubeconfig() const { return dir_ + "/admin.kubeconfig"; }

  /// Creates a namespace and its `default` ServiceAccount (idempotent).
  Result<void> ensure_namespace(const std::string& ns) const;
  /// Creates a pod bound to `node` (no scheduler); returns its uid.
  Result<std::string> create_pod(const std::string& ns, const std::string& name, const std::string& node,
                                 const nlohmann::json& labels = nlohmann::json::object(),
                                 int64_t grace_seconds = 30) const;
  /// What the kubelet would report of a pod it runs: phase Running and the
  /// Ready condition (the API server evicts Pending and not-ready pods
  /// without asking a disruption budget).
  Result<void> set_pod_running(const std::string& ns, const std::string& name) const;
  /// A PodDisruptionBudget `name` (policy/v1beta1, minAvailable 1) over the
  /// pods labelled `labels`, with the status the disruption controller (not
  /// run here) would write: no disruption allowed.
  Result<void> create_pdb_allowing_none(const std::string& ns, const std::string& name,
                                        const nlohmann::json& labels) const;
  /// Creates a Node object (admin; no kubelet behind it).
  Result<void> create_node(const std::string& name) const;
  /// Applies a YAML file (each document POSTed; AlreadyExists is fine).
  Result<void> apply_yaml_file(const std::string& path) const;

  /// Runs kubectl 1.20 with the admin kubeconfig; returns its exit code.
  int kubectl(const std::vector<std::string>& args, std::string* output) const;

  /// The apiserver alone: killed (SIGKILL), restarted on the same port,
  /// paused (SIGSTOP) and resumed (SIGCONT). etcd keeps the state.
  void kill_apiserver();
  Result<void> restart_apiserver();
  void pause_apiserver();
  void resume_apiserver();
  /// Compacts etcd's history up to its current revision (through etcd's
  /// v3 HTTP gateway): older resourceVersions then answer 410 Gone.
  Result<void> compact_etcd() const;

 private:
  ControlPlane() = default;
  Result<void> start_etcd();
  Result<void> start_apiserver();
  Result<void> wait_ready(int timeout_s);
  void stop_all();

  std::string bin_apiserver_, bin_etcd_, bin_kubectl_;
  std::string dir_, server_;
  int port_ = 0, etcd_port_ = 0, etcd_peer_port_ = 0;
  pid_t etcd_pid_ = -1, apiserver_pid_ = -1;
};

/// One control plane per test binary, started at first use and stopped at
/// exit. Null (with `why`) when a piece is missing or it failed to start.
ControlPlane* shared_control_plane(std::string* why);

}  // namespace pressured::testing

/// At the top of a TEST: skips, or fails as root under
/// PRESSURED_REQUIRE_PRIVILEGED=1, when the control plane is not available.
#define PRESSURED_REQUIRE_CONTROL_PLANE(cp)                                          \
  std::string cp##_why;                                                                \
  ::pressured::testing::ControlPlane* cp = ::pressured::testing::shared_control_plane(&cp##_why); \
  PRESSURED_REQUIRE(cp != nullptr, "kube-apiserver + etcd control plane: " + cp##_why)
