#pragma once
// The one backoff of every caller that asks the API server again: the
// reporter's retries of one request, its pause between taint conflicts, and
// the pod source's LIST and WATCH after an error. A base that doubles up to a
// cap, optionally restarting after a quiet period and spread by jitter
// (client-go's ExponentialBackoffManager, as its reflector uses it). Pure but
// for the random jitter, which a seed makes repeatable; the caller waits.

#include <cstdint>
#include <optional>
#include <random>

#include "pressured/clock.hpp"

namespace pressured::k8s {

struct BackoffOptions {
  Duration initial{};
  Duration max{};
  /// The base starts again from `initial` when more than this passed between
  /// two waits; nullopt: never (a Backoff per request).
  std::optional<Duration> reset_after;
  /// Each wait adds up to this multiple of the base, uniformly at random
  /// (0: the base exactly; 1: between the base and twice it).
  double jitter = 0;
  /// The jitter's seed; 0: random.
  uint32_t seed = 0;
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options);
  /// The wait before the next attempt at `now` (only read for reset_after):
  /// the base plus its jitter; the base then doubles, up to `max`.
  Duration next(TimePoint now = TimePoint{});

 private:
  BackoffOptions opts_;
  Duration base_;
  std::optional<TimePoint> last_;
  std::minstd_rand jitter_;
};

}  // namespace pressured::k8s
