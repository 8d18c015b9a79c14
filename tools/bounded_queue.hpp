// A blocking FIFO with a fixed capacity: push() waits while full, pop() while
// empty; close() wakes everyone (pop then returns false once drained). The
// bound is what keeps fast actors from racing ahead of a slow learner.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

namespace mambarl {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity) {}

  // Returns false if the queue was closed.
  bool push(T v) {
    std::unique_lock<std::mutex> lk(m_);
    not_full_.wait(lk, [&] { return closed_ || q_.size() < capacity_; });
    if (closed_) return false;
    q_.push_back(std::move(v));
    high_water_ = q_.size() > high_water_ ? q_.size() : high_water_;
    not_empty_.notify_one();
    return true;
  }
  bool pop(T& out) {
    std::unique_lock<std::mutex> lk(m_);
    not_empty_.wait(lk, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return false;
    out = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return true;
  }
  enum class Pop { item, timeout, closed };
  // pop() that gives up after `wait` (so the caller can look at the clock).
  template <typename Rep, typename Period> Pop pop_for(T& out, std::chrono::duration<Rep, Period> wait) {
    std::unique_lock<std::mutex> lk(m_);
    if (!not_empty_.wait_for(lk, wait, [&] { return closed_ || !q_.empty(); })) return Pop::timeout;
    if (q_.empty()) return Pop::closed;
    out = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return Pop::item;
  }
  void close() {
    std::lock_guard<std::mutex> lk(m_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }
  size_t high_water() const {
    std::lock_guard<std::mutex> lk(m_);
    return high_water_;
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  mutable std::mutex m_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> q_;
  size_t high_water_ = 0;
  bool closed_ = false;
};

}  // namespace mambarl
