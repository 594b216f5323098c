// Prints every sample name pressured's Metrics class exports, one per line.
// The dashboard and alert-rule validators (tests/metrics/check_dashboards.py)
// take the list from here, so it can never drift from the code.

#include <iostream>

#include "pressured/metrics.hpp"

int main() {
  pressured::MetricsOptions options;
  options.node = "names";
  pressured::Metrics metrics(options);
  for (const auto& name : metrics.metric_names()) std::cout << name << '\n';
  return 0;
}
