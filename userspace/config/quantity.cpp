#include "config/quantity.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace pressured {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};

constexpr double kKi = 1024.0;
constexpr Suffix kBinary[] = {
    {"Ki", kKi}, {"Mi", kKi * kKi}, {"Gi", kKi * kKi * kKi}, {"Ti", kKi * kKi * kKi * kKi},
    {"Pi", kKi * kKi * kKi * kKi * kKi}, {"Ei", kKi * kKi * kKi * kKi * kKi * kKi},
};
constexpr Suffix kDecimal[] = {
    {"n", 1e-9}, {"u", 1e-6}, {"m", 1e-3}, {"", 1}, {"k", 1e3},
    {"M", 1e6},  {"G", 1e9},  {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
};

// Appends without `const char* + std::string`, which trips GCC 12's
// -Wrestrict false positive at -O3.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out.append(p);
  return out;
}

Error bad(std::string_view text, std::string_view why) {
  return Error{EINVAL, cat({"'", text, "' is not a valid quantity: ", why})};
}

// Reads "[+-]digits[.digits]" from the front of `s`; returns the number of
// characters consumed (0 when there is no number).
std::size_t scan_number(std::string_view s, bool allow_sign, bool allow_fraction) {
  std::size_t i = 0;
  if (allow_sign && i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  std::size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  if (allow_fraction && i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  return digits == 0 ? 0 : i;
}

bool to_double(std::string_view s, double& out) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

Result<double> parse_quantity_unchecked(std::string_view text) {
  if (text.empty()) return bad(text, "empty");
  std::size_t n = scan_number(text, true, true);
  if (n == 0) return bad(text, "expected a number such as 100Mi, 1.5Gi, 500M or 1e9");
  double mantissa = 0;
  if (!to_double(text.substr(0, n), mantissa)) return bad(text, "bad number");
  std::string_view suffix = text.substr(n);
  for (const auto& s : kBinary) {
    if (suffix == s.text) return mantissa * s.factor;
  }
  for (const auto& s : kDecimal) {
    if (suffix == s.text) return mantissa * s.factor;
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    std::string_view exp = suffix.substr(1);
    std::size_t en = scan_number(exp, true, false);
    if (en != exp.size()) return bad(text, cat({"bad exponent '", suffix, "'"}));
    double e = 0;
    if (!to_double(exp, e) || std::fabs(e) > 300) return bad(text, cat({"bad exponent '", suffix, "'"}));
    return mantissa * std::pow(10.0, e);
  }
  return bad(text, cat({"unknown suffix '", suffix, "' (use Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or eN)"}));
}

}  // namespace

Result<double> parse_quantity(std::string_view text) {
  auto r = parse_quantity_unchecked(text);
  if (r.ok() && !std::isfinite(*r)) return bad(text, "out of range");
  return r;
}

Result<ThresholdValue> parse_threshold_value(std::string_view text) {
  if (!text.empty() && text.back() == '%') {
    std::string_view num = text.substr(0, text.size() - 1);
    double pct = 0;
    if (num.empty() || scan_number(num, true, true) != num.size() || !to_double(num, pct)) {
      return Error{EINVAL, cat({"'", text, "' is not a valid percentage"})};
    }
    ThresholdValue v;
    v.kind = ThresholdValue::Kind::Percent;
    v.percent = pct;
    return v;
  }
  auto q = parse_quantity(text);
  if (!q) return q.error();
  ThresholdValue v;
  v.kind = ThresholdValue::Kind::Quantity;
  v.quantity = *q;
  return v;
}

Result<Duration> parse_duration(std::string_view text) {
  const std::string orig(text);
  auto fail = [&](std::string_view why) {
    return Error{EINVAL, cat({"'", orig, "' is not a valid duration: ", why, " (Go syntax: 1h, 1m30s, 500ms)"})};
  };
  if (text.empty()) return fail("empty");
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text == "0") return Duration(0);
  if (text.empty()) return fail("no number");
  long double total_ns = 0;
  while (!text.empty()) {
    std::size_t n = scan_number(text, false, true);
    if (n == 0) return fail("expected a number");
    double number = 0;
    if (!to_double(text.substr(0, n), number)) return fail("bad number");
    text.remove_prefix(n);
    std::size_t u = 0;
    while (u < text.size() && !(text[u] == '.' || (text[u] >= '0' && text[u] <= '9'))) ++u;
    std::string_view unit = text.substr(0, u);
    text.remove_prefix(u);
    long double scale = 0;
    if (unit == "ns") scale = 1;
    else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") scale = 1e3;
    else if (unit == "ms") scale = 1e6;
    else if (unit == "s") scale = 1e9;
    else if (unit == "m") scale = 60e9;
    else if (unit == "h") scale = 3600e9;
    else if (unit.empty()) return fail("missing unit");
    else return fail(cat({"unknown unit '", unit, "'"}));
    total_ns += static_cast<long double>(number) * scale;
  }
  // Compared after rounding to double: INT64_MAX itself rounds up to 2^63,
  // which llround cannot represent (it wrapped to INT64_MIN).
  const double rounded = static_cast<double>(total_ns);
  if (!(rounded < 9223372036854775808.0)) return fail("too large");
  auto ns = static_cast<int64_t>(std::llround(rounded));
  return Duration(negative ? -ns : ns);
}

std::string format_quantity(double value) {
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 9.2e18) {
    auto n = static_cast<int64_t>(value);
    int64_t a = n < 0 ? -n : n;
    if (a >= 1000) {
      for (int i = 5; i >= 0; --i) {
        auto f = static_cast<int64_t>(kBinary[i].factor);
        if (a % f == 0) return std::to_string(n / f) + std::string(kBinary[i].text);
      }
      for (int i = 9; i >= 4; --i) {
        auto f = static_cast<int64_t>(kDecimal[i].factor);
        if (a % f == 0) return std::to_string(n / f) + std::string(kDecimal[i].text);
      }
    }
    return std::to_string(n);
  }
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "nan";  // unreachable: 64 chars fit any double
  return std::string(buf, p);
}

std::string format_threshold_value(const ThresholdValue& value) {
  if (value.kind == ThresholdValue::Kind::Percent) return format_quantity(value.percent) + "%";
  return format_quantity(value.quantity);
}

std::string format_duration(Duration d) {
  // Go's time.Duration.String(), writing right to left into a buffer.
  int64_t ns = d.count();
  if (ns == 0) return "0s";
  const bool negative = ns < 0;
  // Unsigned so that INT64_MIN does not overflow.
  uint64_t u = negative ? uint64_t(0) - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char buf[32];
  int w = sizeof buf;
  auto put = [&](char c) { buf[--w] = c; };
  auto put_str = [&](std::string_view s) {
    for (auto it = s.rbegin(); it != s.rend(); ++it) put(*it);
  };
  auto put_int = [&](uint64_t v) {
    if (v == 0) put('0');
    while (v > 0) {
      put(static_cast<char>('0' + v % 10));
      v /= 10;
    }
  };
  // The `prec` low digits of v become a fraction with trailing zeros trimmed.
  auto put_frac = [&](uint64_t v, int prec) -> uint64_t {
    bool print = false;
    for (int i = 0; i < prec; ++i) {
      const uint64_t digit = v % 10;
      print = print || digit != 0;
      if (print) put(static_cast<char>('0' + digit));
      v /= 10;
    }
    if (print) put('.');
    return v;
  };
  if (u < 1000000000ULL) {
    int prec = 0;
    if (u < 1000ULL) {
      put_str("ns");
    } else if (u < 1000000ULL) {
      prec = 3;
      put_str("\xC2\xB5s");
    } else {
      prec = 6;
      put_str("ms");
    }
    put_int(put_frac(u, prec));
  } else {
    put('s');
    uint64_t secs = put_frac(u, 9);
    put_int(secs % 60);
    uint64_t mins = secs / 60;
    if (mins > 0) {
      put('m');
      put_int(mins % 60);
      uint64_t hours = mins / 60;
      if (hours > 0) {
        put('h');
        put_int(hours);
      }
    }
  }
  if (negative) put('-');
  return std::string(buf + w, sizeof buf - static_cast<std::size_t>(w));
}

}  // namespace pressured
