// The one listen-address parser, shared by `check-config` (config
// validation) and `run` (the metrics server).
#include "pressured/listen_address.hpp"

#include <gtest/gtest.h>

#include "config/load.hpp"

namespace pressured {
namespace {

TEST(ListenAddress, Parses) {
  auto a = parse_listen_address("0.0.0.0:9847");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 9847);
  a = parse_listen_address(":9847");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 9847);
  a = parse_listen_address("[::1]:80");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->to_string(), "[::1]:80");
  a = parse_listen_address("[::]:9100");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::");
  a = parse_listen_address("[fe80::1%eth0]:9100");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "fe80::1%eth0");
  a = parse_listen_address("localhost:0");  // 0: any free port
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 0);
  a = parse_listen_address("node-1.example.com.:65535");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 65535);
  EXPECT_EQ(a->to_string(), "node-1.example.com.:65535");
}

TEST(ListenAddress, RejectsWithTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "missing ':port'"},
      {"9847", "missing ':port'"},
      {"host:", "empty port"},
      {"host:port", "port must be a number 0-65535"},
      {"host:65536", "port must be a number 0-65535"},
      {"h:-1", "port must be a number 0-65535"},
      {"h:80x", "port must be a number 0-65535"},
      {"::1:80", "IPv6 addresses must be in brackets"},
      {"[::1]80", "missing ':port' after ']'"},
      {"[::1]", "missing ':port' after ']'"},
      {"[::1", "missing ']'"},
      {"[]:9100", "is not an IPv6 address"},
      {"[127.0.0.1]:9100", "'127.0.0.1' in brackets is not an IPv6 address"},
      {"256.1.1.1:9100", "'256.1.1.1' is not an IPv4 address"},
      {"1.2.3:9100", "'1.2.3' is not an IPv4 address"},
      {"exa mple:9100", "'exa mple' is not an IP address or host name"},
      {"-node:9100", "is not an IP address or host name"},
      {"a..b:9100", "is not an IP address or host name"},
      {"http://x:9100", "a URL is not a listen address"},
      {"x/y:9100", "'x/y' is not an IP address or host name"},
  };
  for (const auto& [text, why] : cases) {
    auto r = parse_listen_address(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().code, EINVAL) << text;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << text << ": " << r.error().message;
    EXPECT_NE(r.error().message.find("expected host:port, [ipv6]:port or :port"), std::string::npos);
  }
}

// check-config used its own looser parser: these passed validation and then
// failed (or, for a bad host, failed only at bind time) in `run`.
TEST(ListenAddress, ConfigValidationUsesTheSameParser) {
  for (const char* text : {"::1:9100", "[::1:9100", "[::1]9100", "256.1.1.1:9100", "exa mple:9100", "host:", ":65536"}) {
    std::vector<std::string> warnings;
    auto c = parse_config_yaml(std::string("metrics: {listen: '") + text + "'}\n", {}, &warnings);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_NE(c.error().message.find(std::string("metrics.listen: '") + text + "' is not a listen address: "),
              std::string::npos)
        << c.error().message;
    auto p = parse_listen_address(text);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(c.error().message.find(p.error().message), std::string::npos) << c.error().message;
  }
  for (const char* text : {"[::1]:9100", ":9100", "127.0.0.1:0", "localhost:9847"}) {
    std::vector<std::string> warnings;
    auto c = parse_config_yaml(std::string("metrics: {listen: '") + text + "'}\n", {}, &warnings);
    ASSERT_TRUE(c.ok()) << text << ": " << c.error().message;
    EXPECT_EQ(c->metrics.listen, text);
    EXPECT_TRUE(parse_listen_address(text).ok()) << text;
  }
}

}  // namespace
}  // namespace pressured
