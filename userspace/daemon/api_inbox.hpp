#pragma once
// The one adapter between the Kubernetes reporter and the eviction policy:
// the reporter's worker (or the executor's stack, for an answer the reporter
// gives at once: a full queue) posts each answer here; the daemon drains the
// inbox at the start of an evaluation, as the policy's input
// (PolicyInputs::api_answers). Posting never runs an evaluation: it asks
// the loop for one.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "pressured/events.hpp"
#include "pressured/policy.hpp"

namespace pressured {

namespace k8s {
class Reporter;
}

class ApiInbox {
 public:
  /// Installs itself as `reporter`'s eviction hook (none when null).
  /// `wake` is posted to `loop` (when set) after each answer.
  ApiInbox(k8s::Reporter* reporter, EventLoop* loop, std::function<void()> wake);
  /// Removes the hook: no answer arrives after.
  ~ApiInbox();
  ApiInbox(const ApiInbox&) = delete;
  ApiInbox& operator=(const ApiInbox&) = delete;

  /// From any thread.
  void post(ApiAnswer answer);
  /// The answers since the last call (the loop's thread).
  std::vector<ApiAnswer> take();

 private:
  k8s::Reporter* reporter_;
  EventLoop* loop_;
  std::function<void()> wake_;
  std::mutex mu_;
  std::vector<ApiAnswer> answers_;  // under mu_
};

}  // namespace pressured
