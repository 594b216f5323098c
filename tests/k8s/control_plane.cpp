#include "control_plane.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

namespace pressured::testing {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string run_capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tail(const std::string& path, std::size_t bytes = 3000) {
  std::string s = slurp(path);
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// fork+exec with the output in `log`, its own process group, and SIGKILL when
// the test process dies (a crash or an ASan abort leaves nothing behind).
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
  }
  int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  ::_exit(127);
}

void stop_process(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGCONT);
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      pid = -1;
      return;
    }
    std::this_thread::sleep_for(50ms);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  pid = -1;
}

bool alive(pid_t pid) { return pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0; }

// YAML (as kubectl reads it) to JSON: plain scalars that look like booleans
// or integers become those, quoted ones stay strings.
json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json j = json::object();
      for (const auto& kv : n) j[kv.first.as<std::string>()] = yaml_to_json(kv.second);
      return j;
    }
    case YAML::NodeType::Sequence: {
      json j = json::array();
      for (const auto& e : n) j.push_back(yaml_to_json(e));
      return j;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      if (n.Tag() == "?") {
        if (s == "true") return true;
        if (s == "false") return false;
        if (!s.empty() && s.find_first_not_of("-0123456789") == std::string::npos) {
          try {
            return std::stoll(s);
          } catch (...) {
          }
        }
      }
      return s;
    }
    default: return nullptr;
  }
}

std::string collection_path(const json& obj) {
  std::string kind = obj.value("kind", "");
  std::string api = obj.value("apiVersion", "v1");
  std::string ns = obj["metadata"].value("namespace", "");
  std::string base = api == "v1" ? "/api/v1" : "/apis/" + api;
  std::string scope = ns.empty() ? "" : "/namespaces/" + ns;
  static const std::map<std::string, std::string> plural = {
      {"Namespace", "namespaces"},     {"ServiceAccount", "serviceaccounts"},
      {"ClusterRole", "clusterroles"}, {"ClusterRoleBinding", "clusterrolebindings"},
      {"ConfigMap", "configmaps"},     {"DaemonSet", "daemonsets"},
      {"Role", "roles"},               {"RoleBinding", "rolebindings"}};
  auto it = plural.find(kind);
  if (it == plural.end()) return {};
  return base + scope + "/" + it->second;
}

}  // namespace

ControlPlaneBinaries find_control_plane_binaries() {
  ControlPlaneBinaries b;
  std::string dir;
  if (const char* e = std::getenv("PRESSURED_K8S_BIN_DIR"); e != nullptr && *e) {
    dir = e;
  } else {
    int st = 0;
    std::string script = std::string(PRESSURED_SOURCE_DIR) + "/scripts/build-control-plane";
    run_capture(script + " --check 2>/dev/null", &st);
    if (st == 0) dir = run_capture(script + " --print-dir 2>/dev/null", &st);
    if (st != 0 || dir.empty()) {
      b.missing = "kube-apiserver 1.20 is not built: run scripts/build-control-plane (cached, ~11 min the first time)";
      return b;
    }
  }
  b.apiserver = dir + "/kube-apiserver";
  b.kubectl = dir + "/kubectl";
  if (::access(b.apiserver.c_str(), X_OK) != 0) b.missing = b.apiserver + " is missing";
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(p, X_OK) == 0) {
      b.etcd = p;
      break;
    }
  }
  if (b.etcd.empty() && b.missing.empty()) b.missing = "etcd (Debian package etcd-server; scripts/setup)";
  if (::access(b.kubectl.c_str(), X_OK) != 0 && b.missing.empty()) {
    b.missing = b.kubectl + " (kubectl 1.20) is missing: run scripts/build-control-plane";
  }
  return b;
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::start() {
  auto bins = find_control_plane_binaries();
  if (!bins.missing.empty()) return Error{ENOENT, bins.missing};
  if (::access("/usr/bin/openssl", X_OK) != 0) return Error{ENOENT, "openssl is missing"};
  std::unique_ptr<ControlPlane> cp(new ControlPlane());
  cp->bin_apiserver_ = bins.apiserver;
  cp->bin_etcd_ = bins.etcd;
  cp->bin_kubectl_ = bins.kubectl;
  char tmpl[] = "/tmp/pressured-k8s-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return Error::from_errno(errno, "mkdtemp");
  cp->dir_ = tmpl;
  const std::string& d = cp->dir_;

  // Certificates (scripts/cluster-pki, shared with vmtests' node): a CA, the
  // serving certificate for 127.0.0.1, a system:masters client certificate,
  // the ServiceAccount signing key and an unrelated CA for the wrong-CA test.
  const std::string pki = std::string(PRESSURED_SOURCE_DIR) + "/scripts/cluster-pki";
  const std::string pki_log = d + "/cluster-pki.log";
  if (std::system(fmt::format("'{}' '{}' --other-ca >'{}' 2>&1", pki, d, pki_log).c_str()) != 0) {
    return Error{EIO, fmt::format("generating certificates failed ({}): {}", pki, tail(pki_log))};
  }
  {
    std::ofstream kc(cp->admin_kubeconfig());
    kc << "apiVersion: v1\nkind: Config\ncurrent-context: admin\n"
          "clusters:\n- name: test\n  cluster:\n    server: SERVER\n    certificate-authority: "
       << d << "/ca.crt\n"
       << "users:\n- name: admin\n  user:\n    client-certificate: " << d << "/admin.crt\n    client-key: " << d
       << "/admin.key\ncontexts:\n- name: admin\n  context:\n    cluster: test\n    user: admin\n";
  }
  if (auto r = cp->start_etcd(); !r) return r.error();
  cp->port_ = free_port();
  cp->server_ = "https://127.0.0.1:" + std::to_string(cp->port_);
  {
    std::string kc = slurp(cp->admin_kubeconfig());
    kc.replace(kc.find("SERVER"), 6, cp->server_);
    std::ofstream(cp->admin_kubeconfig()) << kc;
  }
  if (auto r = cp->start_apiserver(); !r) return r.error();

  std::string src = PRESSURED_SOURCE_DIR;
  if (auto r = cp->apply_yaml_file(src + "/deploy/base/namespace.yaml"); !r) return r.error();
  if (auto r = cp->apply_yaml_file(src + "/deploy/base/rbac.yaml"); !r) return r.error();
  for (const char* ns : {"default", "pressured"}) {
    if (auto r = cp->ensure_namespace(ns); !r) return r.error();
  }
  return cp;
}

Result<void> ControlPlane::start_etcd() {
  etcd_port_ = free_port();
  etcd_peer_port_ = free_port();
  std::string client = "http://127.0.0.1:" + std::to_string(etcd_port_);
  std::string peer = "http://127.0.0.1:" + std::to_string(etcd_peer_port_);
  etcd_pid_ = spawn({bin_etcd_, "--name=test", "--data-dir=" + dir_ + "/etcd", "--listen-client-urls=" + client,
                     "--advertise-client-urls=" + client, "--listen-peer-urls=" + peer,
                     "--initial-advertise-peer-urls=" + peer, "--initial-cluster=test=" + peer,
                     "--log-level=warn", "--logger=zap"},
                    dir_ + "/etcd.log");
  for (int i = 0; i < 300; ++i) {  // 30 s
    int st = 0;
    std::string h = run_capture("curl -s -m 1 " + client + "/health", &st);
    if (h.find("\"health\":\"true\"") != std::string::npos) return {};
    if (!alive(etcd_pid_)) return Error{EIO, "etcd exited: " + tail(dir_ + "/etcd.log")};
    std::this_thread::sleep_for(100ms);
  }
  return Error{ETIMEDOUT, "etcd not healthy after 30 s: " + tail(dir_ + "/etcd.log")};
}

Result<void> ControlPlane::start_apiserver() {
  const std::string& d = dir_;
  apiserver_pid_ = spawn(
      {bin_apiserver_, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
       "--secure-port=" + std::to_string(port_), "--insecure-port=0",
       "--etcd-servers=http://127.0.0.1:" + std::to_string(etcd_port_), "--tls-cert-file=" + d + "/server.crt",
       "--tls-private-key-file=" + d + "/server.key", "--client-ca-file=" + d + "/ca.crt",
       "--authorization-mode=RBAC", "--service-account-key-file=" + d + "/sa.pub",
       "--service-account-signing-key-file=" + d + "/sa.key",
       "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
       "--api-audiences=https://kubernetes.default.svc.cluster.local", "--service-cluster-ip-range=10.96.0.0/24",
       "--endpoint-reconciler-type=none", "--profiling=false", "--logtostderr=true", "--v=1"},
      d + "/kube-apiserver.log");
  return wait_ready(120);
}

Result<void> ControlPlane::wait_ready(int timeout_s) {
  k8s::ApiClient c(admin(), std::chrono::seconds(2));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!alive(apiserver_pid_)) return Error{EIO, "kube-apiserver exited: " + tail(dir_ + "/kube-apiserver.log")};
    auto r = c.request("GET", "/readyz");
    if (r && r->status == 200) return {};
    last = r ? "HTTP " + std::to_string(r->status) + " " + r->body.substr(0, 300) : r.error().message;
    std::this_thread::sleep_for(200ms);
  }
  return Error{ETIMEDOUT, "kube-apiserver not ready after " + std::to_string(timeout_s) + " s (" + last +
                              "): " + tail(dir_ + "/kube-apiserver.log")};
}

void ControlPlane::kill_apiserver() {
  if (apiserver_pid_ > 0) {
    ::kill(apiserver_pid_, SIGKILL);
    ::waitpid(apiserver_pid_, nullptr, 0);
    apiserver_pid_ = -1;
  }
}

Result<void> ControlPlane::restart_apiserver() {
  kill_apiserver();
  return start_apiserver();
}

void ControlPlane::pause_apiserver() { ::kill(apiserver_pid_, SIGSTOP); }
void ControlPlane::resume_apiserver() { ::kill(apiserver_pid_, SIGCONT); }

Result<void> ControlPlane::compact_etcd() const {
  std::string base = "http://127.0.0.1:" + std::to_string(etcd_port_);
  int st = 0;
  // Any range request returns the store's current revision in its header.
  std::string out = run_capture("curl -s -m 5 -X POST " + base + "/v3/kv/range -d '{\"key\":\"AA==\"}'", &st);
  json j = json::parse(out, nullptr, false);
  if (st != 0 || j.is_discarded() || !j.contains("header")) return Error{EIO, "etcd range: " + out};
  std::string rev = j["header"]["revision"].get<std::string>();
  out = run_capture("curl -s -m 10 -X POST " + base + "/v3/kv/compaction -d '{\"revision\":\"" + rev +
                        "\",\"physical\":true}'",
                    &st);
  if (st != 0 || out.find("error") != std::string::npos) return Error{EIO, "etcd compaction: " + out};
  return {};
}

void ControlPlane::stop_all() {
  stop_process(apiserver_pid_);
  stop_process(etcd_pid_);
}

ControlPlane::~ControlPlane() {
  stop_all();
  if (!dir_.empty() && std::getenv("PRESSURED_K8S_KEEP") == nullptr) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

k8s::ApiServer ControlPlane::admin() const {
  k8s::ApiServer s;
  s.server = server_;
  s.ca_file = ca_file();
  s.client_cert_file = dir_ + "/admin.crt";
  s.client_key_file = dir_ + "/admin.key";
  return s;
}

k8s::HttpResponse ControlPlane::admin_call(const std::string& method, const std::string& path, const json& body,
                                           const std::string& content_type) const {
  k8s::ApiClient c(admin(), std::chrono::seconds(10));
  auto r = c.request(method, path, body.is_null() ? std::string() : body.dump(), content_type);
  if (!r) return k8s::HttpResponse{0, r.error().message, {}};
  return *r;
}

Result<std::string> ControlPlane::token_for(const std::string& ns, const std::string& sa, int64_t seconds) const {
  json req{{"apiVersion", "authentication.k8s.io/v1"},
           {"kind", "TokenRequest"},
           {"spec", {{"expirationSeconds", seconds}}}};
  auto r = admin_call("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token", req);
  if (r.status != 201 && r.status != 200) {
    return Error{EIO, "TokenRequest " + ns + "/" + sa + ": HTTP " + std::to_string(r.status) + " " + r.body};
  }
  return json::parse(r.body)["status"]["token"].get<std::string>();
}

Result<k8s::ApiServer> ControlPlane::pressured_identity(const std::string& token_file_name) const {
  auto t = token_for("pressured", "pressured");
  if (!t) return t.error();
  k8s::ApiServer s;
  s.server = server_;
  s.ca_file = ca_file();
  s.token_file = dir_ + "/" + token_file_name;
  std::ofstream(s.token_file) << *t << "\n";
  return s;
}

Result<void> ControlPlane::ensure_namespace(const std::string& ns) const {
  auto r = admin_call("POST", "/api/v1/namespaces", json{{"metadata", {{"name", ns}}}});
  if (r.status != 201 && r.status != 409) return Error{EIO, "create namespace " + ns + ": " + r.body};
  r = admin_call("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts", json{{"metadata", {{"name", "default"}}}});
  if (r.status != 201 && r.status != 409) return Error{EIO, "create " + ns + "/default ServiceAccount: " + r.body};
  return {};
}

Result<std::string> ControlPlane::create_pod(const std::string& ns, const std::string& name, const std::string& node,
                                             const json& labels, int64_t grace_seconds) const {
  json pod{{"apiVersion", "v1"},
           {"kind", "Pod"},
           {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
           {"spec",
            {{"nodeName", node},
             // No token controller here: no legacy ServiceAccount secret to mount.
             {"automountServiceAccountToken", false},
             {"terminationGracePeriodSeconds", grace_seconds},
             {"containers",
              json::array({{{"name", "app"},
                            {"image", "registry.invalid/app:1"},
                            {"resources", {{"requests", {{"memory", "64Mi"}, {"cpu", "10m"}}}}}}})}}}};
  auto r = admin_call("POST", "/api/v1/namespaces/" + ns + "/pods", pod);
  if (r.status != 201) return Error{EIO, "create pod " + ns + "/" + name + ": HTTP " + std::to_string(r.status) + " " + r.body};
  return json::parse(r.body)["metadata"]["uid"].get<std::string>();
}

Result<void> ControlPlane::set_pod_running(const std::string& ns, const std::string& name) const {
  auto r = admin_call("PATCH", "/api/v1/namespaces/" + ns + "/pods/" + name + "/status",
                      json{{"status",
                            {{"phase", "Running"},
                             {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}},
                      "application/merge-patch+json");
  if (r.status != 200) return Error{EIO, fmt::format("mark pod {}/{} running: HTTP {} {}", ns, name, r.status, r.body)};
  return {};
}

Result<void> ControlPlane::create_pdb_allowing_none(const std::string& ns, const std::string& name,
                                                     const json& labels) const {
  json pdb{{"apiVersion", "policy/v1beta1"},
           {"kind", "PodDisruptionBudget"},
           {"metadata", {{"name", name}, {"namespace", ns}}},
           {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", labels}}}}}};
  const std::string path = "/apis/policy/v1beta1/namespaces/" + ns + "/poddisruptionbudgets";
  auto r = admin_call("POST", path, pdb);
  if (r.status != 201) {
    return Error{EIO, fmt::format("create PodDisruptionBudget {}/{}: HTTP {} {}", ns, name, r.status, r.body)};
  }
  json created = json::parse(r.body);
  created["status"] = {{"observedGeneration", created["metadata"].value("generation", 1)},
                       {"disruptionsAllowed", 0},
                       {"currentHealthy", 1},
                       {"desiredHealthy", 1},
                       {"expectedPods", 1}};
  r = admin_call("PUT", path + "/" + name + "/status", created);
  if (r.status != 200) {
    return Error{EIO, fmt::format("write PodDisruptionBudget {}/{} status: HTTP {} {}", ns, name, r.status, r.body)};
  }
  return {};
}

Result<void> ControlPlane::create_node(const std::string& name) const {
  auto r = admin_call("POST", "/api/v1/nodes", json{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", name}}}});
  if (r.status != 201 && r.status != 409) return Error{EIO, "create node " + name + ": " + r.body};
  return {};
}

Result<void> ControlPlane::apply_yaml_file(const std::string& path) const {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAllFromFile(path);
  } catch (const std::exception& e) {
    return Error{EINVAL, path + ": " + e.what()};
  }
  for (const auto& d : docs) {
    if (!d || d.IsNull()) continue;
    json obj = yaml_to_json(d);
    std::string coll = collection_path(obj);
    if (coll.empty()) return Error{EINVAL, path + ": no collection known for kind " + obj.value("kind", "?")};
    auto r = admin_call("POST", coll, obj);
    if (r.status != 201 && r.status != 409) {
      return Error{EIO, path + ": POST " + coll + ": HTTP " + std::to_string(r.status) + " " + r.body};
    }
  }
  return {};
}

int ControlPlane::kubectl(const std::vector<std::string>& args, std::string* output) const {
  std::string cmd = bin_kubectl_ + " --kubeconfig=" + admin_kubeconfig();
  for (const auto& a : args) cmd += " '" + a + "'";
  int st = 0;
  std::string out = run_capture(cmd + " 2>&1", &st);
  if (output != nullptr) *output = out;
  return st;
}

namespace {
std::unique_ptr<ControlPlane>& shared_slot() {
  static std::unique_ptr<ControlPlane> cp;
  return cp;
}
}  // namespace

ControlPlane* shared_control_plane(std::string* why) {
  static bool tried = false;
  static std::string error;
  if (!tried) {
    tried = true;
    auto r = ControlPlane::start();
    if (r) {
      shared_slot() = std::move(*r);
      // Stopped at exit (static destructor) and, on a crash, by PDEATHSIG.
    } else {
      error = r.error().message;
    }
  }
  if (why != nullptr) *why = error;
  return shared_slot().get();
}

}  // namespace pressured::testing
