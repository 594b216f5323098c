#pragma once
// The metrics endpoint's listen address, parsed once for both `check-config`
// and `run`: whatever the first accepts, the second can bind (or fails only
// for reasons of the machine it runs on, such as a name that does not resolve
// or a port in use).

#include <cstdint>
#include <string>
#include <string_view>

#include "pressured/result.hpp"

namespace pressured {

/// A parsed listen address: "host:port", "[v6]:port" or ":port" (all interfaces).
struct ListenAddress {
  std::string host;  // IPv4 or IPv6 literal, or a host name; "0.0.0.0" for ":port"
  uint16_t port = 0;  // 0: any free port (the bound port is logged)
  std::string to_string() const;
};

/// Parses MetricsConfig::listen. The host must be empty, an IPv4 literal, a
/// bracketed IPv6 literal or a DNS host name; the port a number 0-65535. On
/// error the message says what is wrong and what is expected, without
/// repeating the text (callers name the setting and the value).
Result<ListenAddress> parse_listen_address(std::string_view text);

}  // namespace pressured
