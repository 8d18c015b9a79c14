// MAMBARL_HD marks a function that host code and CUDA kernels both call (the
// envs, the random generator, the running statistics): __host__ __device__
// under nvcc, nothing for the host compiler, so one definition serves both.
#pragma once

#if defined(__CUDACC__)
#define MAMBARL_HD __host__ __device__
#else
#define MAMBARL_HD
#endif
