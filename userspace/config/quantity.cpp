#include "config/quantity.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

namespace pressured {
namespace {

struct Suffix {
  std::string_view text;
  int power;  // of 1024 (binary) or of 10 (decimal)
};

constexpr Suffix kBinary[] = {{"Ki", 1}, {"Mi", 2}, {"Gi", 3}, {"Ti", 4}, {"Pi", 5}, {"Ei", 6}};
constexpr Suffix kDecimal[] = {
    {"n", -9}, {"u", -6}, {"m", -3}, {"", 0}, {"k", 3}, {"M", 6}, {"G", 9}, {"T", 12}, {"P", 15}, {"E", 18},
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

// The decimal exponent of an exponent suffix ("e-3" -> -3), clamped far
// beyond any double: "1e99999999999999999999" is as infinite as "1e400".
int64_t clamp_exponent(std::string_view digits) {
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  int64_t e = 0;
  for (char c : digits) e = std::min<int64_t>(e * 10 + (c - '0'), 1000000);
  return negative ? -e : e;
}

// `number` (as scanned) times 10^exponent, rounded once, as strtod would:
// multiplying a parsed mantissa by a power of ten rounds twice, and
// 1.2345678901234235e+36 came back as ...236. Values past the range of a
// double are +-infinity (or 0 below it); the callers decide whether that is
// an error.
double scale10(std::string_view number, int64_t exponent) {
  bool negative = false;
  if (!number.empty() && (number[0] == '+' || number[0] == '-')) {
    negative = number[0] == '-';
    number.remove_prefix(1);
  }
  std::string text(number);
  text += 'e';
  text += std::to_string(exponent);
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) {
    // Overflow or underflow: the magnitude's order tells which (the
    // mantissa has at least one non-zero digit, or it would be 0).
    std::size_t dot = number.find('.');
    std::string_view whole = number.substr(0, dot);
    std::size_t lead = whole.find_first_not_of('0');
    int64_t order = lead == std::string_view::npos ? 0 : static_cast<int64_t>(whole.size() - lead);
    v = order + exponent > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return negative ? -v : v;
}

Result<double> parse_quantity_unchecked(std::string_view text) {
  if (text.empty()) return bad(text, "empty");
  std::size_t n = scan_number(text, true, true);
  if (n == 0) return bad(text, "expected a number such as 100Mi, 1.5Gi, 500M or 1e9");
  const std::string_view number = text.substr(0, n);
  double mantissa = 0;
  if (!to_double(number, mantissa)) {
    // Digits past the range of a double ("1" and 400 zeros) are a number
    // all the same.
    auto [p, ec] = std::from_chars(number.data() + (number[0] == '+'), number.data() + n, mantissa);
    if (ec != std::errc::result_out_of_range || p != number.data() + n) return bad(text, "bad number");
  }
  std::string_view suffix = text.substr(n);
  for (const auto& s : kBinary) {
    if (suffix == s.text) return std::ldexp(scale10(number, 0), 10 * s.power);  // exact: a power of two
  }
  for (const auto& s : kDecimal) {
    if (suffix == s.text) return scale10(number, s.power);
  }
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    std::string_view exp = suffix.substr(1);
    std::size_t en = scan_number(exp, true, false);
    if (en != exp.size()) return bad(text, cat({"bad exponent '", suffix, "'"}));
    return scale10(number, clamp_exponent(exp));
  }
  return bad(text, cat({"unknown suffix '", suffix, "' (use Ki, Mi, Gi, Ti, Pi, Ei, m, k, M, G, T, P, E or eN)"}));
}

}  // namespace

Result<double> parse_quantity(std::string_view text) {
  auto r = parse_quantity_unchecked(text);
  if (r.ok() && !std::isfinite(*r)) return bad(text, "out of range");
  return r;
}

Result<double> parse_quantity_saturating(std::string_view text) { return parse_quantity_unchecked(text); }

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
        auto f = int64_t{1} << (10 * kBinary[i].power);
        if (a % f == 0) return std::to_string(n / f) + std::string(kBinary[i].text);
      }
      for (int i = 9; i >= 4; --i) {
        int64_t f = 1;
        for (int k = 0; k < kDecimal[i].power; ++k) f *= 10;
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
