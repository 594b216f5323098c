#include "config/yaml_guard.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace pressured {
namespace {

struct Refused {
  std::string what;
};

class Guard final : public YAML::EventHandler {
 public:
  explicit Guard(const YamlLimits& limits) : limits_(limits) {}

  void OnDocumentStart(const YAML::Mark& mark) override {
    mark_ = mark;
    doc_nodes_ = nodes_;
  }
  void OnDocumentEnd() override {
    // An empty document that starts where the previous one did consumed no
    // input: yaml-cpp's LoadAll() would repeat it forever.
    bool empty = nodes_ == doc_nodes_ + 1 && last_was_null_;
    if (empty && have_prev_empty_ && prev_empty_pos_ == mark_.pos) {
      refuse("unexpected character the parser cannot consume (yaml-cpp would loop on it)");
    }
    if (empty) {
      have_prev_empty_ = true;
      prev_empty_pos_ = mark_.pos;
    }
  }
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    mark_ = mark;
    leaf(anchor, "~");
    last_was_null_ = true;
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    mark_ = mark;
    auto it = sizes_.find(anchor);
    add_nodes(it == sizes_.end() ? 1 : it->second);
    child_done(nullptr);
    last_was_null_ = false;
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string& value) override {
    mark_ = mark;
    leaf(anchor, value);
    last_was_null_ = false;
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnMapEnd() override { close(); }

  std::string where() const { return "line " + std::to_string(mark_.line + 1) + ", column " + std::to_string(mark_.column + 1); }

 private:
  struct Frame {
    bool map = false;
    bool expect_key = true;
    std::size_t start_nodes = 0;
    YAML::anchor_t anchor = 0;
    std::unordered_set<std::string> keys;
  };

  [[noreturn]] void refuse(const std::string& what) const { throw Refused{where() + ": " + what}; }

  void add_nodes(std::size_t n) {
    nodes_ += n;
    if (nodes_ > limits_.max_nodes) {
      refuse("more than " + std::to_string(limits_.max_nodes) + " nodes (aliases included)");
    }
  }

  void leaf(YAML::anchor_t anchor, const std::string& text) {
    add_nodes(1);
    if (anchor != 0) sizes_[anchor] = 1;
    child_done(&text);
  }

  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool map) {
    mark_ = mark;
    last_was_null_ = false;
    add_nodes(1);
    if (stack_.size() >= limits_.max_depth) refuse("nested deeper than " + std::to_string(limits_.max_depth) + " levels");
    Frame f;
    f.map = map;
    f.start_nodes = nodes_;
    f.anchor = anchor;
    stack_.push_back(std::move(f));
  }

  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    if (f.anchor != 0) sizes_[f.anchor] = nodes_ - f.start_nodes + 1;
    child_done(nullptr);
  }

  // A node inside the top frame is complete: in a mapping, keys and values
  // alternate; scalar keys must be unique.
  void child_done(const std::string* scalar) {
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (!f.map) return;
    if (f.expect_key) {
      if (scalar != nullptr && !limits_.allow_duplicate_keys && !f.keys.insert(*scalar).second) {
        refuse("duplicate key '" + *scalar + "' (YAML keys must be unique)");
      }
      f.expect_key = false;
    } else {
      f.expect_key = true;
    }
  }

  const YamlLimits& limits_;
  std::vector<Frame> stack_;
  std::unordered_map<YAML::anchor_t, std::size_t> sizes_;
  std::size_t nodes_ = 0, doc_nodes_ = 0;
  YAML::Mark mark_;
  bool last_was_null_ = false, have_prev_empty_ = false;
  int prev_empty_pos_ = -1;
};

}  // namespace

Result<void> check_yaml(std::string_view text, const YamlLimits& limits) {
  // A document starts on a line of its own: there are never more documents
  // than lines (+1), whatever the parser does.
  std::size_t lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 2;
  std::size_t max_docs = std::min(limits.max_documents, lines);
  std::istringstream in{std::string(text)};
  Guard guard(limits);
  try {
    YAML::Parser parser(in);
    std::size_t docs = 0;
    while (parser.HandleNextDocument(guard)) {
      if (++docs > max_docs) {
        return Error{EINVAL, guard.where() + ": more documents than the text can hold (the YAML parser is stuck)"};
      }
    }
  } catch (const Refused& r) {
    return Error{EINVAL, r.what};
  } catch (const YAML::Exception&) {
    // A syntax error: the real load fails the same way, at the same place,
    // with its own message. Nothing here can loop or grow.
  }
  return {};
}

}  // namespace pressured
