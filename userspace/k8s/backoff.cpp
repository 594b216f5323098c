#include "k8s/backoff.hpp"

#include <algorithm>

namespace pressured::k8s {

namespace {
uint32_t seed_of(const BackoffOptions& o) {
  if (o.seed != 0) return o.seed;
  // No random device opened for a backoff without jitter (one per request).
  return o.jitter > 0 ? std::random_device{}() : 1u;
}
}  // namespace

Backoff::Backoff(BackoffOptions options) : opts_(options), base_(options.initial), jitter_(seed_of(options)) {}

Duration Backoff::next(TimePoint now) {
  if (opts_.reset_after && last_ && now - *last_ > *opts_.reset_after) base_ = opts_.initial;
  last_ = now;
  const Duration base = base_;
  base_ = std::min(base_ * 2, opts_.max);
  if (opts_.jitter <= 0) return base;
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(jitter_);
  return base + std::chrono::duration_cast<Duration>(base * (opts_.jitter * u));
}

}  // namespace pressured::k8s
