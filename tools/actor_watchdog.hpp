// Stalled-actor detection for the async actor-learner loop. Each actor thread
// marks when it starts filling a chunk and when it has handed it over; time
// spent waiting for a free chunk (a slow learner) does not count. The learner
// thread asks check() between chunks and while it waits for one: an actor busy
// on one chunk for longer than runtime.actor_stall_s is reported.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

namespace mambarl {

class ActorWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  struct Stall {
    int actor = 0;
    Clock::time_point since;  // when it began the chunk it never finished
    double stalled_s = 0;     // how long ago that was
  };

  ActorWatchdog(int num_actors, double stall_s)
      : n_(num_actors), stall_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(stall_s))),
        busy_since_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(num_actors))) {
    for (int k = 0; k < n_; ++k) busy_since_[static_cast<size_t>(k)] = kIdle;
  }

  void begin_chunk(int actor, Clock::time_point now = Clock::now()) {
    busy_since_[static_cast<size_t>(actor)] = now.time_since_epoch().count();
  }
  void end_chunk(int actor) { busy_since_[static_cast<size_t>(actor)] = kIdle; }

  // The actor busy the longest, if that is longer than the stall limit.
  std::optional<Stall> check(Clock::time_point now = Clock::now()) const {
    std::optional<Stall> worst;
    for (int k = 0; k < n_; ++k) {
      const int64_t t = busy_since_[static_cast<size_t>(k)];
      if (t == kIdle) continue;
      const Clock::time_point since{Clock::duration(t)};
      if (now - since > stall_ && (!worst || since < worst->since))
        worst = Stall{k, since, std::chrono::duration<double>(now - since).count()};
    }
    return worst;
  }

 private:
  static constexpr int64_t kIdle = INT64_MIN;
  const int n_;
  const Clock::duration stall_;
  std::unique_ptr<std::atomic<int64_t>[]> busy_since_;  // (num_actors) clock ticks, or kIdle
};

}  // namespace mambarl
