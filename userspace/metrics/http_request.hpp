#pragma once
// The plain metrics port's HTTP/1.1 request parser and answer writer
// (RFC 9112), pure: the bytes that have arrived in, a request or the status
// that refuses it out. Strict on purpose: the port serves a few GET paths to
// probes and scrapers, so a request that does not follow the grammar is
// refused (fail closed), never guessed at, and a request whose framing two
// parsers could read differently (bare LF, folded or space-padded header
// names, two lengths) never reaches the router.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pressured::web {

/// What a request is answered.
struct Answer {
  unsigned status = 200;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string type = "text/plain";
};

/// A request line and what the port needs of its header fields. The views
/// point into the buffer given to parse_request.
struct HttpRequest {
  std::string_view method;  // a token, case-sensitive ("GET", "HEAD", ...)
  std::string_view target;  // origin-form, as sent ("/metrics?x=1")
  std::string_view path;    // the target up to its query
  unsigned minor_version = 1;  // HTTP/1.<minor>
};

struct ParseOutcome {
  enum class State {
    Incomplete,  // more bytes are needed (and may come: the request is under the bound)
    Complete,    // `request` holds it; `length` bytes of the buffer are its header section
    Refused,     // answer `status` and close; `reason` says why (the answer's body)
  };
  State state = State::Incomplete;
  HttpRequest request;
  std::size_t length = 0;
  unsigned status = 0;
  std::string_view reason;
};

/// Parses the request at the start of `buf`, what has arrived so far, with
/// its header section bounded to `max_bytes`. Refused with 400 (grammar,
/// a missing or second Host in HTTP/1.1, conflicting lengths), 413 (content
/// on a GET or HEAD: this port reads none), 414 (a request line past the
/// bound), 431 (header fields past it), 505 (not HTTP/1.x). Methods other
/// than GET and HEAD parse (the router answers them 405).
ParseOutcome parse_request(std::string_view buf, std::size_t max_bytes);

/// The reason phrase of a status this port answers ("Not Found").
std::string_view reason_phrase(unsigned status);

/// An HTTP/1.1 answer with Content-Length, Date (`date`, IMF-fixdate) and
/// Connection: close; without the body when `head`.
std::string format_answer(const Answer& answer, bool head, std::string_view date);

/// IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") of a Unix time.
std::string http_date(long long unix_seconds);

}  // namespace pressured::web
