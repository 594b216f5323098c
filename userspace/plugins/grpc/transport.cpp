// The gRPC transport of the plugin API: a module pressured dlopens when
// plugins.directory is set (so a node without plugins never maps gRPC).
// It turns the plain questions of pressured/plugins.hpp into the messages of
// proto/plugin_v1alpha1.proto and the answers back, enforcing the answer
// limits on the way: a message over max_message_bytes is an error, entries
// over max_entries and values of unknown enums are dropped and counted,
// reasons are cut.

#include <grpcpp/grpcpp.h>

#include <algorithm>

#include "plugin_v1alpha1.grpc.pb.h"
#include "pressured/plugins.hpp"

namespace pressured::plugins {
namespace {

namespace pb = ::pressured::plugin::v1alpha1;

pb::Resource to_pb(Lane l) {
  switch (l) {
    case Lane::Memory: return pb::MEMORY;
    case Lane::Disk: return pb::EPHEMERAL_STORAGE;
    case Lane::Pids: return pb::PIDS;
  }
  return pb::RESOURCE_UNSPECIFIED;
}

std::optional<Lane> from_pb(int r) {
  switch (r) {
    case pb::MEMORY: return Lane::Memory;
    case pb::EPHEMERAL_STORAGE: return Lane::Disk;
    case pb::PIDS: return Lane::Pids;
    default: return std::nullopt;
  }
}

pb::QosClass to_pb(QosClass q) {
  switch (q) {
    case QosClass::Guaranteed: return pb::GUARANTEED;
    case QosClass::Burstable: return pb::BURSTABLE;
    case QosClass::BestEffort: return pb::BEST_EFFORT;
  }
  return pb::QOS_UNSPECIFIED;
}

CallError kind_of(const grpc::Status& s) {
  switch (s.error_code()) {
    case grpc::StatusCode::DEADLINE_EXCEEDED: return CallError::Timeout;
    case grpc::StatusCode::UNAVAILABLE: return CallError::Unavailable;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // an answer over the size limit
    case grpc::StatusCode::INTERNAL:            // an answer that does not parse
      return CallError::Garbage;
    default: return CallError::Other;
  }
}

class GrpcClient final : public PluginClient {
 public:
  GrpcClient(const std::string& socket, const AnswerLimits& limits) : limits_(limits) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(limits.max_message_bytes));
    // One try per call: pressured's own backoff decides when to ask again.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    stub_ = pb::EvictionPlugin::NewStub(
        grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
  }

  std::size_t take_dropped() override { return std::exchange(dropped_, 0); }

  Answer<Identity> identify(Duration deadline) override {
    pb::IdentifyRequest req;
    req.set_api_version(kApiVersion);
    req.add_features(kFeaturePodLabels);
    pb::IdentifyResponse resp;
    if (auto f = call(deadline, [&](grpc::ClientContext* c) { return stub_->Identify(c, req, &resp); })) return *f;
    Identity id;
    id.name = resp.name();
    id.version = cut(resp.version());
    for (int c : resp.capabilities()) {
      switch (c) {
        case pb::THRESHOLDS: id.thresholds = true; break;
        case pb::RANK: id.rank = true; break;
        case pb::PROPOSE: id.propose = true; break;
        default: ++dropped_;
      }
    }
    return id;
  }

  Answer<std::vector<ThresholdReport>> thresholds(Duration deadline) override {
    pb::GetThresholdsRequest req;
    pb::GetThresholdsResponse resp;
    if (auto f = call(deadline, [&](grpc::ClientContext* c) { return stub_->GetThresholds(c, req, &resp); })) return *f;
    std::vector<ThresholdReport> out;
    for (const auto& t : resp.thresholds()) {
      const auto lane = from_pb(t.resource());
      const bool op_ok = t.operator_() == pb::LESS_THAN || t.operator_() == pb::GREATER_THAN;
      const bool kind_ok = t.kind() == pb::SOFT || t.kind() == pb::HARD;
      if (out.size() >= limits_.max_entries || !lane || !op_ok || !kind_ok) {
        ++dropped_;
        continue;
      }
      out.push_back(ThresholdReport{cut(t.signal()), t.observed(), t.threshold(), t.operator_() == pb::LESS_THAN,
                                    t.kind() == pb::HARD ? ThresholdKind::Hard : ThresholdKind::Soft,
                                    t.grace_period_seconds(), *lane});
    }
    return out;
  }

  Answer<std::vector<Adjustment>> rank(const LaneQuestion& q, Duration deadline) override {
    pb::RankCandidatesRequest req;
    req.set_resource(to_pb(q.lane));
    for (const auto& s : q.signals_met) req.add_signals_met(s);
    req.set_hard(q.hard);
    for (const auto& c : q.candidates) fill(*req.add_candidates(), c);
    pb::RankCandidatesResponse resp;
    if (auto f = call(deadline, [&](grpc::ClientContext* c) { return stub_->RankCandidates(c, req, &resp); })) {
      return *f;
    }
    std::vector<Adjustment> out;
    for (const auto& a : resp.adjustments()) {
      std::optional<Action> action;
      switch (a.action()) {
        case pb::PROTECT: action = Action::Protect; break;
        case pb::DEMOTE: action = Action::Demote; break;
        case pb::PROMOTE: action = Action::Promote; break;
        default: break;
      }
      if (out.size() >= limits_.max_entries || !action) {
        ++dropped_;
        continue;
      }
      out.push_back(Adjustment{a.uid().substr(0, 128), *action, cut(a.reason())});
    }
    return out;
  }

  Answer<std::vector<Proposal>> propose(const LaneQuestion& q, Duration deadline) override {
    pb::ProposeEvictionsRequest req;
    req.set_resource(to_pb(q.lane));
    for (const auto& s : q.signals_met) req.add_signals_met(s);
    for (const auto& c : q.candidates) fill(*req.add_candidates(), c);
    pb::ProposeEvictionsResponse resp;
    if (auto f = call(deadline, [&](grpc::ClientContext* c) { return stub_->ProposeEvictions(c, req, &resp); })) {
      return *f;
    }
    std::vector<Proposal> out;
    for (const auto& p : resp.proposals()) {
      if (out.size() >= limits_.max_entries) {
        ++dropped_;
        continue;
      }
      out.push_back(Proposal{p.uid().substr(0, 128), cut(p.reason())});
    }
    return out;
  }

 private:
  template <typename F>
  std::optional<Failure> call(Duration deadline, F&& f) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline));
    const grpc::Status s = f(&ctx);
    if (s.ok()) return std::nullopt;
    return Failure{kind_of(s), cut(s.error_message())};
  }

  std::string cut(const std::string& s) const { return s.substr(0, limits_.max_reason_chars); }

  static void fill(pb::Pod& p, const CandidatePod& c) {
    p.set_uid(c.uid);
    p.set_name(c.name);
    p.set_namespace_(c.namespace_);
    p.set_qos(to_pb(c.qos));
    p.set_priority(c.priority);
    p.set_usage(c.usage);
    p.set_request(c.request);
    p.set_daemonset(c.daemonset);
    if (c.labels) {
      auto& labels = *p.mutable_labels();
      for (const auto& [k, v] : c.labels->entries) labels[k] = v;
      p.set_labels_incomplete(c.labels->incomplete);
    }
  }

  AnswerLimits limits_;
  std::unique_ptr<pb::EvictionPlugin::Stub> stub_;
  std::size_t dropped_ = 0;
};

class GrpcConnector final : public PluginConnector {
 public:
  std::unique_ptr<PluginClient> connect(const std::string& socket_path, const AnswerLimits& limits) override {
    return std::make_unique<GrpcClient>(socket_path, limits);
  }
};

}  // namespace
}  // namespace pressured::plugins

extern "C" __attribute__((visibility("default"))) pressured::plugins::PluginConnector*
pressured_plugin_connector_v1alpha1() {
  return new pressured::plugins::GrpcConnector();
}
