#pragma once
// Internal to userspace/config: the codecs, how one YAML node becomes one C++
// field and back, and the Field tables the schema (schema.cpp) is written in.
// A field is one line there: key, member, codec; dump_config() encodes with
// the same codec, so what it prints reads back as the same value.

#include <charconv>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/quantity.hpp"
#include "pressured/clock.hpp"
#include "pressured/enum_names.hpp"
#include "pressured/result.hpp"

namespace pressured::config_detail {

using YAML::Node;

/// A node as an error message shows it: the scalar, or what it is instead.
std::string scalar_text(const Node& n);
/// "<where>: <message>", EINVAL.
Error field_error(const std::string& where, const std::string& message);
/// "<where>: '<value>' <why>", EINVAL.
Error value_error(const std::string& where, const Node& n, const std::string& why);

// Each decodes one YAML node (already known to exist); `where` names it in errors.
Result<std::string> decode_string(const Node& n, const std::string& where);
Result<bool> decode_bool(const Node& n, const std::string& where);
/// A Go duration, not negative, at most 100000 h.
Result<Duration> decode_duration(const Node& n, const std::string& where);
/// A whole number up to `max`: plain digits exactly, or a Kubernetes quantity.
Result<uint64_t> decode_count(const Node& n, const std::string& where, uint64_t max);
/// A count as text that reads back as the same count (decode_count).
std::string format_count(uint64_t v);

template <typename S>
struct Field {
  std::string key;
  std::function<Result<void>(const Node&, S&, const std::string& where)> decode;
  std::function<Node(const S&)> encode;
};

template <typename S>
Field<S> string_field(std::string key, std::string S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_string(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return Node(s.*m); }};
}

template <typename S>
Field<S> bool_field(std::string key, bool S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_bool(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return Node(s.*m); }};
}

template <typename S>
Field<S> duration_field(std::string key, Duration S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_duration(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return Node(format_duration(s.*m)); }};
}

// null or "" means "not set".
template <typename S>
Field<S> optional_duration_field(std::string key, std::optional<Duration> S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsNull() || (n.IsScalar() && n.Scalar().empty())) {
              s.*m = std::nullopt;
              return {};
            }
            auto v = decode_duration(n, w);
            if (!v) return v.error();
            s.*m = *v;
            return {};
          },
          [m](const S& s) { return (s.*m) ? Node(format_duration(*(s.*m))) : Node(YAML::NodeType::Null); }};
}

// Whole numbers, Kubernetes quantity syntax allowed ("256Ki").
template <typename S, typename U>
Field<S> count_field(std::string key, U S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            auto v = decode_count(n, w, std::numeric_limits<U>::max());
            if (!v) return v.error();
            s.*m = static_cast<U>(*v);
            return {};
          },
          [m](const S& s) { return Node(format_count(static_cast<uint64_t>(s.*m))); }};
}

template <typename S, typename U>
Field<S> optional_count_field(std::string key, std::optional<U> S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsNull() || (n.IsScalar() && n.Scalar().empty())) {
              s.*m = std::nullopt;
              return {};
            }
            auto v = decode_count(n, w, std::numeric_limits<U>::max());
            if (!v) return v.error();
            s.*m = static_cast<U>(*v);
            return {};
          },
          [m](const S& s) {
            return (s.*m) ? Node(format_count(static_cast<uint64_t>(*(s.*m)))) : Node(YAML::NodeType::Null);
          }};
}

// A plain number ("12.5"); the range is checked in validate_config().
template <typename S>
Field<S> number_field(std::string key, double S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            double v = 0;
            if (n.IsScalar()) {
              const std::string& t = n.Scalar();
              auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
              if (!t.empty() && ec == std::errc() && p == t.data() + t.size() && std::isfinite(v)) {
                s.*m = v;
                return {};
              }
            }
            return value_error(w, n, "is not a number");
          },
          [m](const S& s) { return Node(format_quantity(s.*m)); }};
}

// A signed whole number ("-10"); the range is checked in validate_config().
template <typename S>
Field<S> int_field(std::string key, int S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            int v = 0;
            if (n.IsScalar()) {
              const std::string& t = n.Scalar();
              const char* b = t.data() + (!t.empty() && t[0] == '+' ? 1 : 0);
              auto [p, ec] = std::from_chars(b, t.data() + t.size(), v);
              if (b != t.data() + t.size() && ec == std::errc() && p == t.data() + t.size()) {
                s.*m = v;
                return {};
              }
            }
            return value_error(w, n, "is not a whole number");
          },
          [m](const S& s) { return Node(s.*m); }};
}

template <typename E>
using EnumNames = std::vector<std::pair<std::string, E>>;

template <typename E>
std::string enum_choices(const EnumNames<E>& names) {
  std::string out;
  for (const auto& [n, v] : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <typename S, typename E>
Field<S> enum_field(std::string key, E S::*m, EnumNames<E> names) {
  return {std::move(key),
          [m, names](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsScalar()) {
              for (const auto& [text, value] : names) {
                if (text == n.Scalar()) {
                  s.*m = value;
                  return {};
                }
              }
            }
            return value_error(w, n, "is not one of " + enum_choices(names));
          },
          [m, names](const S& s) {
            for (const auto& [text, value] : names) {
              if (value == s.*m) return Node(text);
            }
            return Node("?");
          }};
}

template <typename S>
Field<S> string_list_field(std::string key, std::vector<std::string> S::*m) {
  return {std::move(key),
          [m](const Node& n, S& s, const std::string& w) -> Result<void> {
            if (n.IsNull()) {
              (s.*m).clear();
              return {};
            }
            if (!n.IsSequence()) return value_error(w, n, "is not a list of strings");
            std::vector<std::string> out;
            for (std::size_t i = 0; i < n.size(); ++i) {
              auto v = decode_string(n[i], w + "[" + std::to_string(i) + "]");
              if (!v) return v.error();
              out.push_back(*v);
            }
            s.*m = std::move(out);
            return {};
          },
          [m](const S& s) {
            Node list(YAML::NodeType::Sequence);
            for (const auto& v : s.*m) list.push_back(v);
            return list;
          }};
}

template <typename E, std::size_t N>
EnumNames<E> from_table(const EnumName<E> (&table)[N]) {
  EnumNames<E> out;
  for (const auto& e : table) out.emplace_back(std::string(e.name), e.value);
  return out;
}

}  // namespace pressured::config_detail
