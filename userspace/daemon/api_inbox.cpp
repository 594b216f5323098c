#include "daemon/api_inbox.hpp"

#include <utility>

#include "daemon/crash_point.hpp"
#include "k8s/reporter.hpp"

namespace pressured {

ApiInbox::ApiInbox(k8s::Reporter* reporter, EventLoop* loop, std::function<void()> wake)
    : reporter_(reporter), loop_(loop), wake_(std::move(wake)) {
  if (reporter_ == nullptr) return;
  reporter_->set_eviction_hook([this](const std::string& id, k8s::EvictionResult r) {
    using E = k8s::EvictionResult;
    using R = ApiAnswer::Result;
    post({id,
          r == E::Landed || r == E::Recorded ? R::Landed
          : r == E::NotNeeded                ? R::NotNeeded
          : r == E::GaveUp                   ? R::GaveUp
                                             : R::Dropped,
          r == E::Recorded});
  });
}

ApiInbox::~ApiInbox() {
  if (reporter_ != nullptr) reporter_->set_eviction_hook({});
}

void ApiInbox::post(ApiAnswer answer) {
  if (answer.result == ApiAnswer::Result::Landed) crash_point("api-landed");
  {
    std::lock_guard lk(mu_);
    answers_.push_back(std::move(answer));
  }
  // Recorded (and checkpointed) at once, not at the next tick: a restart
  // before then would send it again (harmless: the reporter skips a pod
  // already terminating), so soon is only tidier.
  if (loop_ != nullptr && wake_) loop_->post(wake_);
}

std::vector<ApiAnswer> ApiInbox::take() {
  std::lock_guard lk(mu_);
  return std::exchange(answers_, {});
}

}  // namespace pressured
