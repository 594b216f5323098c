#pragma once
// A small parser for the Prometheus text exposition format (0.0.4), enough to
// assert on what pressured serves: samples with labels and values, plus the
// # TYPE lines; and scrape(), which renders a Metrics and reads it, and
// exported(), which does the same for a component's stats, so tests assert on
// the values an operator sees.

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pressured/metrics.hpp"

namespace pressured::testing {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family name -> counter|gauge|histogram...
  std::vector<std::string> errors;           // lines that did not parse

  /// Samples named `name` whose labels include every pair of `match`.
  std::vector<Sample> find(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    std::vector<Sample> out;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) ok = false;
      }
      if (ok) out.push_back(s);
    }
    return out;
  }

  /// The single sample matching, or nullopt when none or several match.
  std::optional<double> value(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    auto f = find(name, match);
    if (f.size() != 1) return std::nullopt;
    return f.front().value;
  }

  /// The sum of the samples matching (a counter summed over the labels not
  /// in `match`), or nullopt when none does.
  std::optional<double> sum(const std::string& name, const std::map<std::string, std::string>& match = {}) const {
    auto f = find(name, match);
    if (f.empty()) return std::nullopt;
    double total = 0;
    for (const auto& s : f) total += s.value;
    return total;
  }
};

inline Exposition parse_exposition(const std::string& text) {
  Exposition e;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      e.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    Sample s;
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') s.name.push_back(line[i++]);
    bool bad = s.name.empty();
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (!bad && i < line.size() && line[i] != '}') {
        std::string key;
        while (i < line.size() && line[i] != '=') key.push_back(line[i++]);
        if (i + 1 >= line.size() || line[i + 1] != '"') {
          bad = true;
          break;
        }
        i += 2;
        std::string val;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {
            const char n = line[i + 1];
            val.push_back(n == 'n' ? '\n' : n);
            i += 2;
          } else {
            val.push_back(line[i++]);
          }
        }
        if (i >= line.size()) {
          bad = true;
          break;
        }
        ++i;  // closing quote
        if (i < line.size() && line[i] == ',') ++i;
        s.labels[key] = val;
      }
      if (i >= line.size()) bad = true;
      ++i;  // '}'
    }
    if (!bad) {
      while (i < line.size() && line[i] == ' ') ++i;
      const std::string v = line.substr(i, line.find(' ', i) - i);
      char* end = nullptr;
      s.value = std::strtod(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size()) bad = true;
    }
    if (bad) {
      e.errors.push_back(line);
    } else {
      e.samples.push_back(std::move(s));
    }
  }
  return e;
}

/// What /metrics would serve now.
inline Exposition scrape(const Metrics& metrics) { return parse_exposition(metrics.render()); }

/// One series as an operator sees it: the sum of the samples named `name`
/// whose labels include `match` (nullopt when there is none).
inline std::optional<double> scraped(const Metrics& metrics, const std::string& name,
                                     const std::map<std::string, std::string>& match = {}) {
  return scrape(metrics).sum(name, match);
}

/// A component's declared stats (pressured/stats.hpp) as an operator reads
/// them: exported into a Metrics of their own, as the daemon exports them,
/// and scraped; the sum of the series named `name` whose labels include
/// `match` (nullopt when there is none).
template <typename Stats>
std::optional<double> exported(const Stats& stats, const std::string& name,
                               const std::map<std::string, std::string>& match = {}) {
  MetricsOptions options;
  options.node = "test";
  Metrics metrics(options);
  const StatsExport handle = export_stats(metrics, stats);
  return scraped(metrics, name, match);
}

}  // namespace pressured::testing
