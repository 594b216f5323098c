#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pressured/bounded_queue.hpp"

namespace pressured {
namespace {

TEST(BoundedQueue, FifoAndCapacity) {
  BoundedQueue<int> q(5);
  EXPECT_EQ(q.capacity(), 8u);
  EXPECT_FALSE(q.try_pop().has_value());
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(q.try_push(i)) << i;
  EXPECT_FALSE(q.try_push(99)) << "full queue must refuse";
  for (int i = 0; i < 8; ++i) {
    auto v = q.try_pop();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, i);
  }
  EXPECT_FALSE(q.try_pop().has_value());
  // Wraps around many times.
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(q.try_push(i));
    ASSERT_EQ(*q.try_pop(), i);
  }
}

TEST(BoundedQueue, RefusedPushLeavesValueIntact) {
  BoundedQueue<std::string> q(2);
  ASSERT_TRUE(q.try_push(std::string("a")));
  ASSERT_TRUE(q.try_push(std::string("b")));
  std::string keep = "still here";
  EXPECT_FALSE(q.try_push(keep));
  EXPECT_EQ(keep, "still here");
}

TEST(BoundedQueue, MoveOnlyValues) {
  BoundedQueue<std::unique_ptr<int>> q(4);
  ASSERT_TRUE(q.try_push(std::make_unique<int>(7)));
  auto v = q.try_pop();
  ASSERT_TRUE(v && *v);
  EXPECT_EQ(**v, 7);
}

// Several producers, one consumer, a small ring so that "full" happens often.
// Bounded: fixed item count and a 20 s deadline.
TEST(BoundedQueue, ConcurrentProducersStress) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 50'000;
  BoundedQueue<uint64_t> q(64);
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&q, &done, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        uint64_t v = (static_cast<uint64_t>(p) << 32) | static_cast<uint64_t>(i);
        while (!q.try_push(v)) std::this_thread::yield();
      }
      done.fetch_add(1);
    });
  }
  std::vector<int> next(kProducers, 0);
  long received = 0;
  bool in_order = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (received < static_cast<long>(kProducers) * kPerProducer && std::chrono::steady_clock::now() < deadline) {
    auto v = q.try_pop();
    if (!v) {
      std::this_thread::yield();
      continue;
    }
    int p = static_cast<int>(*v >> 32);
    int i = static_cast<int>(*v & 0xffffffffu);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, kProducers);
    if (i != next[static_cast<std::size_t>(p)]) in_order = false;
    next[static_cast<std::size_t>(p)] = i + 1;
    ++received;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(received, static_cast<long>(kProducers) * kPerProducer);
  EXPECT_TRUE(in_order) << "each producer's items must arrive in its order";
  EXPECT_FALSE(q.try_pop().has_value());
  EXPECT_EQ(done.load(), kProducers);
}

}  // namespace
}  // namespace pressured
