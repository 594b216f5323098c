#pragma once
// A bounded pre-check of YAML text, run before yaml-cpp builds a tree from it.
//
// yaml-cpp 0.7 (Debian bookworm) has failure modes that turn a bad file into
// a hang or an out-of-memory kill instead of an error: LoadAll() loops forever
// on a stray ',' (each turn yields another empty document), aliases expand
// without bound when a tree is converted, and deep nesting recurses. The guard
// walks the parser's events itself, once, with limits, and refuses what would
// trip them. It also rejects duplicate mapping keys, which yaml-cpp silently
// resolves as last-wins.

#include <cstddef>
#include <string_view>

#include "pressured/result.hpp"

namespace pressured {

struct YamlLimits {
  std::size_t max_depth = 64;            // nested mappings/sequences
  std::size_t max_nodes = 4'000'000;     // nodes, counting alias expansions
  std::size_t max_documents = 100'000;   // documents in one stream
  bool allow_duplicate_keys = false;
};

/// Ok when yaml-cpp can load `text` (all documents) without hanging or
/// growing past the limits; otherwise an error naming the line and problem.
Result<void> check_yaml(std::string_view text, const YamlLimits& limits = {});

}  // namespace pressured
