#pragma once
// "Why this pod?" as JSON: the ranking keys of an eviction's victim and
// runner-up and the key that decided between them. One encoder for every
// output (`simulate`, `top --json`, the checkpoint) so the fields mean the
// same everywhere; only the key spelling follows each output's convention.

#include <nlohmann/json.hpp>

#include "engine/eviction_words.hpp"  // explain_choice, the "explanation" field
#include "pressured/engine.hpp"

namespace pressured {

enum class JsonKeys : uint8_t { Camel, Snake };

/// {"qos", "overRequest", "priority", "usage", "request", "amount", "zeroUsage", "daemonsetLast"}
nlohmann::ordered_json rank_keys_json(const RankKeys& keys, JsonKeys style);

/// {"victim": keys, "runnerUp": {"uid", "name", "namespace", keys...} or null,
///  "decidedBy": "qos" | ... | null[, "explanation": explain_choice(e)]}
/// `explanation`: add the sentence (humans); goldens and checkpoints leave it
/// out (it is derived from the rest).
nlohmann::ordered_json why_json(const Eviction& e, JsonKeys style, bool explanation = true);

}  // namespace pressured
