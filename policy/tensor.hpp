// Eigen aliases used throughout the CPU reference.
//
// Every activation is a row-major matrix whose rows are tokens: row t*B + b is
// env (sequence) b at time t of a [T, B] chunk. Row-major keeps one token's
// features contiguous, which is also the layout the GPU kernels use.
#pragma once

#include <vector>

#include <Eigen/Core>

namespace mambarl {

template <typename S>
using Mat = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename S>
using Vec = Eigen::Matrix<S, Eigen::Dynamic, 1>;
template <typename S>
using RowVec = Eigen::Matrix<S, 1, Eigen::Dynamic>;

// Flat buffers that Eigen maps (parameters, gradients, recurrent state) use
// Eigen's aligned allocator: with a fixed base alignment Eigen's SIMD loops
// peel the same leading elements every time, so a run's floating-point
// results do not depend on where malloc happened to place a buffer (a plain
// std::vector made two same-seed runs in one process differ in the last bits).
template <typename S>
using AlignedVec = std::vector<S, Eigen::aligned_allocator<S>>;

template <typename S>
using MatMap = Eigen::Map<Mat<S>>;
template <typename S>
using ConstMatMap = Eigen::Map<const Mat<S>>;
template <typename S>
using VecMap = Eigen::Map<Vec<S>>;
template <typename S>
using ConstVecMap = Eigen::Map<const Vec<S>>;

// Flat arrays (for elementwise math over a contiguous slice).
template <typename S>
using ArrMap = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;
template <typename S>
using CArrMap = Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>;

// Start of row r of a row-major matrix: token r's features.
template <typename S>
S* row_ptr(Mat<S>& m, Eigen::Index r) {
  return m.data() + r * m.cols();
}
template <typename S>
const S* row_ptr(const Mat<S>& m, Eigen::Index r) {
  return m.data() + r * m.cols();
}

}  // namespace mambarl
