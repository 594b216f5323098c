#include "k8s/bounded_json.hpp"

#include <fmt/format.h>

namespace pressured::k8s {

using json = nlohmann::json;

Result<json> parse_bounded_json(std::string_view text, int max_depth) {
  bool too_deep = false;
  // The parser itself is iterative; the callback keeps it from building
  // anything below the bound (returning false discards that subtree).
  json::parser_callback_t bound = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= max_depth) {
      too_deep = true;
      return false;
    }
    return true;
  };
  try {
    json doc = json::parse(text, bound);
    if (too_deep) return Error{EINVAL, fmt::format("nested deeper than {} levels", max_depth)};
    return doc;
  } catch (const json::exception& e) {
    // Its reason says where (operators read it in the log line).
    if (too_deep) return Error{EINVAL, fmt::format("nested deeper than {} levels", max_depth)};
    return Error{EINVAL, std::string("not JSON: ") + e.what()};
  }
}

const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::optional<std::string> string_member(const json& obj, const char* key) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  return v->get<std::string>();
}

std::optional<int64_t> int_member(const json& obj, const char* key) {
  const json* v = member(obj, key);
  if (v == nullptr || !v->is_number_integer()) return std::nullopt;
  return v->get<int64_t>();
}

}  // namespace pressured::k8s
