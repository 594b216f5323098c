#pragma once
// A bounded lock-free multi-producer queue (a sequence-numbered ring in the
// manner of D. Vyukov's bounded MPMC queue). Slow workers (disk walks, API
// calls) push results; the reactor thread pops them after an eventfd wakeup.
// push() never blocks and never allocates: when full it fails and the caller
// decides (count, retry later). Capacity is rounded up to a power of two.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <utility>

namespace pressured {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(std::size_t capacity) {
    std::size_t cap = 2;
    while (cap < capacity) cap <<= 1;
    mask_ = cap - 1;
    cells_ = std::make_unique<Cell[]>(cap);
    for (std::size_t i = 0; i < cap; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  std::size_t capacity() const { return mask_ + 1; }

  /// Any thread. False when full; `value` is then left untouched.
  bool try_push(T& value) {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      std::size_t seq = c.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value.emplace(std::move(value));
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }
  bool try_push(T&& value) { return try_push(value); }

  /// Any thread (the reactor is the only consumer in pressured). nullopt when empty.
  std::optional<T> try_pop() {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      std::size_t seq = c.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos + 1);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          std::optional<T> out(std::move(*c.value));
          c.value.reset();
          c.seq.store(pos + mask_ + 1, std::memory_order_release);
          return out;
        }
      } else if (diff < 0) {
        return std::nullopt;  // empty
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

 private:
  struct Cell {
    std::atomic<std::size_t> seq{0};
    std::optional<T> value;
  };
  static constexpr std::size_t kLine = 64;
  std::unique_ptr<Cell[]> cells_;
  std::size_t mask_ = 0;
  alignas(kLine) std::atomic<std::size_t> tail_{0};
  alignas(kLine) std::atomic<std::size_t> head_{0};
};

}  // namespace pressured
