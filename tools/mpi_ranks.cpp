// Ranks over MPI (tools/ranks.hpp): MPI_COMM_WORLD, host buffers, blocking
// collectives. MPI's default error handler (errors are fatal) stays: a failed
// collective ends the whole job rather than leaving ranks waiting on each other.
#include <mpi.h>

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
  ~MpiRanks() override { MPI_Finalize(); }
  MpiRanks(const MpiRanks&) = delete;
  MpiRanks& operator=(const MpiRanks&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void sum(double* x, size_t n) override {
    MPI_Allreduce(MPI_IN_PLACE, x, count(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  void sum(float* x, size_t n) override {
    MPI_Allreduce(MPI_IN_PLACE, x, count(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }

  std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine) override {
    const std::vector<int> sizes = all_sizes(mine);
    const std::vector<int> at = offsets(sizes);
    std::vector<uint8_t> all(static_cast<size_t>(at.back() + sizes.back()));
    MPI_Allgatherv(mine.data(), count(mine.size()), MPI_BYTE, all.data(), sizes.data(), at.data(), MPI_BYTE,
                   MPI_COMM_WORLD);
    return split(all, sizes, at);
  }

  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine) override {
    const std::vector<int> sizes = all_sizes(mine);
    const std::vector<int> at = offsets(sizes);
    std::vector<uint8_t> all(is_root() ? static_cast<size_t>(at.back() + sizes.back()) : 0);
    MPI_Gatherv(mine.data(), count(mine.size()), MPI_BYTE, all.data(), sizes.data(), at.data(), MPI_BYTE, 0,
                MPI_COMM_WORLD);
    if (!is_root()) return {};
    return split(all, sizes, at);
  }

 private:
  void end_every_rank(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

  static int count(size_t n) {
    MAMBARL_CHECK(n <= static_cast<size_t>(std::numeric_limits<int>::max()),
                  "MPI message of " << n << " elements: more than MPI's int counts hold");
    return static_cast<int>(n);
  }
  std::vector<int> all_sizes(const std::vector<uint8_t>& mine) const {
    std::vector<int> sizes(static_cast<size_t>(size_));
    const int n = count(mine.size());
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
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
