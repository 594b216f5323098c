// pressured-plugin-protect: an example eviction plugin (docs/plugins.md).
//
// Protects the pods of some namespaces from eviction, and demotes others
// (evicted only after every other candidate), for every resource:
//
//   pressured-plugin-protect --socket /run/pressured/plugins/protect.sock
//       --protect kube-system --protect payments --demote-last batch
//
// `--protect ns/name-prefix` protects only the pods of `ns` whose name starts
// with the prefix. pressured decides what the protection may do: under a
// hard threshold the last candidate is evicted all the same.

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plugin_v1alpha1.grpc.pb.h"

namespace pb = ::pressured::plugin::v1alpha1;

namespace {

struct Rule {
  std::string ns;
  std::string name_prefix;  // empty: every pod of the namespace
  bool matches(const pb::Pod& p) const {
    return p.namespace_() == ns && p.name().compare(0, name_prefix.size(), name_prefix) == 0;
  }
  std::string text() const { return name_prefix.empty() ? "namespace " + ns : ns + "/" + name_prefix + "*"; }
};

Rule parse_rule(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos) return Rule{s, ""};
  return Rule{s.substr(0, slash), s.substr(slash + 1)};
}

class Protect final : public pb::EvictionPlugin::Service {
 public:
  Protect(std::string name, std::vector<Rule> protect, std::vector<Rule> demote)
      : name_(std::move(name)), protect_(std::move(protect)), demote_(std::move(demote)) {}

  grpc::Status Identify(grpc::ServerContext*, const pb::IdentifyRequest* req, pb::IdentifyResponse* resp) override {
    if (req->api_version() != "v1alpha1") {
      std::fprintf(stderr, "protect: pressured speaks %s, this plugin v1alpha1\n", req->api_version().c_str());
    }
    resp->set_name(name_);
    resp->set_version("1.0");
    resp->add_capabilities(pb::RANK);
    return grpc::Status::OK;
  }

  grpc::Status RankCandidates(grpc::ServerContext*, const pb::RankCandidatesRequest* req,
                              pb::RankCandidatesResponse* resp) override {
    for (const pb::Pod& p : req->candidates()) {
      for (const Rule& r : protect_) {
        if (!r.matches(p)) continue;
        auto* a = resp->add_adjustments();
        a->set_uid(p.uid());
        a->set_action(pb::PROTECT);
        a->set_reason("protected: " + r.text());
        break;
      }
      for (const Rule& r : demote_) {
        if (!r.matches(p)) continue;
        auto* a = resp->add_adjustments();
        a->set_uid(p.uid());
        a->set_action(pb::DEMOTE);
        a->set_reason("evicted last: " + r.text());
        break;
      }
    }
    return grpc::Status::OK;
  }

 private:
  std::string name_;
  std::vector<Rule> protect_, demote_;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int usage() {
  std::fprintf(stderr,
               "usage: pressured-plugin-protect --socket PATH [--name NAME] [--protect NS[/PREFIX]]... "
               "[--demote-last NS[/PREFIX]]...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket, name = "protect";
  std::vector<Rule> protect, demote;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string v = argv[++i];
    if (a == "--socket") {
      socket = v;
    } else if (a == "--name") {
      name = v;
    } else if (a == "--protect") {
      protect.push_back(parse_rule(v));
    } else if (a == "--demote-last") {
      demote.push_back(parse_rule(v));
    } else {
      return usage();
    }
  }
  if (socket.empty() || (protect.empty() && demote.empty())) return usage();
  // A socket left by an earlier run would refuse the bind.
  ::unlink(socket.c_str());
  Protect service(name, protect, demote);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "protect: cannot listen on %s\n", socket.c_str());
    return 1;
  }
  std::fprintf(stderr, "protect: %s serving on %s\n", name.c_str(), socket.c_str());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  while (!g_stop) ::pause();
  server->Shutdown();
  ::unlink(socket.c_str());  // pressured drops the plugin when its socket goes
  return 0;
}
