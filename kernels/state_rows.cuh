// The memory-bound core of a T=1 SSM step, shared by Mamba-1 and Mamba-3:
// a recurrent state of `rows` rows of N floats (Mamba-1: row e = H[e, :];
// Mamba-3: row h·P+p = S_h[p, :]) where every element is rewritten from its
// old value and the row's inputs, and each new row is reduced against a
// vector: y[row] = Σ_n new[row, n] · c[n] (C_t, or q_h).
//
// One block owns one env. Each element is read once and written once, by
// the same thread, so the step may run in place (state_in == state_out) and
// needs no __restrict__ on the state. At an episode start the old values are
// zero and not read at all.
//
// Mapping: a thread handles chunks of VW consecutive n (VW = 4: one 16-byte
// load/store; consecutive lanes take consecutive chunks, so a warp moves 512
// contiguous bytes) and U chunks per tile, loaded together so that U loads
// are in flight. The row sums are segmented over the Q = N/VW chunks of a row
// through shared memory, in chunk order: deterministic, no atomics.
// load(…, 0) may be called early in the kernel, before the row inputs are
// ready, so the first tile's DRAM latency overlaps the caller's other work.
#pragma once

#include <cuda_runtime.h>

namespace mambarl::cuda {

template <int VW>
struct Chunk {
  float v[VW];
};

template <int VW>
__device__ __forceinline__ Chunk<VW> load_chunk(const float* p) {
  Chunk<VW> c;
  if constexpr (VW == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    c.v[0] = q.x, c.v[1] = q.y, c.v[2] = q.z, c.v[3] = q.w;
  } else {
#pragma unroll
    for (int j = 0; j < VW; ++j) c.v[j] = p[j];
  }
  return c;
}

template <int VW>
__device__ __forceinline__ void store_chunk(float* p, const Chunk<VW>& c) {
  if constexpr (VW == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(c.v[0], c.v[1], c.v[2], c.v[3]);
  } else {
#pragma unroll
    for (int j = 0; j < VW; ++j) p[j] = c.v[j];
  }
}

// Read-only parameters (A, shared by all envs) go through the read-only cache.
template <int VW>
__device__ __forceinline__ Chunk<VW> load_param_chunk(const float* p) {
  Chunk<VW> c;
  if constexpr (VW == 4) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    c.v[0] = q.x, c.v[1] = q.y, c.v[2] = q.z, c.v[3] = q.w;
  } else {
#pragma unroll
    for (int j = 0; j < VW; ++j) c.v[j] = __ldg(p + j);
  }
  return c;
}

constexpr int kStateRowsUnroll = 4;  // chunks per thread per tile

template <int VW>
class StateRows {
 public:
  static constexpr int U = kStateRowsUnroll;
  // Shared floats the caller provides for the segmented sums.
  __host__ __device__ static int scratch_floats(int threads) { return threads * U; }

  __device__ StateRows(int rows, int n) : rows_(rows), n_(n), q_(n / VW) {
    tile_rows_ = static_cast<int>(blockDim.x) * U / q_;  // launchers ensure q_ <= threads * U
  }

  // Loads the tile starting at row r0 into registers (zeros at a start).
  __device__ void load(const float* in, bool start, int r0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      int row, n0;
      if (locate(u, r0, row, n0) && !start) {
        held_[u] = load_chunk<VW>(in + static_cast<size_t>(row) * n_ + n0);
      } else {
#pragma unroll
        for (int j = 0; j < VW; ++j) held_[u].v[j] = 0.f;
      }
    }
  }

  // Runs every tile (the first one already loaded): new = op.step(row, n0,
  // old) is stored to out (unless out is null: a peek), and y[row] (shared, rows) gets Σ op.dot(row, n0,
  // new) over the row's chunks. Ends with a barrier, so y is visible.
  template <class Op>
  __device__ void run(const float* in, float* out, bool start, const Op& op, float* part,
                      float* y) {
    for (int r0 = 0; r0 < rows_; r0 += tile_rows_) {
      if (r0 > 0) load(in, start, r0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        int row, n0;
        if (locate(u, r0, row, n0)) {
          const Chunk<VW> nv = op.template step<VW>(row, n0, held_[u]);
          if (out) store_chunk<VW>(out + static_cast<size_t>(row) * n_ + n0, nv);
          part[u * blockDim.x + threadIdx.x] = op.template dot<VW>(row, n0, nv);
        }
      }
      __syncthreads();
      for (int j = threadIdx.x; j < tile_rows_ && r0 + j < rows_; j += blockDim.x) {
        float s = 0.f;
        for (int q = 0; q < q_; ++q) s += part[j * q_ + q];
        y[r0 + j] = s;
      }
      __syncthreads();
    }
  }

 private:
  // Chunk u of this thread in the tile at r0: its row and first n.
  __device__ bool locate(int u, int r0, int& row, int& n0) const {
    const int i = u * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    if (i >= tile_rows_ * q_) return false;
    row = r0 + i / q_;
    n0 = (i % q_) * VW;
    return row < rows_;
  }

  int rows_, n_, q_, tile_rows_;
  Chunk<VW> held_[U];
};

}  // namespace mambarl::cuda
