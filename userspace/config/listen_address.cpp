#include "pressured/listen_address.hpp"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>

namespace pressured {

namespace {

// RFC 1123 host name: dot-separated labels of letters, digits and '-', none
// starting or ending with '-', at most 63 characters each and 253 in all.
bool is_host_name(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  if (h.back() == '.') h.remove_suffix(1);  // a fully qualified "name."
  std::size_t start = 0;
  while (start <= h.size()) {
    const auto dot = h.find('.', start);
    const auto label = h.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-') return false;
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

bool parses_as(int family, const std::string& text) {
  unsigned char buf[16];
  return ::inet_pton(family, text.c_str(), buf) == 1;
}

}  // namespace

std::string ListenAddress::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> parse_listen_address(std::string_view text) {
  const auto bad = [](std::string_view why) {
    return Error{EINVAL, std::string(why) + " (expected host:port, [ipv6]:port or :port, port 0-65535)"};
  };
  if (text.find("://") != std::string_view::npos) return bad("a URL is not a listen address");
  ListenAddress out;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    out.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("missing ':port' after ']'");
    port_text = text.substr(close + 2);
    // A zone ("fe80::1%eth0") is for getaddrinfo to resolve; the address before it must be IPv6.
    if (!parses_as(AF_INET6, out.host.substr(0, out.host.find('%')))) {
      return bad("'" + out.host + "' in brackets is not an IPv6 address");
    }
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':port'");
    out.host = std::string(text.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return bad("IPv6 addresses must be in brackets");
    port_text = text.substr(colon + 1);
    if (out.host.empty()) {
      out.host = "0.0.0.0";
    } else if (out.host.find_first_not_of("0123456789.") == std::string::npos) {
      // All digits and dots: meant as an IPv4 address, never a name to look up.
      if (!parses_as(AF_INET, out.host)) return bad("'" + out.host + "' is not an IPv4 address");
    } else if (!is_host_name(out.host)) {
      return bad("'" + out.host + "' is not an IP address or host name");
    }
  }
  if (port_text.empty()) return bad("empty port");
  unsigned port = 0;
  const auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return bad("port must be a number 0-65535");
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

}  // namespace pressured
