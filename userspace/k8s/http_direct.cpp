// The direct transport: one connection per request (Connection: close, as
// the libcurl transport had one handle per request), non-blocking, every
// wait a poll() bounded by the request's deadlines; TLS 1.2 through mbedTLS.
//
// Why not libcurl for everything: Debian's libcurl maps about 30 libraries
// (OpenSSL and GnuTLS both, krb5, ldap, ssh2, ...) for 6-8 MiB resident,
// half of a node daemon's footprint, to send a few kinds of request to two
// servers. mbedTLS is about 0.6 MiB. What it lacks (TLS 1.3 in Debian's
// 2.28, proxies) http_client.cpp still sends through libcurl.

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/asn1.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "k8s/http_transports.hpp"

namespace pressured::k8s::detail {

namespace {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using std::chrono::milliseconds;

// Debian's curl looks here for the system's CAs; so does this transport.
constexpr const char* kSystemCaBundle = "/etc/ssl/certs/ca-certificates.crt";

int ms_until(Deadline d) {
  auto ms = std::chrono::ceil<milliseconds>(d - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, INT_MAX));
}

long long ms_between(Deadline a, Deadline b) { return std::chrono::duration_cast<milliseconds>(b - a).count(); }

// 1 ready, 0 the deadline passed, -1 an error (errno).
int wait_fd(int fd, short events, Deadline until) {
  while (true) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, ms_until(until));
    if (r < 0 && errno == EINTR) continue;
    return r;
  }
}

std::string mbed_error(int rc) {
  char buf[160];
  mbedtls_strerror(rc, buf, sizeof buf);
  return buf;
}

// The certificate names the IP address the URL gives: an iPAddress entry of
// its subjectAltName (the common name does not count, as in Go's x509 and
// OpenSSL's X509_check_ip). mbedTLS 2.28 matches DNS names only.
bool names_ip(const mbedtls_x509_crt& crt, const std::string& ip) {
  unsigned char want[16];
  std::size_t want_len = 0;
  if (::inet_pton(AF_INET, ip.c_str(), want) == 1) {
    want_len = 4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), want) == 1) {
    want_len = 16;
  } else {
    return false;
  }
  for (const mbedtls_x509_sequence* s = &crt.subject_alt_names; s != nullptr && s->buf.p != nullptr; s = s->next) {
    const int tag = s->buf.tag;
    if ((tag & MBEDTLS_ASN1_CONTEXT_SPECIFIC) != 0 && (tag & MBEDTLS_ASN1_TAG_VALUE_MASK) == 7 &&
        s->buf.len == want_len && std::memcmp(s->buf.p, want, want_len) == 0) {
      return true;
    }
  }
  return false;
}

int verify_ip(void* ip, mbedtls_x509_crt* crt, int depth, uint32_t* flags) {
  if (depth == 0 && !names_ip(*crt, *static_cast<const std::string*>(ip))) *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
  return 0;
}

// A PEM blob as mbedTLS parses it: NUL-terminated, the NUL counted.
Result<void> parse_certs(mbedtls_x509_crt& chain, const std::string& pem, const std::string& file, const char* what) {
  int rc = 0;
  if (!pem.empty()) {
    rc = mbedtls_x509_crt_parse(&chain, reinterpret_cast<const unsigned char*>(pem.c_str()), pem.size() + 1);
  } else {
    rc = mbedtls_x509_crt_parse_file(&chain, file.c_str());
  }
  // A positive rc counts certificates of a bundle that did not parse; the
  // others are used, as OpenSSL does with a bundle.
  if (rc < 0 || chain.version == 0) {
    return Error{EINVAL, std::string(what) + " " + (pem.empty() ? file : std::string("(inline PEM)")) + ": " +
                             (rc < 0 ? mbed_error(rc) : std::string("no certificate in it"))};
  }
  return {};
}

class Connection {
 public:
  Connection() {
    mbedtls_ssl_init(&ssl_);
    mbedtls_ssl_config_init(&conf_);
    mbedtls_x509_crt_init(&ca_);
    mbedtls_x509_crt_init(&cert_);
    mbedtls_pk_init(&key_);
    mbedtls_entropy_init(&entropy_);
    mbedtls_ctr_drbg_init(&drbg_);
  }
  ~Connection() {
    mbedtls_ssl_free(&ssl_);
    mbedtls_ssl_config_free(&conf_);
    mbedtls_x509_crt_free(&ca_);
    mbedtls_x509_crt_free(&cert_);
    mbedtls_pk_free(&key_);
    mbedtls_ctr_drbg_free(&drbg_);
    mbedtls_entropy_free(&entropy_);
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  Result<void> connect(const HttpUrl& url, Deadline by) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (url.ip_literal ? AI_NUMERICHOST : 0);
    addrinfo* found = nullptr;
    const std::string port = std::to_string(url.port);
    if (int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return Error{EIO, "cannot resolve " + url.host + ": " + ::gai_strerror(rc)};
    }
    std::string last = "no address";
    bool timed_out = false;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        last = std::strerror(errno);
        continue;
      }
      int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        int w = wait_fd(fd, POLLOUT, by);
        if (w == 0) {
          err = ETIMEDOUT;
        } else if (w < 0) {
          err = errno;
        } else {
          socklen_t len = sizeof err;
          if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
      }
      if (err == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
        ::freeaddrinfo(found);
        return {};
      }
      ::close(fd);
      timed_out = err == ETIMEDOUT;
      last = std::strerror(err);
      if (timed_out) break;
    }
    ::freeaddrinfo(found);
    std::string what = "cannot connect to " + url.host + " port " + port + ": " + last;
    return Error{timed_out ? ETIMEDOUT : EIO, what};
  }

  // TLS over the connected socket. `needs_newer_tls` is set when the server
  // refuses the handshake for its version (it speaks only TLS 1.3).
  Result<void> handshake(const HttpUrl& url, const TlsOptions& tls, Deadline by, bool& needs_newer_tls) {
    tls_ = true;
    int rc = mbedtls_ctr_drbg_seed(&drbg_, mbedtls_entropy_func, &entropy_,
                                   reinterpret_cast<const unsigned char*>("pressured"), 9);
    if (rc != 0) return Error{EIO, "TLS random generator: " + mbed_error(rc)};
    rc = mbedtls_ssl_config_defaults(&conf_, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                     MBEDTLS_SSL_PRESET_DEFAULT);
    if (rc != 0) return Error{EIO, "TLS configuration: " + mbed_error(rc)};
    mbedtls_ssl_conf_min_version(&conf_, MBEDTLS_SSL_MAJOR_VERSION_3, MBEDTLS_SSL_MINOR_VERSION_3);
    mbedtls_ssl_conf_rng(&conf_, mbedtls_ctr_drbg_random, &drbg_);
    if (tls.insecure_skip_verify) {
      mbedtls_ssl_conf_authmode(&conf_, MBEDTLS_SSL_VERIFY_NONE);
    } else {
      mbedtls_ssl_conf_authmode(&conf_, MBEDTLS_SSL_VERIFY_REQUIRED);
      ca_name_ = !tls.ca_data.empty()   ? std::string("certificate-authority-data")
                 : !tls.ca_file.empty() ? tls.ca_file
                                        : std::string("the system CAs (") + kSystemCaBundle + ")";
      const std::string file = tls.ca_file.empty() ? kSystemCaBundle : tls.ca_file;
      if (auto r = parse_certs(ca_, tls.ca_data, file, "CA"); !r) return r;
      mbedtls_ssl_conf_ca_chain(&conf_, &ca_, nullptr);
      if (url.ip_literal) {
        ip_ = url.host;
        mbedtls_ssl_conf_verify(&conf_, verify_ip, &ip_);
      }
    }
    const bool has_cert = !tls.client_cert_data.empty() || !tls.client_cert_file.empty();
    const bool has_key = !tls.client_key_data.empty() || !tls.client_key_file.empty();
    if (has_cert != has_key) return Error{EINVAL, "a client certificate needs its key, and a key its certificate"};
    if (has_cert) {
      if (auto r = parse_certs(cert_, tls.client_cert_data, tls.client_cert_file, "client certificate"); !r) return r;
      if (!tls.client_key_data.empty()) {
        rc = mbedtls_pk_parse_key(&key_, reinterpret_cast<const unsigned char*>(tls.client_key_data.c_str()),
                                  tls.client_key_data.size() + 1, nullptr, 0);
      } else {
        rc = mbedtls_pk_parse_keyfile(&key_, tls.client_key_file.c_str(), nullptr);
      }
      if (rc != 0) {
        return Error{EINVAL, "client key " + (tls.client_key_data.empty() ? tls.client_key_file : "(inline PEM)") +
                                 ": " + mbed_error(rc)};
      }
      if ((rc = mbedtls_ssl_conf_own_cert(&conf_, &cert_, &key_)) != 0) {
        return Error{EINVAL, "client certificate and key: " + mbed_error(rc)};
      }
    }
    if ((rc = mbedtls_ssl_setup(&ssl_, &conf_)) != 0) return Error{EIO, "TLS setup: " + mbed_error(rc)};
    // A name is verified (and sent as SNI) by mbedTLS; an address by verify_ip.
    if (!url.ip_literal && (rc = mbedtls_ssl_set_hostname(&ssl_, url.host.c_str())) != 0) {
      return Error{EINVAL, "TLS server name " + url.host + ": " + mbed_error(rc)};
    }
    mbedtls_ssl_set_bio(&ssl_, &fd_, send_cb, recv_cb, nullptr);
    while ((rc = mbedtls_ssl_handshake(&ssl_)) != 0) {
      if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
        int w = wait_fd(fd_, rc == MBEDTLS_ERR_SSL_WANT_READ ? POLLIN : POLLOUT, by);
        if (w == 0) return Error{ETIMEDOUT, "TLS handshake timed out"};
        if (w < 0) return Error::from_errno(errno, "poll");
        continue;
      }
      return handshake_error(rc, url, needs_newer_tls);
    }
    return {};
  }

  Result<void> write_all(std::string_view data, Deadline by) {
    while (!data.empty()) {
      long n = 0;
      short wait = POLLOUT;
      if (tls_) {
        int rc = mbedtls_ssl_write(&ssl_, reinterpret_cast<const unsigned char*>(data.data()), data.size());
        if (rc >= 0) {
          n = rc;
        } else if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
          wait = rc == MBEDTLS_ERR_SSL_WANT_READ ? POLLIN : POLLOUT;
          n = -1;
        } else {
          return Error{EIO, "TLS write: " + mbed_error(rc)};
        }
      } else {
        n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EINTR) return Error::from_errno(errno, "send");
      }
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      int w = wait_fd(fd_, wait, by);
      if (w == 0) return Error{ETIMEDOUT, "timed out sending the request"};
      if (w < 0) return Error::from_errno(errno, "poll");
    }
    return {};
  }

  // Bytes read (0: the server closed), or -1 when `by` passed first.
  Result<long> read(char* buf, std::size_t len, Deadline by) {
    while (true) {
      short wait = POLLIN;
      if (tls_) {
        int rc = mbedtls_ssl_read(&ssl_, reinterpret_cast<unsigned char*>(buf), len);
        if (rc >= 0) return static_cast<long>(rc);
        if (rc == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || rc == MBEDTLS_ERR_SSL_CONN_EOF) return 0L;
        if (rc == MBEDTLS_ERR_SSL_WANT_WRITE) {
          wait = POLLOUT;
        } else if (rc != MBEDTLS_ERR_SSL_WANT_READ) {
          return Error{EIO, "TLS read: " + mbed_error(rc)};
        }
      } else {
        long n = ::recv(fd_, buf, len, 0);
        if (n >= 0) return n;
        if (errno != EAGAIN && errno != EINTR) return Error::from_errno(errno, "recv");
      }
      int w = wait_fd(fd_, wait, by);
      if (w == 0) return -1L;
      if (w < 0) return Error::from_errno(errno, "poll");
    }
  }

 private:
  static int send_cb(void* ctx, const unsigned char* buf, std::size_t len) {
    long n = ::send(*static_cast<int*>(ctx), buf, len, MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    return errno == EAGAIN || errno == EINTR ? MBEDTLS_ERR_SSL_WANT_WRITE : MBEDTLS_ERR_NET_SEND_FAILED;
  }
  static int recv_cb(void* ctx, unsigned char* buf, std::size_t len) {
    long n = ::recv(*static_cast<int*>(ctx), buf, len, 0);
    if (n >= 0) return static_cast<int>(n);
    if (errno == ECONNRESET) return MBEDTLS_ERR_NET_CONN_RESET;
    return errno == EAGAIN || errno == EINTR ? MBEDTLS_ERR_SSL_WANT_READ : MBEDTLS_ERR_NET_RECV_FAILED;
  }

  Error handshake_error(int rc, const HttpUrl& url, bool& needs_newer_tls) {
    if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
      const uint32_t flags = mbedtls_ssl_get_verify_result(&ssl_);
      char info[512];
      mbedtls_x509_crt_verify_info(info, sizeof info, "", flags);
      std::string detail(info);
      while (!detail.empty() && detail.back() == '\n') detail.pop_back();
      std::replace(detail.begin(), detail.end(), '\n', ';');
      std::string what = "the server's certificate failed verification: " + detail;
      if ((flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) != 0) {
        what += " (the server's certificate is not trusted by " + ca_name_ + ": wrong CA?)";
      }
      if ((flags & MBEDTLS_X509_BADCERT_CN_MISMATCH) != 0) {
        what += " (the certificate does not name " + url.host + (url.ip_literal ? " among its IP addresses)" : ")");
      }
      return Error{EIO, what};
    }
    if (rc == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE && ssl_.in_msg != nullptr) {
      const int alert = ssl_.in_msg[1];
      if (alert == MBEDTLS_SSL_ALERT_MSG_PROTOCOL_VERSION) needs_newer_tls = true;
      return Error{EIO, "the server refused the TLS 1.2 handshake (alert " + std::to_string(alert) + ")"};
    }
    return Error{EIO, "TLS handshake: " + mbed_error(rc)};
  }

  int fd_ = -1;
  bool tls_ = false;
  std::string ca_name_;
  std::string ip_;
  mbedtls_ssl_context ssl_;
  mbedtls_ssl_config conf_;
  mbedtls_x509_crt ca_, cert_;
  mbedtls_pk_context key_;
  mbedtls_entropy_context entropy_;
  mbedtls_ctr_drbg_context drbg_;
};

}  // namespace

DirectOutcome direct_request(const HttpRequest& req, const HttpUrl& url) {
  DirectOutcome out;
  auto fail = [&](const Error& e) {
    out.response = Error{e.code == EPROTO ? EIO : e.code, req.method + " " + req.url + ": " + e.message};
    return std::move(out);
  };
  const Deadline start = Clock::now();
  // No total timeout is none (libcurl's 0); no connect timeout is libcurl's 300 s.
  const Deadline total = req.total_timeout.count() > 0 ? start + req.total_timeout : Deadline::max();
  const Deadline connect_by =
      std::min(total, start + (req.connect_timeout.count() > 0 ? Clock::duration(req.connect_timeout)
                                                               : Clock::duration(std::chrono::seconds(300))));
  auto wire = format_http_request(req.method, url, req.headers, req.body, req.accept_encoding);
  if (!wire) return fail(wire.error());

  Connection conn;
  if (auto r = conn.connect(url, connect_by); !r) return fail(r.error());
  if (url.tls) {
    if (auto r = conn.handshake(url, req.tls, connect_by, out.needs_newer_tls); !r) {
      Error e = r.error();
      if (e.code == ETIMEDOUT) e.message += " after " + std::to_string(ms_between(start, Clock::now())) + " ms";
      return fail(e);
    }
  }
  if (auto r = conn.write_all(*wire, total); !r) return fail(r.error());

  HttpResponse resp;
  HttpResponseReader reader(req.method == "HEAD");
  bool aborted = false;
  bool too_long = false;
  const HttpResponseReader::Sink sink = [&](std::string_view data) {
    const bool stream = req.on_data != nullptr && reader.status() >= 200 && reader.status() < 300;
    if (stream) {
      if (!(*req.on_data)(data)) aborted = true;
      return !aborted;
    }
    if (resp.body.size() + data.size() > req.max_body_bytes) {
      too_long = true;
      return false;
    }
    resp.body.append(data);
    return true;
  };
  char buf[16 * 1024];
  while (true) {
    // A stream's caller hears from the transfer about once a second, so it
    // can end a quiet watch (the daemon stops) without waiting for data.
    const Deadline wait_until =
        req.on_data != nullptr ? std::min(total, Clock::now() + std::chrono::seconds(1)) : total;
    auto n = conn.read(buf, sizeof buf, wait_until);
    if (!n) return fail(n.error());
    if (*n < 0) {
      if (Clock::now() >= total) {
        return fail(Error{ETIMEDOUT, "timed out after " + std::to_string(ms_between(start, Clock::now())) + " ms"});
      }
      if (!(*req.on_data)(std::string_view())) {
        aborted = true;
        break;
      }
      continue;
    }
    auto step = *n == 0 ? reader.end_of_input() : reader.feed(std::string_view(buf, static_cast<std::size_t>(*n)), sink);
    if (!step) return fail(step.error());
    if (*step == HttpResponseReader::Step::stopped) {
      if (too_long) {
        return fail(Error{EFBIG, "response body larger than " + std::to_string(req.max_body_bytes) + " bytes"});
      }
      break;  // the caller ended the stream
    }
    if (*step == HttpResponseReader::Step::done) break;
  }
  resp.status = reader.status();
  resp.headers = reader.headers();
  out.response = std::move(resp);
  return out;
}

}  // namespace pressured::k8s::detail
