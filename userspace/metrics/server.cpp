// MetricsServer: /metrics, /healthz and /readyz on one cpp-httplib server.
// prometheus-cpp's Exposer serves only registries, so the exposition is
// rendered with its TextSerializer (Metrics::render) and served here beside
// the two probes, on one port and one small thread pool.

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <memory>
#include <thread>

#include <httplib.h>

#include "pressured/metrics.hpp"

namespace pressured {

std::string ListenAddress::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<ListenAddress> parse_listen_address(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return Error{EINVAL, "invalid metrics listen address \"" + std::string(text) + "\": " + std::string(why) +
                             " (expected host:port, [ipv6]:port or :port)"};
  };
  ListenAddress out;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return bad("missing ']'");
    out.host = std::string(text.substr(1, close - 1));
    if (close + 1 >= text.size() || text[close + 1] != ':') return bad("missing ':port' after ']'");
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing ':port'");
    out.host = std::string(text.substr(0, colon));
    if (out.host.find(':') != std::string::npos) return bad("IPv6 addresses must be in brackets");
    port_text = text.substr(colon + 1);
  }
  if (out.host.empty()) out.host = "0.0.0.0";
  if (port_text.empty()) return bad("empty port");
  unsigned port = 0;
  const auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return bad("port must be a number 0-65535");
  }
  out.port = static_cast<uint16_t>(port);
  return out;
}

struct MetricsServer::Impl {
  const Metrics* metrics = nullptr;
  httplib::Server server;
  std::thread thread;
  ListenAddress bound;
  bool stopped = false;
};

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { stop(); }

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const Metrics& metrics, std::string_view listen) {
  auto addr = parse_listen_address(listen);
  if (!addr) return addr.error();

  auto impl = std::make_unique<Impl>();
  impl->metrics = &metrics;
  auto& svr = impl->server;
  // Scrapes and probes are rare and small: two workers are plenty.
  svr.new_task_queue = [] { return new httplib::ThreadPool(2); };
  svr.set_read_timeout(5, 0);
  svr.set_write_timeout(5, 0);
  const Metrics* m = &metrics;
  svr.Get("/metrics", [m](const httplib::Request&, httplib::Response& res) {
    res.set_content(m->render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  svr.Get("/healthz", [m](const httplib::Request&, httplib::Response& res) {
    const bool ok = m->alive();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ok\n" : "reactor heartbeat stale\n", "text/plain");
  });
  svr.Get("/readyz", [m](const httplib::Request&, httplib::Response& res) {
    const bool ok = m->ready();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ready\n" : "not ready: events not attached or no observation yet\n", "text/plain");
  });
  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("pressured: /metrics /healthz /readyz\n", "text/plain");
  });

  errno = 0;
  int port = addr->port;
  bool bound = false;
  if (port == 0) {
    port = svr.bind_to_any_port(addr->host);
    bound = port > 0;
  } else {
    bound = svr.bind_to_port(addr->host, port);
  }
  if (!bound) {
    const int err = errno;
    std::string what = "cannot listen for metrics on " + addr->to_string();
    if (err != 0) return Error::from_errno(err, what);
    return Error{EADDRNOTAVAIL, what + ": address cannot be resolved or bound"};
  }
  impl->bound = ListenAddress{addr->host, static_cast<uint16_t>(port)};

  auto finished = std::make_shared<std::atomic<bool>>(false);
  impl->thread = std::thread([s = &svr, finished] {
    s->listen_after_bind();
    *finished = true;
  });
  // A stop() issued before the accept loop runs would be lost: wait until the
  // loop runs (it starts at once, or returns at once on a broken socket).
  while (!svr.is_running() && !*finished) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (*finished) {
    impl->thread.join();
    return Error{EIO, "metrics server on " + impl->bound.to_string() + " stopped at once"};
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

uint16_t MetricsServer::port() const { return impl_->bound.port; }

std::string MetricsServer::address() const { return impl_->bound.to_string(); }

void MetricsServer::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->server.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

}  // namespace pressured
