// The API server pod source's paged LIST over a stub server that answers
// each request from the input: whatever pages a server sends (new pods
// without end, its own token again, pages that change size or status, a
// paged resourceVersion=0 answer), the LIST ends within its bounds, with a
// pod map or an error, never a crash, a hang or unbounded memory.
//
// Input: pages separated by NUL bytes, answered in order; past the last,
// the last again (a server that keeps sending the same page). A page's first
// byte picks the answer: 'E' a network error, 'G' 410 Gone, 'S' HTTP 500,
// anything else a 200 with the page (the first byte included) as its body.
// Two LISTs run on one source, so that what the first one learnt (list from
// etcd from then on) is used by the second.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pods/apiserver_source.hpp"

namespace {

using namespace pressured;

// Small bounds, so that a few kilobytes of input reach them.
constexpr std::size_t kMaxPods = 64;
constexpr std::size_t kMaxBytes = 32 * 1024;
constexpr std::size_t kMaxPageBytes = 8 * 1024;
// No LIST may ask more than this: one request per page the input holds
// (at most its size), each retried with the limit halved when over the page
// bound (log2 of page_size times), plus the LIST again from etcd.
constexpr std::size_t kPageSize = 16;

class Stub final : public pods::PodApi {
 public:
  std::vector<std::string_view> pages;
  std::size_t next = 0;
  std::size_t requests = 0;
  std::vector<std::string> paths;  // of the LIST under way

  Result<k8s::HttpResponse> list(const std::string& path, std::size_t max_body_bytes) override {
    ++requests;
    paths.push_back(path);
    std::string_view page = pages.empty() ? std::string_view() : pages[std::min(next, pages.size() - 1)];
    ++next;
    k8s::HttpResponse r;
    r.status = 200;
    if (!page.empty() && page[0] == 'E') return Error{ECONNRESET, "reset"};
    if (!page.empty() && page[0] == 'G') r.status = 410;
    if (!page.empty() && page[0] == 'S') r.status = 500;
    if (page.size() > max_body_bytes) return Error{EFBIG, "response body larger than the bound"};
    r.body = std::string(page);
    return r;
  }

  Result<k8s::HttpResponse> watch(const std::string&, Duration, const std::function<bool(std::string_view)>&) override {
    return Error{ECONNREFUSED, "no watch here"};
  }
};

std::string param(const std::string& path, std::string_view name) {
  const std::string key = "&" + std::string(name) + "=";
  auto at = path.find(key);
  if (at == std::string::npos) return {};
  at += key.size();
  return path.substr(at, path.find('&', at) - at);
}

// What must hold of every LIST, whatever was answered.
void check_list(const Stub& stub, const pods::ApiServerPodSource& src, std::size_t input_pages) {
  // Bounded work: not more requests than pages given, times the halvings, twice.
  const std::size_t bound = 2 * (input_pages + 1) * 6;
  if (stub.paths.size() > bound) std::abort();
  if (src.current()->size() > kMaxPods) std::abort();
  std::set<std::pair<std::string, std::string>> asked;  // (continue, limit)
  for (const auto& p : stub.paths) {
    const std::string cont = param(p, "continue");
    // A resourceVersion=0 answer's token is never followed.
    if (!cont.empty() && p.find("resourceVersion=0") != std::string::npos) std::abort();
    // A continuation is never asked twice with the same limit (the server's
    // token again is refused, not followed round its loop). The first page
    // is asked twice when the RV=0 answer is left for etcd's.
    if (!cont.empty() && !asked.insert({cont, param(p, "limit")}).second) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // every input logs its error: the fuzzer's time goes to stderr
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto stub = std::make_shared<Stub>();
  while (true) {
    auto nul = in.find('\0');
    stub->pages.push_back(in.substr(0, nul));
    if (nul == std::string_view::npos) break;
    in.remove_prefix(nul + 1);
  }
  pods::ApiServerSourceOptions o;
  o.server.server = "https://fuzz";
  o.node_name = "node-a";
  o.api = stub;
  o.jitter_seed = 1;
  o.page_size = kPageSize;
  o.max_page_bytes = kMaxPageBytes;
  o.max_list_pods = kMaxPods;
  o.max_list_bytes = kMaxBytes;
  o.sleep = [](Duration) { return false; };
  pods::ApiServerPodSource src(o);
  for (int list = 0; list < 2; ++list) {
    stub->paths.clear();
    (void)src.refresh();
    check_list(*stub, src, stub->pages.size());
  }
  return 0;
}
