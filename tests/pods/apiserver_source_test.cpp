// The API server pod source's list+watch loop against a stubbed PodApi: what
// a broken or hostile server can send (malformed, deep, endless answers), how
// often the loop asks again (410 Gone, watches that end at once: backoff, with
// an injected clock and sleep, never wall time), and paging. The same loop
// against a real HTTP server on 127.0.0.1 (gzip, paging by size) is at the
// end; against a real kube-apiserver, tests/k8s/pod_source_k8s_test.cpp.
#include "pods/apiserver_source.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pressured::pods {
namespace {

using namespace std::chrono_literals;

std::string pod_json(const std::string& name, const std::string& uid, const std::string& rv = "5") {
  return fmt::format(
      R"({{"kind":"Pod","metadata":{{"name":"{}","namespace":"ns","uid":"{}","resourceVersion":"{}"}},)"
      R"("spec":{{"nodeName":"node-a","containers":[{{"name":"c"}}]}},"status":{{"phase":"Running","qosClass":"BestEffort"}}}})",
      name, uid, rv);
}

std::string pod_list(const std::vector<std::string>& pods, const std::string& rv = "100", const std::string& cont = "") {
  std::string items;
  for (const auto& p : pods) items += (items.empty() ? "" : ",") + p;
  std::string meta = fmt::format(R"("resourceVersion":"{}")", rv);
  if (!cont.empty()) meta += fmt::format(R"(,"continue":"{}")", cont);
  return fmt::format(R"({{"kind":"PodList","apiVersion":"v1","metadata":{{{}}},"items":[{}]}})", meta, items);
}

class FakeClock final : public Clock {
 public:
  TimePoint now() const override { return t; }
  TimePoint t{std::chrono::hours(1)};
};

// Answers from queues; when a queue is empty, the fallback answer. Records
// every path asked.
class StubApi final : public PodApi {
 public:
  struct WatchAnswer {
    std::vector<std::string> chunks;
    long status = 200;
    std::string body;  // non-2xx
  };

  Result<k8s::HttpResponse> list(const std::string& path, std::size_t max_body_bytes) override {
    std::lock_guard lk(mu);
    list_paths.push_back(path);
    Result<k8s::HttpResponse> r = list_fallback;
    if (!lists.empty()) {
      r = lists.front();
      lists.pop_front();
    }
    if (r && r->body.size() > max_body_bytes) return Error{EFBIG, "response body larger than the bound"};
    return r;
  }

  Result<k8s::HttpResponse> watch(const std::string& path, Duration,
                                  const std::function<bool(std::string_view)>& on_data) override {
    WatchAnswer a = watch_fallback;
    {
      std::lock_guard lk(mu);
      watch_paths.push_back(path);
      if (!watches.empty()) {
        a = watches.front();
        watches.pop_front();
      }
    }
    k8s::HttpResponse resp;
    resp.status = a.status;
    if (a.status != 200) {
      resp.body = a.body;
      return resp;
    }
    for (const auto& c : a.chunks) {
      ++chunks_delivered;
      if (!on_data(c)) break;
    }
    return resp;
  }

  static Result<k8s::HttpResponse> ok(std::string body) {
    k8s::HttpResponse r;
    r.status = 200;
    r.body = std::move(body);
    return r;
  }

  std::mutex mu;
  std::deque<Result<k8s::HttpResponse>> lists;
  Result<k8s::HttpResponse> list_fallback = Error{ECONNREFUSED, "no more LIST answers"};
  std::deque<WatchAnswer> watches;
  WatchAnswer watch_fallback{{}, 500, "no more WATCH answers"};
  std::vector<std::string> list_paths, watch_paths;
  std::size_t chunks_delivered = 0;
};

struct Harness {
  std::shared_ptr<StubApi> api = std::make_shared<StubApi>();
  FakeClock clock;
  std::vector<Duration> sleeps;
  std::size_t max_sleeps = 10;
  // Time the clock moves at each sleep (the loop's only wait).
  bool advance_clock_on_sleep = true;

  ApiServerSourceOptions options() {
    ApiServerSourceOptions o;
    o.server.server = "https://stub";
    o.node_name = "node-a";
    o.api = api;
    o.clock = &clock;
    o.jitter_seed = 42;
    o.sleep = [this](Duration d) {
      sleeps.push_back(d);
      if (advance_clock_on_sleep) clock.t += d;
      return sleeps.size() < max_sleeps;
    };
    return o;
  }
};

// --- Malformed answers are errors, never an exception ---------------------

TEST(ApiServerSource, MalformedListsAreCountedErrors) {
  const std::vector<std::string> bodies = {
      "42",
      "\"a string\"",
      "null",
      "[]",
      std::string("{\"kind\":\"PodList\",\0\"metadata\":{}}", 30),
      R"({"kind":"PodList","items":[]})",                                    // no metadata
      R"({"kind":"PodList","metadata":7,"items":[]})",                       // metadata not an object
      R"({"kind":"PodList","metadata":{"resourceVersion":5},"items":[]})",   // rv not a string
      R"({"kind":"PodList","metadata":{"resourceVersion":"1","continue":{}},"items":[]})",
      R"({"kind":"PodList","metadata":{"resourceVersion":"1"},"items":{"a":1}})",
      R"({"kind":"PodList","metadata":{},"items":[]})",                      // nothing to watch from
  };
  for (const auto& body : bodies) {
    Harness h;
    h.api->lists.push_back(StubApi::ok(body));
    ApiServerPodSource src(h.options());
    auto r = src.refresh();
    EXPECT_FALSE(r) << body;
    EXPECT_EQ(src.counters().errors.load(), 1u) << body;
    EXPECT_EQ(src.counters().lists.load(), 0u) << body;
    EXPECT_FALSE(src.stats().last_error.empty()) << body;
    EXPECT_FALSE(src.stats().last_success.has_value()) << body;
  }
}

TEST(ApiServerSource, ItemsOfTheWrongShapeCostOnlyThemselves) {
  Harness h;
  h.api->lists.push_back(StubApi::ok(pod_list({pod_json("a", "uid-a"), "17", "null", R"({"metadata":[]})",
                                               R"({"kind":"Pod","metadata":{"uid":3}})"})));
  ApiServerPodSource src(h.options());
  ASSERT_TRUE(src.refresh());
  EXPECT_EQ(src.current()->count("uid-a"), 1u);
  EXPECT_EQ(src.resource_version(), "100");
  EXPECT_GE(src.stats().skipped_objects, 3u);
}

// Keeps the text of log records at warn and above.
struct WarnLines final : spdlog::sinks::base_sink<std::mutex> {
  std::vector<std::string> lines;
  void sink_it_(const spdlog::details::log_msg& m) override {
    if (m.level >= spdlog::level::warn) lines.emplace_back(m.payload.data(), m.payload.size());
  }
  void flush_() override {}
};

// A pod whose memory request cannot be read ("12x").
std::string odd_pod(const std::string& rv) {
  return R"({"kind":"Pod","metadata":{"name":"odd","namespace":"ns","uid":"uid-odd","resourceVersion":")" + rv +
         R"("},"spec":{"nodeName":"node-a","containers":[{"name":"c","resources":{"requests":{"memory":"12x"}}}]},)"
         R"("status":{"phase":"Running","qosClass":"Burstable"}})";
}

// WarnLines on the default logger for a test's length.
struct WarnCapture {
  std::shared_ptr<WarnLines> sink = std::make_shared<WarnLines>();
  std::shared_ptr<spdlog::logger> logger = spdlog::default_logger();
  WarnCapture() { logger->sinks().push_back(sink); }
  ~WarnCapture() { logger->sinks().pop_back(); }
  WarnCapture(const WarnCapture&) = delete;
  WarnCapture& operator=(const WarnCapture&) = delete;
  long count(const std::string& text) const {
    return std::count_if(sink->lines.begin(), sink->lines.end(),
                         [&](const std::string& l) { return l.find(text) != std::string::npos; });
  }
};

// A pod with a field that cannot be read is kept, unevictable on what the
// field concerns; why is said in the log, once while the LIST says the same.
TEST(ApiServerSource, AnUnreadableFieldOfAPodIsSaidOnce) {
  WarnCapture warnings;

  const std::string bad = odd_pod("5");
  Harness h;
  h.api->lists.push_back(StubApi::ok(pod_list({pod_json("a", "uid-a"), bad})));
  h.api->lists.push_back(StubApi::ok(pod_list({pod_json("a", "uid-a"), bad}, "101")));
  ApiServerPodSource src(h.options());
  ASSERT_TRUE(src.refresh());
  ASSERT_EQ(src.current()->count("uid-odd"), 1u);
  EXPECT_TRUE(src.current()->at("uid-odd").memory_spec_unparsable);
  EXPECT_EQ(warnings.count("ns/odd"), 1) << "the unreadable field is said, naming the pod";
  ASSERT_TRUE(src.refresh());
  EXPECT_EQ(warnings.count("ns/odd"), 1) << "not again while the LIST says the same";
}

// Runs the loop after a good LIST with the given watch streams; returns the
// source's state after the loop stopped (at its max_sleeps-th backoff).
struct WatchRun {
  std::unique_ptr<ApiServerPodSource> src;
  Harness h;
};

std::unique_ptr<WatchRun> run_watches(std::vector<StubApi::WatchAnswer> answers, std::size_t max_sleeps = 1,
                                      std::size_t max_event_bytes = 1 << 20) {
  auto w = std::make_unique<WatchRun>();
  w->h.max_sleeps = max_sleeps;
  w->h.api->list_fallback = StubApi::ok(pod_list({pod_json("a", "uid-a")}));
  for (auto& a : answers) w->h.api->watches.push_back(std::move(a));
  w->h.api->watch_fallback = StubApi::WatchAnswer{{}};  // then watches that end at once: a backoff
  auto o = w->h.options();
  o.max_event_bytes = max_event_bytes;
  w->src = std::make_unique<ApiServerPodSource>(o);
  w->src->run();
  return w;
}

// The same through the watch: said once while the events say the same.
TEST(ApiServerSource, AnUnreadableFieldInAWatchEventIsSaidOnce) {
  WarnCapture warnings;
  const std::string bad = odd_pod("6");
  const std::string event = R"({"type":"ADDED","object":)" + bad + "}\n";
  auto w = run_watches({StubApi::WatchAnswer{{event, event}}});
  ASSERT_EQ(w->src->current()->count("uid-odd"), 1u);
  EXPECT_EQ(warnings.count("ns/odd"), 1) << "said once for two events saying the same";
}

TEST(ApiServerSource, MalformedWatchLinesAreCountedErrors) {
  const std::vector<std::string> lines = {
      "not json",
      "42",
      R"({"type":7,"object":{}})",
      R"({"type":"ADDED","object":"x"})",
      R"({"type":"ADDED"})",
      R"({"type":"ERROR","object":{"code":"410"}})",
      R"({"type":"ERROR","object":{"code":500,"message":"boom"}})",
      R"({"type":"MODIFIED","object":{"metadata":{"resourceVersion":12,"uid":"u"}}})",
      R"({"type":"MODIFIED","object":{"metadata":"m"}})",
      R"({"type":"BOOKMARK","object":{"metadata":[]}})",
      std::string("{\"type\":\"ADDED\",\0\"object\":{}}", 30),
  };
  for (const auto& line : lines) {
    auto w = run_watches({StubApi::WatchAnswer{{line + "\n"}}});
    EXPECT_EQ(w->src->counters().errors.load(), 1u) << line;
    EXPECT_EQ(w->src->counters().watches.load(), 1u) << line;
    EXPECT_EQ(w->src->current()->size(), 1u) << line << ": the listed pod is kept";
    EXPECT_EQ(w->h.sleeps.size(), 1u) << line << ": a failed watch backs off";
  }
}

TEST(ApiServerSource, WatchEventsApplyAcrossChunkBoundaries) {
  std::string stream = R"({"type":"ADDED","object":)" + pod_json("b", "uid-b", "101") + "}\r\n\n" +
                       R"({"type":"DELETED","object":)" + pod_json("a", "uid-a", "102") + "}\n" +
                       R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"103"}}})" + "\n";
  std::vector<std::string> chunks;
  for (std::size_t i = 0; i < stream.size(); i += 7) chunks.push_back(stream.substr(i, 7));
  auto w = run_watches({StubApi::WatchAnswer{chunks}});
  EXPECT_EQ(w->src->counters().errors.load(), 0u) << w->src->stats().last_error;
  EXPECT_EQ(w->src->counters().events.load(), 2u);
  EXPECT_EQ(w->src->counters().bookmarks.load(), 1u);
  ASSERT_EQ(w->src->current()->size(), 1u);
  EXPECT_EQ(w->src->current()->count("uid-b"), 1u);
  EXPECT_EQ(w->src->resource_version(), "103");
}

// --- Deep and endless input -------------------------------------------------

TEST(ApiServerSource, DeepWatchObjectIsAnErrorNotAStackOverflow) {
  const std::size_t depth = 200000;
  std::string deep = R"({"type":"ADDED","object":{"metadata":{"uid":"d"},"spec":)" + std::string(depth, '[') +
                     std::string(depth, ']') + "}}\n";
  auto w = run_watches({StubApi::WatchAnswer{{deep}}}, 1, 4u << 20);
  EXPECT_EQ(w->src->counters().errors.load(), 1u);
  EXPECT_NE(w->src->stats().last_error.find("nested deeper than"), std::string::npos) << w->src->stats().last_error;
}

TEST(ApiServerSource, DeepListIsAnErrorNotAStackOverflow) {
  Harness h;
  const std::size_t depth = 200000;
  h.api->lists.push_back(StubApi::ok(R"({"kind":"PodList","metadata":{"resourceVersion":"1"},"items":[)" +
                                     std::string(depth, '[') + std::string(depth, ']') + "]}"));
  ApiServerPodSource src(h.options());
  auto r = src.refresh();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("nested deeper than"), std::string::npos) << r.error().message;
}

TEST(ApiServerSource, EndlessLineEndsTheWatchAtTheBound) {
  // 64 MiB without a newline, offered in 64 KiB chunks; the bound is 1 MiB.
  std::vector<std::string> chunks(1024, std::string(64 * 1024, ' '));
  chunks.front() = R"({"type":"ADDED","object":{"metadata":{"annotations":{"a":")" + chunks.front();
  auto w = run_watches({StubApi::WatchAnswer{chunks}}, 1, 1u << 20);
  EXPECT_EQ(w->src->counters().errors.load(), 1u);
  EXPECT_NE(w->src->stats().last_error.find("an event over 1048576 bytes"), std::string::npos)
      << w->src->stats().last_error;
  EXPECT_LE(w->h.api->chunks_delivered, 17u) << "the watch must end once the line passes the bound";
  EXPECT_EQ(w->h.sleeps.size(), 1u) << "then back off and watch again";
}

// --- Backoff ----------------------------------------------------------------

const std::string kGone = R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})"
                          "\n";

TEST(ApiServerSource, GoneBacksOffExponentiallyWithJitterAndRelistsFromEtcd) {
  Harness h;
  h.max_sleeps = 12;
  h.api->list_fallback = StubApi::ok(pod_list({pod_json("a", "uid-a")}));
  h.api->watch_fallback = StubApi::WatchAnswer{{kGone}};
  ApiServerPodSource src(h.options());
  src.run();
  ASSERT_EQ(h.sleeps.size(), 12u);
  // One LIST and one WATCH per backoff (and the first pair before any).
  EXPECT_LE(h.api->list_paths.size(), h.sleeps.size() + 1);
  EXPECT_LE(h.api->watch_paths.size(), h.sleeps.size() + 1);
  EXPECT_EQ(src.counters().relists_gone.load(), h.api->watch_paths.size());
  // client-go's numbers: 0.8 s doubling to 30 s, each wait in [d, 2d).
  Duration d = 800ms;
  for (std::size_t i = 0; i < h.sleeps.size(); ++i) {
    EXPECT_GE(h.sleeps[i], d) << i;
    EXPECT_LT(h.sleeps[i], 2 * d) << i;
    d = std::min<Duration>(d * 2, 30s);
  }
  EXPECT_NE(h.sleeps[0], h.sleeps[1] / 2) << "jittered";
  // The first LIST reads the watch cache; after a 410 the cache may be as old
  // as what expired, so the relist reads etcd (no resourceVersion).
  ASSERT_GE(h.api->list_paths.size(), 2u);
  EXPECT_NE(h.api->list_paths[0].find("resourceVersion=0"), std::string::npos) << h.api->list_paths[0];
  EXPECT_EQ(h.api->list_paths[1].find("resourceVersion"), std::string::npos) << h.api->list_paths[1];
  EXPECT_NE(h.api->watch_paths[1].find("resourceVersion=100"), std::string::npos) << h.api->watch_paths[1];
}

TEST(ApiServerSource, WatchesThatEndAtOnceBackOff) {
  Harness h;
  h.max_sleeps = 8;
  h.api->list_fallback = StubApi::ok(pod_list({}));
  h.api->watch_fallback = StubApi::WatchAnswer{{}};  // 200, nothing, closed
  ApiServerPodSource src(h.options());
  src.run();
  ASSERT_EQ(h.sleeps.size(), 8u);
  EXPECT_LE(h.api->watch_paths.size(), h.sleeps.size() + 1);
  EXPECT_EQ(h.api->list_paths.size(), 1u) << "the watch resumes from its resourceVersion";
  EXPECT_EQ(src.counters().short_watches.load(), h.api->watch_paths.size());
  EXPECT_GE(h.sleeps.back(), 30s) << "capped base, reached";
  EXPECT_LT(h.sleeps.back(), 60s);
}

TEST(ApiServerSource, WatchesThatLastDoNotBackOff) {
  Harness h;
  h.max_sleeps = 1;
  h.api->list_fallback = StubApi::ok(pod_list({}));
  // Five watches that each last (the clock moves while they stream), then a failure.
  for (int i = 0; i < 5; ++i) h.api->watches.push_back(StubApi::WatchAnswer{{""}});
  ApiServerSourceOptions o = h.options();
  auto inner = h.api;
  struct Timed final : PodApi {
    std::shared_ptr<StubApi> inner;
    FakeClock* clock;
    Result<k8s::HttpResponse> list(const std::string& p, std::size_t m) override { return inner->list(p, m); }
    Result<k8s::HttpResponse> watch(const std::string& p, Duration t,
                                    const std::function<bool(std::string_view)>& f) override {
      clock->t += 60s;
      return inner->watch(p, t, f);
    }
  };
  auto timed = std::make_shared<Timed>();
  timed->inner = inner;
  timed->clock = &h.clock;
  o.api = timed;
  ApiServerPodSource src(o);
  src.run();
  EXPECT_EQ(h.api->watch_paths.size(), 6u);
  EXPECT_EQ(h.sleeps.size(), 1u) << "only the failed one backs off";
  EXPECT_EQ(src.counters().short_watches.load(), 0u);
}

TEST(ApiServerSource, BackoffStartsAgainAfterAQuietPeriod) {
  Harness h;
  h.max_sleeps = 6;
  h.api->list_fallback = StubApi::ok(pod_list({}));
  h.api->watch_fallback = StubApi::WatchAnswer{{}, 503, "unavailable"};
  ApiServerSourceOptions o = h.options();
  o.sleep = [&](Duration d) {
    h.sleeps.push_back(d);
    // The fourth wait comes after three healthy minutes.
    h.clock.t += h.sleeps.size() == 3 ? 3min : d;
    return h.sleeps.size() < h.max_sleeps;
  };
  ApiServerPodSource src(o);
  src.run();
  ASSERT_EQ(h.sleeps.size(), 6u);
  EXPECT_GE(h.sleeps[2], 3200ms);
  EXPECT_LT(h.sleeps[3], 1600ms) << "reset to the initial 800 ms";
  EXPECT_GE(h.sleeps[3], 800ms);
}

// --- Paging -------------------------------------------------------------------

TEST(ApiServerSource, ListIsPagedAndBoundedPerPage) {
  Harness h;
  ApiServerSourceOptions o = h.options();
  o.max_page_bytes = 1500;  // 4 pods fit, 10 do not
  o.page_size = 4;
  // The watch cache's one-page answer is over the bound: list from etcd, in pages.
  std::vector<std::string> all;
  for (int i = 0; i < 10; ++i) all.push_back(pod_json(fmt::format("p{}", i), fmt::format("uid-{}", i)));
  h.api->lists.push_back(StubApi::ok(pod_list(all)));
  h.api->lists.push_back(StubApi::ok(pod_list({all[0], all[1], all[2], all[3]}, "200", "c1")));
  // Too large for the bound at 4: asked again with 2.
  h.api->lists.push_back(StubApi::ok(pod_list({all[4], all[5], all[6], all[7]}, "200", "c2") + std::string(4096, ' ')));
  h.api->lists.push_back(StubApi::ok(pod_list({all[4], all[5]}, "200", "c3")));
  h.api->lists.push_back(StubApi::ok(pod_list({all[6], all[7]}, "200", "c4")));
  h.api->lists.push_back(StubApi::ok(pod_list({all[8], all[9]}, "200")));
  ApiServerPodSource src(o);
  ASSERT_TRUE(src.refresh()) << src.stats().last_error;
  EXPECT_EQ(src.current()->size(), 10u);
  EXPECT_EQ(src.resource_version(), "200");
  EXPECT_EQ(src.counters().list_pages.load(), 4u);
  const auto& p = h.api->list_paths;
  ASSERT_EQ(p.size(), 6u);
  EXPECT_NE(p[0].find("resourceVersion=0"), std::string::npos) << p[0];
  EXPECT_NE(p[1].find("limit=4"), std::string::npos) << p[1];
  EXPECT_EQ(p[1].find("resourceVersion"), std::string::npos) << p[1];
  EXPECT_NE(p[2].find("continue=c1"), std::string::npos) << p[2];
  EXPECT_NE(p[3].find("limit=2&continue=c1"), std::string::npos) << p[3];
  EXPECT_NE(p[4].find("limit=2&continue=c3"), std::string::npos) << p[4];
  EXPECT_NE(p[5].find("continue=c4"), std::string::npos) << p[5];

  // The next LIST goes to etcd directly.
  h.api->lists.push_back(StubApi::ok(pod_list({all[0]}, "300")));
  ASSERT_TRUE(src.refresh());
  EXPECT_EQ(h.api->list_paths.back().find("resourceVersion"), std::string::npos);
  EXPECT_EQ(src.current()->size(), 1u);
}

TEST(ApiServerSource, ExpiredContinuationIsAnErrorAndTheOldMapStays) {
  Harness h;
  ApiServerSourceOptions o = h.options();
  o.max_page_bytes = 450;  // the watch cache's one page is over it: the LIST goes to etcd, in pages
  h.api->lists.push_back(StubApi::ok(pod_list({pod_json("a", "uid-a"), pod_json("b", "uid-b")}, "100")));
  h.api->lists.push_back(StubApi::ok(pod_list({pod_json("a", "uid-a")}, "100", "c1")));
  k8s::HttpResponse gone;
  gone.status = 410;
  gone.body = R"({"kind":"Status","code":410})";
  h.api->lists.push_back(gone);
  ApiServerPodSource src(o);
  auto r = src.refresh();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("continuation expired"), std::string::npos) << r.error().message;
  EXPECT_EQ(src.current()->size(), 0u) << "half a list is never published";
}

// --- Over real HTTP: gzip and the page bound ---------------------------------

TEST(ApiServerSource, ListsOverHttpCompressedAndPaged) {
  httplib::Server srv;
  std::mutex mu;
  std::vector<std::string> seen_paths, seen_encodings;
  std::vector<std::string> pods;
  for (int i = 0; i < 40; ++i) {
    pods.push_back(pod_json(fmt::format("p{}", i), fmt::format("uid-{}", i)));
    // Tenant annotations: each pod ~8 KiB, highly compressible.
    pods.back().insert(pods.back().find("\"uid\""),
                       fmt::format(R"("annotations":{{"big":"{}"}},)", std::string(8000, 'x')));
  }
  srv.Get("/api/v1/pods", [&](const httplib::Request& req, httplib::Response& res) {
    std::size_t limit = std::stoul(req.get_param_value("limit"));
    std::size_t from = req.has_param("continue") ? std::stoul(req.get_param_value("continue")) : 0;
    if (req.get_param_value("resourceVersion") == "0") limit = pods.size();  // the watch cache ignores limit
    std::size_t to = std::min(pods.size(), from + limit);
    {
      std::lock_guard lk(mu);
      seen_paths.push_back(req.target);
      seen_encodings.push_back(req.get_header_value("Accept-Encoding"));
    }
    std::vector<std::string> page(pods.begin() + static_cast<long>(from), pods.begin() + static_cast<long>(to));
    res.set_content(pod_list(page, "77", to < pods.size() ? std::to_string(to) : ""), "application/json");
  });
  const int port = srv.bind_to_any_port("127.0.0.1");
  std::thread t([&] { srv.listen_after_bind(); });
  for (int i = 0; i < 200 && !srv.is_running(); ++i) std::this_thread::sleep_for(5ms);

  ApiServerSourceOptions o;
  o.server.server = fmt::format("http://127.0.0.1:{}", port);
  o.node_name = "node-a";
  o.request_timeout = 5s;
  o.max_page_bytes = 128 * 1024;  // the 40 pods are ~330 KiB: 16 a page fit
  o.page_size = 500;
  ApiServerPodSource src(o);
  auto r = src.refresh();
  srv.stop();
  t.join();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(src.current()->size(), 40u);
  ASSERT_GE(seen_paths.size(), 3u);
  for (const auto& e : seen_encodings) EXPECT_NE(e.find("gzip"), std::string::npos) << e;
  EXPECT_NE(seen_paths[0].find("resourceVersion=0"), std::string::npos) << seen_paths[0];
  EXPECT_GT(src.counters().list_pages.load(), 2u);
}

// --- A whole LIST is bounded (a server or proxy that keeps paging) ----------

// An HTTP server on 127.0.0.1 for the duration of a test; `pods` answers
// GET /api/v1/pods.
struct LocalApiServer {
  httplib::Server srv;
  std::thread thread;
  int port = 0;
  std::mutex mu;
  std::vector<std::string> targets;  // every request's path and query

  explicit LocalApiServer(std::function<void(const httplib::Request&, httplib::Response&)> pods) {
    srv.Get("/api/v1/pods", [this, pods](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lk(mu);
        targets.push_back(req.target);
      }
      pods(req, res);
    });
    port = srv.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { srv.listen_after_bind(); });
    for (int i = 0; i < 200 && !srv.is_running(); ++i) std::this_thread::sleep_for(5ms);
  }
  ~LocalApiServer() {
    srv.stop();
    thread.join();
  }
  std::vector<std::string> seen() {
    std::lock_guard lk(mu);
    return targets;
  }
  ApiServerSourceOptions options() const {
    ApiServerSourceOptions o;
    o.server.server = fmt::format("http://127.0.0.1:{}", port);
    o.node_name = "node-a";
    o.request_timeout = 5s;
    return o;
  }
};

// `n` pods named after the page they come on, each uid new.
std::vector<std::string> fresh_pods(std::size_t page, std::size_t n, std::size_t annotation_bytes = 0) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(pod_json(fmt::format("p{}-{}", page, i), fmt::format("uid-{}-{}", page, i)));
    if (annotation_bytes > 0) {
      out.back().insert(out.back().find("\"uid\""),
                        fmt::format(R"("annotations":{{"a":"{}"}},)", std::string(annotation_bytes, 'x')));
    }
  }
  return out;
}

// A server that pages new pods without end (stopped by the test after 30
// pages of 100, so that the LIST ends without the bound too): the LIST is
// refused at the pod bound (1000 here; 20 000 by default), not followed
// further, and nothing of it is published. It pages its resourceVersion=0
// answer too: that token is not followed, the LIST goes to etcd.
TEST(ApiServerSourceBounds, AServerThatKeepsPagingNewPodsIsRefusedAtThePodBound) {
  LocalApiServer server([](const httplib::Request& req, httplib::Response& res) {
    const std::size_t page = req.has_param("continue") ? std::stoul(req.get_param_value("continue")) : 0;
    const bool more = page + 1 < 30;
    res.set_content(pod_list(fresh_pods(page, 100), "77", more ? std::to_string(page + 1) : ""), "application/json");
  });
  ApiServerSourceOptions o = server.options();
  o.page_size = 100;
  o.max_list_pods = 1000;
  ApiServerPodSource src(o);
  auto r = src.refresh();
  ASSERT_FALSE(r) << "a LIST of 3000 pods was taken whole";
  EXPECT_NE(r.error().message.find("more than 1000 pods"), std::string::npos) << r.error().message;
  EXPECT_EQ(src.current()->size(), 0u) << "half a list is never published";
  EXPECT_EQ(src.counters().refused_pods.load(), 1u);
  EXPECT_EQ(src.counters().refused_cache_continue.load(), 1u);
  EXPECT_EQ(src.counters().errors.load(), 1u);
  EXPECT_EQ(server.seen().size(), 1u + 11u) << "the resourceVersion=0 answer, then etcd's pages up to the bound";
  EXPECT_EQ(ApiServerSourceOptions{}.max_list_pods, 20000u);
  EXPECT_EQ(ApiServerSourceOptions{}.max_list_bytes, std::size_t{64} << 20);
}

// The same by bytes: pods of 64 KiB each, a few hundred of them, paged
// without end, stop at the byte bound (1 MiB here) long before the pod bound.
TEST(ApiServerSourceBounds, AServerThatKeepsPagingLargePodsIsRefusedAtTheByteBound) {
  LocalApiServer server([](const httplib::Request& req, httplib::Response& res) {
    const std::size_t page = req.has_param("continue") ? std::stoul(req.get_param_value("continue")) : 0;
    const bool more = page + 1 < 200;
    res.set_content(pod_list(fresh_pods(page, 2, 64 * 1024), "77", more ? std::to_string(page + 1) : ""),
                    "application/json");
  });
  ApiServerSourceOptions o = server.options();
  o.max_list_bytes = std::size_t{1} << 20;
  ApiServerPodSource src(o);
  auto r = src.refresh();
  ASSERT_FALSE(r) << "a LIST of 25 MiB was taken whole";
  EXPECT_NE(r.error().message.find("more than 1048576 bytes"), std::string::npos) << r.error().message;
  EXPECT_EQ(src.counters().refused_bytes.load(), 1u);
  EXPECT_EQ(src.current()->size(), 0u);
  EXPECT_EQ(server.seen().size(), 1u + 8u) << "the resourceVersion=0 answer, then etcd's pages up to the bound";
}

// A server that answers every page with the same continue token: refused
// at the first repeat, not asked 20 000 times. (Stopped by the test after
// 100 pages, so that the LIST ends without the check too.)
TEST(ApiServerSourceBounds, ARepeatedContinueTokenIsRefusedAtOnce) {
  std::atomic<int> asked{0};
  LocalApiServer server([&](const httplib::Request&, httplib::Response& res) {
    const bool more = ++asked < 100;
    res.set_content(pod_list({pod_json("a", "uid-a")}, "77", more ? "again" : ""), "application/json");
  });
  ApiServerPodSource src(server.options());
  auto r = src.refresh();
  ASSERT_FALSE(r) << "a LIST that repeated its token 99 times was taken";
  EXPECT_NE(r.error().message.find("continue token it had sent before"), std::string::npos) << r.error().message;
  EXPECT_EQ(src.counters().refused_repeated_token.load(), 1u);
  const auto seen = server.seen();
  // The resourceVersion=0 answer's token is not followed; from etcd, the
  // first page, then the token once, whose answer repeats it.
  ASSERT_EQ(seen.size(), 3u) << "asked once with the token, and refused its answer";
  EXPECT_EQ(seen[1].find("continue"), std::string::npos) << seen[1];
  EXPECT_NE(seen[2].find("continue=again"), std::string::npos) << seen[2];
}

// The watch cache answers resourceVersion=0 in one page whatever the limit:
// a continue token on such an answer comes from something else (the cache
// off for pods, a proxy). It is not followed; this node's pods are listed
// from etcd in pages instead, from then on.
TEST(ApiServerSourceBounds, AContinueOnAResourceVersionZeroAnswerIsNotFollowed) {
  LocalApiServer server([](const httplib::Request& req, httplib::Response& res) {
    const std::size_t from = req.has_param("continue") ? std::stoul(req.get_param_value("continue")) : 0;
    std::vector<std::string> page;
    for (std::size_t i = from; i < std::min<std::size_t>(from + 2, 5); ++i) {
      page.push_back(pod_json(fmt::format("p{}", i), fmt::format("uid-{}", i)));
    }
    const std::string rv = req.get_param_value("resourceVersion") == "0" ? "50" : "60";
    res.set_content(pod_list(page, rv, from + 2 < 5 ? std::to_string(from + 2) : ""), "application/json");
  });
  ApiServerSourceOptions o = server.options();
  o.page_size = 2;
  ApiServerPodSource src(o);
  auto r = src.refresh();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(src.current()->size(), 5u);
  EXPECT_EQ(src.resource_version(), "60") << "the etcd LIST's snapshot, not the cache answer's";
  EXPECT_EQ(src.counters().refused_cache_continue.load(), 1u);
  EXPECT_EQ(src.counters().errors.load(), 0u) << "not a failure: listed again at once";
  auto seen = server.seen();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_NE(seen[0].find("resourceVersion=0"), std::string::npos) << seen[0];
  for (std::size_t i = 1; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].find("resourceVersion"), std::string::npos) << "the RV=0 answer's token was followed: " << seen[i];
  }
  EXPECT_EQ(seen[1].find("continue"), std::string::npos) << seen[1];
  // The next LIST goes to etcd directly.
  ASSERT_TRUE(src.refresh());
  seen = server.seen();
  EXPECT_EQ(seen[4].find("resourceVersion"), std::string::npos) << seen[4];
}

// A refused LIST is a failed LIST: the loop backs off before the next, as
// after any error (never a tight loop of LISTs), and each refusal is counted.
TEST(ApiServerSourceBounds, ARefusedListIsFollowedByABackoff) {
  Harness h;
  h.max_sleeps = 4;
  h.api->list_fallback = StubApi::ok(pod_list({pod_json("a", "uid-a")}, "77", "same"));
  ApiServerPodSource src(h.options());
  src.run();
  ASSERT_EQ(h.sleeps.size(), 4u);
  for (const auto& d : h.sleeps) EXPECT_GE(d, 800ms) << "each LIST refused is followed by a backoff";
  EXPECT_EQ(src.counters().refused_repeated_token.load(), 4u) << "one refusal per LIST";
  EXPECT_EQ(src.counters().errors.load(), 4u);
  // The first LIST: the RV=0 answer's token not followed, then from etcd:
  // the token, and its repeat. The next three: from etcd, two requests each.
  EXPECT_EQ(src.counters().refused_cache_continue.load(), 1u);
  EXPECT_EQ(h.api->list_paths.size(), 3u + 3 * 2u) << "a backoff between LISTs, none within";
  EXPECT_EQ(src.counters().lists.load(), 0u);
}

}  // namespace
}  // namespace pressured::pods
