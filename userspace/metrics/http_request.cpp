// The plain metrics port's request parser and answer writer (RFC 9112).

#include "metrics/http_request.hpp"

#include <cstdio>
#include <ctime>

namespace pressured::web {

namespace {

// tchar (RFC 9110, 5.6.2): the characters of a method or a field name.
bool is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+':
    case '-': case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A field value's characters: VCHAR, obs-text, SP and HTAB (no CTL, no DEL).
bool is_field_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ParseOutcome refuse(unsigned status, std::string_view reason) {
  ParseOutcome o;
  o.state = ParseOutcome::State::Refused;
  o.status = status;
  o.reason = reason;
  return o;
}

// request-line = method SP request-target SP HTTP-version, one space each.
// nullopt-like: sets `out` and returns 0, or the status that refuses it.
unsigned parse_request_line(std::string_view line, HttpRequest& out, std::string_view& why) {
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    why = "malformed request line\n";
    return 400;
  }
  out.method = line.substr(0, sp1);
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(out.method)) {
    why = "malformed method\n";
    return 400;
  }
  // origin-form only: a path from '/', visible ASCII, no fragment.
  if (out.target.empty() || out.target.front() != '/') {
    why = "request target is not a path\n";
    return 400;
  }
  for (char ch : out.target) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c >= 0x7f || c == '#') {
      why = "malformed request target\n";
      return 400;
    }
  }
  out.path = out.target.substr(0, out.target.find('?'));
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    why = "malformed HTTP version\n";
    return 400;
  }
  if (version[5] != '1') {
    why = "only HTTP/1.x\n";
    return 505;
  }
  out.minor_version = static_cast<unsigned>(version[7] - '0');
  return 0;
}

}  // namespace

ParseOutcome parse_request(std::string_view buf, std::size_t max_bytes) {
  // Only the first max_bytes count: a request must end within them.
  const bool over = buf.size() > max_bytes;
  if (over) buf = buf.substr(0, max_bytes);
  const bool at_bound = buf.size() >= max_bytes;
  ParseOutcome out;
  std::size_t pos = 0;
  bool first = true;
  bool host = false, content_length = false, transfer_encoding = false;
  unsigned long long length = 0;
  while (true) {
    const std::size_t nl = buf.find('\n', pos);
    if (nl == std::string_view::npos) {
      // A CR must be followed by LF, a line must not hold a lone CR: what
      // has arrived of the line being read is checked now, not at its end.
      const std::size_t cr = buf.find('\r', pos);
      if (cr != std::string_view::npos && cr + 1 < buf.size()) return refuse(400, "bare CR\n");
      if (!at_bound) return out;  // Incomplete
      return first ? refuse(414, "request line too long\n") : refuse(431, "request header fields too large\n");
    }
    if (nl == pos || buf[nl - 1] != '\r') return refuse(400, "line not ended by CRLF\n");
    const std::string_view line = buf.substr(pos, nl - 1 - pos);
    if (line.find('\r') != std::string_view::npos) return refuse(400, "bare CR\n");
    pos = nl + 1;
    if (first) {
      first = false;
      std::string_view why;
      if (unsigned st = parse_request_line(line, out.request, why); st != 0) return refuse(st, why);
      continue;
    }
    if (line.empty()) break;  // end of the header section
    if (line.front() == ' ' || line.front() == '\t') return refuse(400, "folded header field\n");
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return refuse(400, "malformed header field\n");
    const std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return refuse(400, "malformed header field name\n");
    const std::string_view raw = line.substr(colon + 1);
    for (char c : raw) {
      if (!is_field_char(static_cast<unsigned char>(c))) return refuse(400, "malformed header field value\n");
    }
    const std::string_view value = trim_ows(raw);
    if (iequals(name, "host")) {
      if (host) return refuse(400, "more than one Host\n");
      host = true;
    } else if (iequals(name, "content-length")) {
      if (content_length) return refuse(400, "more than one Content-Length\n");
      content_length = true;
      if (value.empty() || value.size() > 18) return refuse(400, "malformed Content-Length\n");
      for (char c : value) {
        if (c < '0' || c > '9') return refuse(400, "malformed Content-Length\n");
        length = length * 10 + static_cast<unsigned>(c - '0');
      }
    } else if (iequals(name, "transfer-encoding")) {
      transfer_encoding = true;
    }
  }
  if (content_length && transfer_encoding) return refuse(400, "both Content-Length and Transfer-Encoding\n");
  if (out.request.minor_version >= 1 && !host) return refuse(400, "HTTP/1.1 without Host\n");
  const bool get_or_head = out.request.method == "GET" || out.request.method == "HEAD";
  if (get_or_head && (length > 0 || transfer_encoding)) return refuse(413, "this port reads no request content\n");
  out.state = ParseOutcome::State::Complete;
  out.length = pos;
  return out;
}

std::string_view reason_phrase(unsigned status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string format_answer(const Answer& a, bool head, std::string_view date) {
  std::string out;
  out.reserve(160 + (head ? 0 : a.body.size()));
  out.append("HTTP/1.1 ").append(std::to_string(a.status)).append(" ").append(reason_phrase(a.status));
  out.append("\r\nContent-Type: ").append(a.type);
  out.append("\r\nContent-Length: ").append(std::to_string(a.body.size()));
  out.append("\r\nDate: ").append(date);
  out.append("\r\nConnection: close");
  for (const auto& [k, v] : a.headers) out.append("\r\n").append(k).append(": ").append(v);
  out.append("\r\n\r\n");
  if (!head) out.append(a.body);
  return out;
}

std::string http_date(long long unix_seconds) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (::gmtime_r(&t, &tm) == nullptr) return "Thu, 01 Jan 1970 00:00:00 GMT";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", kDays[tm.tm_wday % 7], tm.tm_mday,
                kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

}  // namespace pressured::web
