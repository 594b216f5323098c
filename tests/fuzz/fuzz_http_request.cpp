// The plain metrics port's request parser: any bytes are a request, a wait
// for more, or a refusal with a status, never a crash or UB; what parses is
// well-formed (a token method, a path from '/', a header section within the
// bound and the buffer), a complete request stays complete when cut to its
// header section, and a refusal formats into an answer.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "metrics/http_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the bound, as MetricsServerLimits::max_request_bytes would.
  const std::size_t max = 16 + static_cast<std::size_t>(data[0]) * 8;
  const std::string_view buf(reinterpret_cast<const char*>(data) + 1, size - 1);
  using pressured::web::ParseOutcome;
  const ParseOutcome p = pressured::web::parse_request(buf, max);
  switch (p.state) {
    case ParseOutcome::State::Complete: {
      if (p.length == 0 || p.length > buf.size() || p.length > max) std::abort();
      if (p.request.method.empty() || p.request.path.empty() || p.request.path.front() != '/') std::abort();
      if (p.request.target.substr(0, p.request.path.size()) != p.request.path) std::abort();
      const ParseOutcome again = pressured::web::parse_request(buf.substr(0, p.length), max);
      if (again.state != ParseOutcome::State::Complete || again.length != p.length ||
          again.request.method != p.request.method || again.request.target != p.request.target) {
        std::abort();
      }
      break;
    }
    case ParseOutcome::State::Refused: {
      if (p.status < 400 || p.status > 505 || p.reason.empty()) std::abort();
      pressured::web::Answer a{p.status, std::string(p.reason), {}};
      const std::string out = pressured::web::format_answer(a, false, pressured::web::http_date(0));
      if (out.rfind("HTTP/1.1 " + std::to_string(p.status) + " ", 0) != 0) std::abort();
      break;
    }
    case ParseOutcome::State::Incomplete:
      if (buf.size() >= max) std::abort();  // at the bound a request is complete or refused
      break;
  }
  return 0;
}
