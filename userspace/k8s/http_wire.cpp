#include "k8s/http_wire.hpp"

#include <arpa/inet.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

namespace pressured::k8s {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

bool has_ctl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

Error protocol(std::string what) { return Error{EPROTO, std::move(what)}; }

// A decimal length, without sign, spaces or overflow.
bool parse_decimal(std::string_view s, uint64_t& out) {
  if (s.size() > 19) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

// A chunk size: hex digits, then optional extensions after ';' (ignored).
bool parse_chunk_size(std::string_view line, uint64_t& out) {
  const std::string_view digits = trim(line.substr(0, line.find(';')));
  if (digits.size() > 15) return false;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out, 16);
  return !digits.empty() && ec == std::errc() && p == digits.data() + digits.size();
}

}  // namespace

std::string HttpUrl::authority() const {
  std::string h;
  const bool v6 = ip_literal && host.find(':') != std::string::npos;
  if (v6) h.push_back('[');
  h.append(host);
  if (v6) h.push_back(']');
  if (port != (tls ? 443 : 80)) h.append(":").append(std::to_string(port));
  return h;
}

Result<HttpUrl> parse_http_url(std::string_view url) {
  auto bad = [](const std::string& why) { return Error{EINVAL, why}; };
  HttpUrl u;
  auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return bad("no scheme (http:// or https://)");
  const std::string scheme = lower(url.substr(0, scheme_end));
  if (scheme == "https") {
    u.tls = true;
  } else if (scheme != "http") {
    return bad("scheme '" + scheme + "' is not http or https");
  }
  std::string_view rest = url.substr(scheme_end + 3);
  if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  auto path_start = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view target = path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  if (authority.find('@') != std::string_view::npos) return bad("user information in the URL is not supported");
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("unclosed '[' in the host");
    u.host = std::string(authority.substr(1, close - 1));
    in6_addr a6{};
    if (::inet_pton(AF_INET6, u.host.c_str(), &a6) != 1) return bad("'" + u.host + "' is not an IPv6 address");
    u.ip_literal = true;
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("unexpected text after the IPv6 address");
      port_text = after.substr(1);
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
    in_addr a4{};
    u.ip_literal = ::inet_pton(AF_INET, u.host.c_str(), &a4) == 1;
    if (u.host.find(':') != std::string::npos) return bad("an IPv6 address must be in brackets");
    for (char c : u.host) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) {
        return bad("character '" + std::string(1, c) + "' in the host");
      }
    }
  }
  if (u.host.empty()) return bad("no host");
  u.port = u.tls ? 443 : 80;
  if (!port_text.empty() || (authority.size() > 0 && authority.back() == ':')) {
    uint64_t p = 0;
    if (!parse_decimal(port_text, p) || p == 0 || p > 65535) return bad("port '" + std::string(port_text) + "'");
    u.port = static_cast<uint16_t>(p);
  }
  if (target.empty()) target = "/";
  if (target.front() == '?') u.target = "/";
  u.target += std::string(target);
  for (char c : u.target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return bad("space or control character in the path");
  }
  return u;
}

Result<std::string> format_http_request(const std::string& method, const HttpUrl& url,
                                        const std::vector<std::string>& headers, std::string_view body,
                                        bool accept_encoding) {
  if (method.empty() || std::any_of(method.begin(), method.end(), [](char c) { return !std::isupper(static_cast<unsigned char>(c)); })) {
    return Error{EINVAL, "HTTP method '" + method + "' is not a token of capitals"};
  }
  std::string out;
  out.reserve(256 + body.size());
  out += method + " " + url.target + " HTTP/1.1\r\nHost: " + url.authority() + "\r\n";
  if (accept_encoding) out += "Accept-Encoding: gzip, deflate\r\n";
  out += "Connection: close\r\n";
  for (const auto& h : headers) {
    if (has_ctl(h) || h.find(':') == std::string::npos || h.front() == ' ') {
      // The value is not said: it may be a credential.
      return Error{EINVAL, "HTTP header '" + h.substr(0, h.find(':')) + "' has a line break or no ':'"};
    }
    out += h + "\r\n";
  }
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += "\r\n";
  out.append(body);
  return out;
}

bool no_proxy_covers(std::string_view list, std::string_view host) {
  const std::string h = lower(host);
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string entry = lower(trim(list.substr(0, comma)));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (entry == "*") return true;
    if (!entry.empty() && entry.front() == '.') entry.erase(0, 1);
    if (entry.empty()) continue;
    if (h == entry) return true;
    if (h.size() > entry.size() && h.compare(h.size() - entry.size(), entry.size(), entry) == 0 &&
        h[h.size() - entry.size() - 1] == '.') {
      return true;
    }
  }
  return false;
}

// zlib's inflate for gzip and zlib-wrapped deflate (the header tells which).
struct HttpResponseReader::Inflater {
  z_stream z{};
  bool ok = false;
  bool ended = false;
  Inflater() { ok = inflateInit2(&z, 15 + 32) == Z_OK; }
  ~Inflater() {
    if (ok) inflateEnd(&z);
  }
};

HttpResponseReader::HttpResponseReader(bool head_request, Limits limits) : head_request_(head_request), limits_(limits) {}
HttpResponseReader::~HttpResponseReader() = default;

Result<bool> HttpResponseReader::emit(std::string_view raw, const Sink& sink) {
  if (raw.empty()) return true;
  if (!inflater_) return sink(raw);
  Inflater& in = *inflater_;
  if (in.ended) return protocol("data after the end of the compressed body");
  in.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  in.z.avail_in = static_cast<uInt>(raw.size());
  char out[16 * 1024];
  while (in.z.avail_in > 0 && !in.ended) {
    in.z.next_out = reinterpret_cast<Bytef*>(out);
    in.z.avail_out = sizeof out;
    int rc = inflate(&in.z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      in.ended = true;
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return protocol(std::string("compressed body does not decode: ") + (in.z.msg ? in.z.msg : "zlib error"));
    }
    const std::size_t produced = sizeof out - in.z.avail_out;
    if (produced > 0 && !sink(std::string_view(out, produced))) return false;
    if (rc == Z_BUF_ERROR && produced == 0) break;
  }
  return true;
}

Result<void> HttpResponseReader::parse_head() {
  const std::string_view head(pending_.data(), pending_.size() - 4);  // without its blank line
  auto line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  // HTTP/1.x SSS[ reason]
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ' ||
      !std::isdigit(static_cast<unsigned char>(status_line[9])) || !std::isdigit(static_cast<unsigned char>(status_line[10])) ||
      !std::isdigit(static_cast<unsigned char>(status_line[11])) || (status_line.size() > 12 && status_line[12] != ' ')) {
    return protocol("not an HTTP/1.x status line: '" + std::string(status_line.substr(0, 64)) + "'");
  }
  status_ = (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0');
  headers_.clear();
  bool chunked = false;
  bool have_length = false;
  uint64_t length = 0;
  std::string encoding;
  std::string_view rest = line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    auto eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0 || line.front() == ' ' || line.front() == '\t' ||
        line.substr(0, colon).find_first_of(" \t") != std::string_view::npos) {
      return protocol("malformed header line '" + std::string(line.substr(0, 64)) + "'");
    }
    std::string name = lower(line.substr(0, colon));
    std::string value(trim(line.substr(colon + 1)));
    if (name == "content-length") {
      uint64_t v = 0;
      if (!parse_decimal(value, v) || (have_length && v != length)) return protocol("bad Content-Length '" + value + "'");
      have_length = true;
      length = v;
    } else if (name == "transfer-encoding") {
      std::string te = lower(value);
      auto last = te.rfind(',');
      chunked = std::string(trim(last == std::string::npos ? te : te.substr(last + 1))) == "chunked";
    } else if (name == "content-encoding") {
      encoding = lower(value);
    }
    headers_[name] = std::move(value);
  }
  pending_.clear();
  if (status_ >= 100 && status_ < 200) {
    if (status_ == 101) return protocol("the server switched protocols (101), which was not asked");
    // An interim answer (100 Continue, 103 Early Hints): the real one follows.
    headers_.clear();
    status_ = 0;
    return {};
  }
  if (head_request_ || status_ == 204 || status_ == 304) {
    state_ = State::done;
  } else if (chunked) {
    state_ = State::chunk_size;
  } else if (have_length) {
    remaining_ = length;
    state_ = length == 0 ? State::done : State::body_length;
  } else {
    state_ = State::body_close;
  }
  // Decoded only where there is a body: a bodiless answer may still name
  // the encoding its body would have had.
  if (state_ != State::done && !encoding.empty() && encoding != "identity") {
    if (encoding != "gzip" && encoding != "x-gzip" && encoding != "deflate") {
      return protocol("Content-Encoding '" + encoding + "' cannot be decoded");
    }
    inflater_ = std::make_unique<Inflater>();
    if (!inflater_->ok) return Error{ENOMEM, "zlib inflateInit2 failed"};
  }
  return {};
}

Result<HttpResponseReader::Step> HttpResponseReader::finish() {
  if (inflater_ && !inflater_->ended) return protocol("the compressed body ended before its end");
  state_ = State::done;
  return Step::done;
}

Result<HttpResponseReader::Step> HttpResponseReader::feed(std::string_view data, const Sink& sink) {
  while (true) {
    switch (state_) {
      case State::done:
        return Step::done;
      case State::head: {
        const std::size_t had = pending_.size();
        const std::size_t room = limits_.max_head_bytes + 4 - std::min(had, limits_.max_head_bytes + 4);
        pending_.append(data.substr(0, room));
        const auto end = pending_.find("\r\n\r\n", had >= 3 ? had - 3 : 0);
        if (end == std::string::npos) {
          if (pending_.size() >= limits_.max_head_bytes + 4) {
            return protocol("response head larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
          }
          return Step::more;
        }
        // Only the head is taken from `data`; what follows it stays there.
        data.remove_prefix(end + 4 - had);
        pending_.resize(end + 4);
        auto parsed = parse_head();
        if (!parsed) return parsed.error();
        if (state_ == State::done) return finish();
        continue;
      }
      case State::body_close: {
        if (data.empty()) return Step::more;
        auto e = emit(data, sink);
        if (!e) return e.error();
        if (!*e) return Step::stopped;
        return Step::more;
      }
      case State::chunk_size:
      case State::chunk_data_end:
      case State::trailers: {
        if (data.empty()) return Step::more;
        auto eol = data.find('\n');
        std::string_view piece = data.substr(0, eol == std::string_view::npos ? data.size() : eol + 1);
        // The trailers share one bound (remaining_ counts their bytes so far).
        const std::size_t bound =
            state_ == State::trailers ? limits_.max_head_bytes - remaining_ : limits_.max_chunk_line_bytes;
        if (pending_.size() + piece.size() > bound + 2) {
          return protocol(state_ == State::trailers
                              ? "trailers larger than " + std::to_string(limits_.max_head_bytes) + " bytes"
                              : "chunk-size line longer than " + std::to_string(bound) + " bytes");
        }
        pending_.append(piece);
        data.remove_prefix(piece.size());
        if (eol == std::string_view::npos) return Step::more;
        std::string line = std::move(pending_);
        pending_.clear();
        if (line.size() < 2 || line[line.size() - 2] != '\r') return protocol("a chunk line does not end in CRLF");
        line.resize(line.size() - 2);
        if (state_ == State::chunk_data_end) {
          if (!line.empty()) return protocol("chunk data longer than its size");
          state_ = State::chunk_size;
        } else if (state_ == State::trailers) {
          if (line.empty()) return finish();
          remaining_ = std::min<uint64_t>(remaining_ + line.size() + 2, limits_.max_head_bytes);
        } else {
          uint64_t size = 0;
          if (!parse_chunk_size(line, size)) return protocol("bad chunk size '" + line.substr(0, 32) + "'");
          remaining_ = size;
          state_ = size == 0 ? State::trailers : State::chunk_data;  // remaining_ 0 starts the trailers' count
        }
        continue;
      }
      case State::body_length:
      case State::chunk_data: {
        if (data.empty()) return Step::more;
        auto take = data.substr(0, static_cast<std::size_t>(std::min<uint64_t>(remaining_, data.size())));
        data.remove_prefix(take.size());
        remaining_ -= take.size();
        auto e = emit(take, sink);
        if (!e) return e.error();
        if (!*e) return Step::stopped;
        if (remaining_ == 0) {
          if (state_ == State::body_length) return finish();
          state_ = State::chunk_data_end;
        }
        continue;
      }
    }
  }
}

Result<HttpResponseReader::Step> HttpResponseReader::end_of_input() {
  switch (state_) {
    case State::done:
      return Step::done;
    case State::body_close:
      return finish();
    case State::head:
      return protocol(pending_.empty() ? "the server closed the connection without answering"
                                       : "the connection closed inside the response head");
    default:
      return protocol("the connection closed before the end of the body");
  }
}

}  // namespace pressured::k8s
