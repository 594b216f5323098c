// The API server pod source's real list() and watch() over a stubbed PodApi:
// whatever a server answers, an error value and a backoff, never a crash, a
// hang or unbounded memory.
//
// Input: <LIST body> NUL <watch stream>. The LIST answers every page with the
// same body (so a `continue` is followed a few times); the watch stream is
// cut into chunks at each 0x01 byte, as the network would cut it.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "pods/apiserver_source.hpp"

namespace {

using namespace pressured;

class FixedClock final : public Clock {
 public:
  TimePoint now() const override { return TimePoint{}; }
};

class Stub final : public pods::PodApi {
 public:
  std::string_view list_body, stream;
  int lists = 0, watches = 0;

  Result<k8s::HttpResponse> list(const std::string&, std::size_t max_body_bytes) override {
    if (++lists > 4) return Error{ECONNREFUSED, "enough"};
    if (list_body.size() > max_body_bytes) return Error{EFBIG, "too long"};
    k8s::HttpResponse r;
    r.status = 200;
    r.body = std::string(list_body);
    return r;
  }

  Result<k8s::HttpResponse> watch(const std::string&, Duration,
                                  const std::function<bool(std::string_view)>& on_data) override {
    k8s::HttpResponse r;
    r.status = 200;
    if (++watches > 2) return r;
    std::string_view rest = stream;
    while (!rest.empty()) {
      auto cut = rest.find('\x01');
      std::string_view chunk = rest.substr(0, cut);
      if (!on_data(chunk)) break;
      if (cut == std::string_view::npos) break;
      rest.remove_prefix(cut + 1);
    }
    return r;
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // every input logs its error: the fuzzer's time goes to stderr
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nul = in.find('\0');
  auto stub = std::make_shared<Stub>();
  stub->list_body = in.substr(0, nul);
  if (nul != std::string_view::npos) stub->stream = in.substr(nul + 1);
  static const FixedClock clock;
  pods::ApiServerSourceOptions o;
  o.server.server = "https://fuzz";
  o.node_name = "node-a";
  o.api = stub;
  o.clock = &clock;
  o.jitter_seed = 1;
  o.max_page_bytes = 48 * 1024;
  o.max_event_bytes = 16 * 1024;
  int sleeps = 0;
  o.sleep = [&](Duration) { return ++sleeps < 3; };
  pods::ApiServerPodSource src(o);
  src.run();
  return 0;
}
