// Channel implementation (see channel.h).
#include "serve/channel.h"

namespace frost::serve {

void Channel::notify_locked_out(std::unique_lock<std::mutex>& lock) {
    auto fn = notify_;
    lock.unlock();
    if (fn) fn();
}

bool Channel::try_push(StreamEvent e) {
    std::unique_lock<std::mutex> lock(mu_);
    if (q_.size() >= capacity_) return false;
    q_.push_back(std::move(e));
    notify_locked_out(lock);
    return true;
}

void Channel::push_final(StreamEvent e) {
    std::unique_lock<std::mutex> lock(mu_);
    q_.push_back(std::move(e));
    notify_locked_out(lock);
}

bool Channel::full() const {
    std::lock_guard<std::mutex> lock(mu_);
    return q_.size() >= capacity_;
}

std::optional<StreamEvent> Channel::try_pop() {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.empty()) return std::nullopt;
    StreamEvent e = std::move(q_.front());
    q_.pop_front();
    return e;
}

void Channel::set_notify(std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mu_);
    notify_ = std::move(fn);
    const bool pending = !q_.empty();
    auto f = notify_;
    lock.unlock();
    if (pending && f) f();
}

}  // namespace frost::serve
