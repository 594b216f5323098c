// Quantities ("128Mi", "1.5e3", "10%"), durations ("1h2m3.5s") and threshold
// values: any text is a value or an error, never a crash, a wrap or UB; what
// parses formats and parses back to itself.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/quantity.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto q = pressured::parse_quantity(text)) {
    if (!(*q >= 0) && !(*q < 0)) std::abort();  // NaN must never come out
    auto again = pressured::parse_quantity(pressured::format_quantity(*q));
    if (!again || *again != *q) std::abort();  // a quantity prints as itself
  }
  // What a pod may carry: past a double it saturates, never NaN.
  if (auto s = pressured::parse_quantity_saturating(text)) {
    if (!(*s >= 0) && !(*s < 0)) std::abort();
  }
  if (auto d = pressured::parse_duration(text)) {
    auto again = pressured::parse_duration(pressured::format_duration(*d));
    if (!again || *again != *d) std::abort();  // a duration prints as itself
  }
  if (auto t = pressured::parse_threshold_value(text)) (void)pressured::format_threshold_value(*t);
  return 0;
}
