#include "config/quantity.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace pressured {
namespace {

constexpr double kMi = 1024.0 * 1024;
constexpr double kGi = kMi * 1024;

double q(const char* text) {
  auto r = parse_quantity(text);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -12345;
}

TEST(Quantity, BinaryDecimalExponentAndMilliSuffixes) {
  EXPECT_DOUBLE_EQ(q("100Mi"), 100 * kMi);
  EXPECT_DOUBLE_EQ(q("1.5Gi"), 1.5 * kGi);
  EXPECT_DOUBLE_EQ(q("1Ki"), 1024);
  EXPECT_DOUBLE_EQ(q("2Ti"), 2 * kGi * 1024);
  EXPECT_DOUBLE_EQ(q("500M"), 500e6);
  EXPECT_DOUBLE_EQ(q("3k"), 3000);
  EXPECT_DOUBLE_EQ(q("1G"), 1e9);
  EXPECT_DOUBLE_EQ(q("1e9"), 1e9);
  EXPECT_DOUBLE_EQ(q("1E3"), 1000);
  EXPECT_DOUBLE_EQ(q("5e-1"), 0.5);
  EXPECT_DOUBLE_EQ(q("1E"), 1e18);  // "E" alone is exa, not an exponent
  EXPECT_DOUBLE_EQ(q("250m"), 0.25);
  EXPECT_DOUBLE_EQ(q("42"), 42);
  EXPECT_DOUBLE_EQ(q("+7"), 7);
  EXPECT_DOUBLE_EQ(q("-1Gi"), -kGi);
  EXPECT_DOUBLE_EQ(q(".5Gi"), 0.5 * kGi);
  EXPECT_DOUBLE_EQ(q("0"), 0);
}

TEST(Quantity, RejectsMalformedTextWithTheValueInTheMessage) {
  for (const char* bad : {"", "abc", "10x", "1.2.3", "Mi", "1e", "10 Mi", "1ee3", "1MiB", "--1", "1e3.5", "1e308Ei", "nan", "inf"}) {
    auto r = parse_quantity(bad);
    ASSERT_FALSE(r.ok()) << "accepted '" << bad << "'";
    // Appended, not `"'" + std::string(bad)`: GCC 12 at -O3 reports a false
    // -Wrestrict overlap inside libstdc++ for that form (GCC bug 105329).
    const std::string quoted = std::string("'").append(bad).append("'");
    EXPECT_NE(r.error().message.find(quoted), std::string::npos) << r.error().message;
  }
}

TEST(Quantity, ThresholdValuesArePercentOrQuantity) {
  auto p = parse_threshold_value("10%");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, ThresholdValue::Kind::Percent);
  EXPECT_DOUBLE_EQ(p->percent, 10);
  EXPECT_DOUBLE_EQ(p->resolve(10 * kGi), kGi);
  auto f = parse_threshold_value("2.5%");
  ASSERT_TRUE(f.ok());
  EXPECT_DOUBLE_EQ(f->percent, 2.5);
  auto v = parse_threshold_value("1Gi");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->kind, ThresholdValue::Kind::Quantity);
  EXPECT_DOUBLE_EQ(v->resolve(123), kGi);  // capacity does not matter
  EXPECT_FALSE(parse_threshold_value("%").ok());
  EXPECT_FALSE(parse_threshold_value("ten%").ok());
  EXPECT_FALSE(parse_threshold_value("10Mi%").ok());
}

Duration d(const char* text) {
  auto r = parse_duration(text);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Duration(-999);
}

TEST(Duration, GoSyntax) {
  using namespace std::chrono;
  EXPECT_EQ(d("1m30s"), seconds(90));
  EXPECT_EQ(d("500ms"), milliseconds(500));
  EXPECT_EQ(d("1h"), hours(1));
  EXPECT_EQ(d("1.5s"), milliseconds(1500));
  EXPECT_EQ(d("1h30m10s"), seconds(5410));
  EXPECT_EQ(d("2us"), microseconds(2));
  EXPECT_EQ(d("2\xC2\xB5s"), microseconds(2));
  EXPECT_EQ(d("100ns"), nanoseconds(100));
  EXPECT_EQ(d("0"), Duration(0));
  EXPECT_EQ(d("0s"), Duration(0));
  EXPECT_EQ(d("-1s"), seconds(-1));  // negative parses; the loader rejects it by name
  EXPECT_EQ(d("+5m"), minutes(5));
}

TEST(Duration, RejectsMissingUnitsAndGarbage) {
  for (const char* bad : {"", "5", "1x", "s", "1m30", "-", "1..5s", "five seconds", "1d"}) {
    auto r = parse_duration(bad);
    EXPECT_FALSE(r.ok()) << "accepted '" << bad << "'";
  }
  auto r = parse_duration("30");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("missing unit"), std::string::npos) << r.error().message;
}

TEST(Duration, FormatsLikeGo) {
  using namespace std::chrono;
  EXPECT_EQ(format_duration(seconds(90)), "1m30s");
  EXPECT_EQ(format_duration(minutes(5)), "5m0s");
  EXPECT_EQ(format_duration(hours(1)), "1h0m0s");
  EXPECT_EQ(format_duration(milliseconds(500)), "500ms");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(format_duration(nanoseconds(1500)), "1.5\xC2\xB5s");
  EXPECT_EQ(format_duration(nanoseconds(7)), "7ns");
  EXPECT_EQ(format_duration(Duration(0)), "0s");
  EXPECT_EQ(format_duration(seconds(-1)), "-1s");
  EXPECT_EQ(format_duration(seconds(3600 * 25 + 61)), "25h1m1s");
}

TEST(Duration, FormatRoundTrips) {
  for (int64_t ns : {int64_t(1), int64_t(999), int64_t(1000), int64_t(123456789), int64_t(1000000000),
                     int64_t(90000000000), int64_t(3723500000000), int64_t(-42000000)}) {
    auto text = format_duration(Duration(ns));
    auto back = parse_duration(text);
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_EQ(back->count(), ns) << text;
  }
}

TEST(Quantity, FormatsShortestExactText) {
  EXPECT_EQ(format_quantity(100 * kMi), "100Mi");
  EXPECT_EQ(format_quantity(1.5 * kGi), "1536Mi");
  EXPECT_EQ(format_quantity(500e6), "500M");
  EXPECT_EQ(format_quantity(1024), "1Ki");
  EXPECT_EQ(format_quantity(1000), "1k");
  EXPECT_EQ(format_quantity(1536), "1536");
  EXPECT_EQ(format_quantity(999), "999");
  EXPECT_EQ(format_quantity(12.5), "12.5");
  EXPECT_EQ(format_quantity(0), "0");
  EXPECT_EQ(format_threshold_value({ThresholdValue::Kind::Percent, 0, 7.5}), "7.5%");
  for (double v : {100 * kMi, 1.5 * kGi, 500e6, 1024.0, 1000.0, 1536.0, 12.5, 0.25, 3e12, 7.0}) {
    auto back = parse_quantity(format_quantity(v));
    ASSERT_TRUE(back.ok()) << format_quantity(v);
    EXPECT_DOUBLE_EQ(*back, v);
  }
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

TEST(Duration, OverflowIsAnErrorNotAWrap) {
  // INT64_MAX nanoseconds rounds up to 2^63 as a double: it wrapped to INT64_MIN.
  auto r = parse_duration("2562047h47m16.854775807s");
  EXPECT_FALSE(r.ok()) << (r.ok() ? std::to_string(r->count()) : "");
  EXPECT_FALSE(parse_duration("1e400h").ok());
  auto ok = parse_duration("2562047h");
  ASSERT_TRUE(ok.ok());
  EXPECT_GT(ok->count(), 0);
}

}  // namespace
}  // namespace pressured

namespace pressured {
namespace {

TEST(Quantity, EveryPrintedValueReadsBackExactly) {
  // 999E300 printed as 9.99e+302 and was then refused (exponent over 300);
  // mantissa * 10^e rounded twice, so ...235e+36 came back as ...236.
  for (double v : {999e300, 1.2345678901234235e+36, 1.7976931348623157e308, 1.1e3, 0.1, 123456789.125}) {
    const std::string text = format_quantity(v);
    auto r = parse_quantity(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error().message;
    EXPECT_EQ(*r, v) << text;
  }
  EXPECT_EQ(q("1.1k"), 1100.0);  // 1.1 * 1e3 is 1100.0000000000002
  EXPECT_EQ(q("1.2345678901234235e+36"), 1.2345678901234235e+36);
  EXPECT_EQ(q("1e-400"), 0.0);
  EXPECT_EQ(q(("1" + std::string(330, '0') + "e-300").c_str()), 1e30);
}

TEST(Quantity, TheSaturatingFormReadsWhatTheApiServerStores) {
  // The API server stores 1e309 (past a double): a pod's quantity must read
  // as more than anything, while a config value that large stays an error.
  EXPECT_FALSE(parse_quantity("1e309").ok());
  for (const char* huge : {"1e309", "1E400", "99999999999999999999e99999999999999999999", "2e308"}) {
    auto r = parse_quantity_saturating(huge);
    ASSERT_TRUE(r.ok()) << huge << ": " << r.error().message;
    EXPECT_EQ(*r, std::numeric_limits<double>::infinity()) << huge;
  }
  auto neg = parse_quantity_saturating("-1e309");
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ(*neg, -std::numeric_limits<double>::infinity());
  auto tiny = parse_quantity_saturating("1e-99999");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(*tiny, 0.0);
  for (const char* bad : {"1e", "1e3.5", "abc", "1MiB", "1e309x"}) EXPECT_FALSE(parse_quantity_saturating(bad).ok()) << bad;
}

}  // namespace
}  // namespace pressured
