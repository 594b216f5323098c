// The HTTP client's response reader (k8s/http_wire.hpp), pure: whatever a
// server or a man in the middle of plain HTTP sends, a response, an error
// value or a stop, never a crash, a hang or unbounded memory.
//
// Input: the bytes of the connection, cut into reads at each 0x01 byte (as
// the network would cut them); the first byte picks a HEAD request (bit 0)
// and a small body bound (bit 1), against which the sink stops the reading.
#include <cstdint>
#include <string>
#include <string_view>

#include "k8s/http_wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  pressured::k8s::HttpResponseReader::Limits limits;
  limits.max_head_bytes = 4096;
  pressured::k8s::HttpResponseReader reader((flags & 1) != 0, limits);
  const std::size_t bound = (flags & 2) != 0 ? 64 : (1u << 20);
  std::size_t body = 0;
  pressured::k8s::HttpResponseReader::Sink sink = [&](std::string_view d) {
    if (d.empty()) __builtin_trap();  // the reader never hands out nothing
    body += d.size();
    return body <= bound;
  };
  using Step = pressured::k8s::HttpResponseReader::Step;
  while (true) {
    auto cut = in.find('\x01');
    auto r = reader.feed(in.substr(0, cut), sink);
    if (!r || *r != Step::more) return 0;
    if (cut == std::string_view::npos) break;
    in.remove_prefix(cut + 1);
  }
  (void)reader.end_of_input();
  return 0;
}
