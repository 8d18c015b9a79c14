// Ranks over MPI (tools/ranks.hpp): MPI_COMM_WORLD, host buffers. MPI's
// default error handler (errors are fatal) stays: a failed collective ends the
// whole job rather than leaving ranks waiting on each other. A rank that hangs
// (stopped, or stuck in a loop) fails nothing, though, and a blocking
// collective would wait for it forever; so every collective is the
// non-blocking form, waited for by wait() until the collective timeout.
#include <mpi.h>

#include <iostream>
#include <limits>

#include "kernels/base/check.hpp"
#include "tools/ranks.hpp"

namespace mambarl {

namespace {

class MpiRanks final : public Ranks {
 public:
  MpiRanks() {
    // The runner calls MPI from its main thread only (sync mode); other
    // threads (none under several ranks) never do.
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiRanks() override {
    // MPI_Finalize waits for every rank, without bound: meet them first
    // under the collective timeout, so a rank that hangs at the very end
    // ends the job too.
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    wait(r, "the end of the job");
    MPI_Finalize();
  }
  MpiRanks(const MpiRanks&) = delete;
  MpiRanks& operator=(const MpiRanks&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void sum(double* x, size_t n, const char* what) override {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, x, count(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    wait(r, what);
  }
  void sum(float* x, size_t n, const char* what) override {
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, x, count(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    wait(r, what);
  }

  std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine, const char* what) override {
    const std::vector<int> sizes = all_sizes(mine, what);
    const std::vector<int> at = offsets(sizes);
    std::vector<uint8_t> all(static_cast<size_t>(at.back() + sizes.back()));
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Iallgatherv(mine.data(), count(mine.size()), MPI_BYTE, all.data(), sizes.data(), at.data(), MPI_BYTE,
                    MPI_COMM_WORLD, &r);
    wait(r, what);
    return split(all, sizes, at);
  }

  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine, const char* what) override {
    const std::vector<int> sizes = all_sizes(mine, what);
    const std::vector<int> at = offsets(sizes);
    std::vector<uint8_t> all(is_root() ? static_cast<size_t>(at.back() + sizes.back()) : 0);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Igatherv(mine.data(), count(mine.size()), MPI_BYTE, all.data(), sizes.data(), at.data(), MPI_BYTE, 0,
                 MPI_COMM_WORLD, &r);
    wait(r, what);
    if (!is_root()) return {};
    return split(all, sizes, at);
  }

 private:
  // Tests of a request between two looks at the clock. MPI_Test drives MPI's
  // progress, as the blocking call's own loop would; reading the clock rarely
  // keeps the wait as cheap as that loop, and a timeout is seen at most this
  // many tests late.
  static constexpr unsigned kTestsPerClockLook = 1024;

  // Waits on this (the main) thread until `request` completes, or ends the
  // job once it has waited longer than the collective timeout.
  void wait(MPI_Request& request, const char* what) {
    int done = 0;
    const auto since = CollectiveTimeout::Clock::now();
    for (unsigned tests = 1;; ++tests) {
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (tests % kTestsPerClockLook == 0 && timeout().passed(since, CollectiveTimeout::Clock::now())) {
        std::cerr << "mambarl: " << error_on_rank(*this, timeout().why(what, "MPI")) << "; ending the job"
                  << std::endl;
        abort(1);
      }
    }
  }

  void end_every_rank(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

  static int count(size_t n) {
    MAMBARL_CHECK(n <= static_cast<size_t>(std::numeric_limits<int>::max()),
                  "MPI message of " << n << " elements: more than MPI's int counts hold");
    return static_cast<int>(n);
  }
  std::vector<int> all_sizes(const std::vector<uint8_t>& mine, const char* what) {
    std::vector<int> sizes(static_cast<size_t>(size_));
    const int n = count(mine.size());
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Iallgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD, &r);
    wait(r, what);
    return sizes;
  }
  static std::vector<int> offsets(const std::vector<int>& sizes) {
    std::vector<int> at(sizes.size(), 0);
    for (size_t r = 1; r < sizes.size(); ++r) {
      MAMBARL_CHECK(at[r - 1] <= std::numeric_limits<int>::max() - sizes[r - 1],
                    "MPI gather of more than 2 GiB: more than MPI's int offsets hold");
      at[r] = at[r - 1] + sizes[r - 1];
    }
    return at;
  }
  static std::vector<std::vector<uint8_t>> split(const std::vector<uint8_t>& all,
                                                 const std::vector<int>& sizes, const std::vector<int>& at) {
    std::vector<std::vector<uint8_t>> out;
    for (size_t r = 0; r < sizes.size(); ++r)
      out.emplace_back(all.begin() + at[r], all.begin() + at[r] + sizes[r]);
    return out;
  }

  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Ranks> make_mpi_ranks() { return std::make_unique<MpiRanks>(); }

}  // namespace mambarl
