// Building and describing mambarl_tensor views (C++ side of the plugin ABI),
// shared by the host, which wraps caller buffers, and the plugins, which
// validate what they receive. Header-only: a view is five words.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

#include "kernels/base/check.hpp"
#include "plugin/mambarl_plugin.h"

namespace mambarl {

inline mambarl_tensor make_view(void* data, int32_t dtype, const int64_t* dims, size_t ndim,
                                int32_t device = MAMBARL_DEVICE_CPU) {
  MAMBARL_CHECK(ndim <= 4, "a mambarl_tensor has at most 4 dimensions, got " << ndim);
  mambarl_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int32_t>(ndim);
  for (size_t i = 0; i < ndim; ++i) t.shape[i] = dims[i];
  return t;
}
inline mambarl_tensor make_view(void* data, int32_t dtype, std::initializer_list<int64_t> dims,
                                int32_t device = MAMBARL_DEVICE_CPU) {
  return make_view(data, dtype, dims.begin(), dims.size(), device);
}

// Views of caller-owned memory, on the host unless `device` says otherwise
// (MAMBARL_DEVICE_CUDA: a device pointer). The const overloads are for
// inputs: the ABI's view type has a non-const pointer, and the callee only
// reads inputs.
inline mambarl_tensor view_f32(float* p, std::initializer_list<int64_t> dims,
                               int32_t device = MAMBARL_DEVICE_CPU) {
  return make_view(p, MAMBARL_DTYPE_F32, dims, device);
}
inline mambarl_tensor view_f32(const float* p, std::initializer_list<int64_t> dims,
                               int32_t device = MAMBARL_DEVICE_CPU) {
  return make_view(const_cast<float*>(p), MAMBARL_DTYPE_F32, dims, device);
}
inline mambarl_tensor view_u8(uint8_t* p, std::initializer_list<int64_t> dims,
                              int32_t device = MAMBARL_DEVICE_CPU) {
  return make_view(p, MAMBARL_DTYPE_U8, dims, device);
}
inline mambarl_tensor view_u8(const uint8_t* p, std::initializer_list<int64_t> dims,
                              int32_t device = MAMBARL_DEVICE_CPU) {
  return make_view(const_cast<uint8_t*>(p), MAMBARL_DTYPE_U8, dims, device);
}

inline const char* view_dtype_name(int32_t dtype) {
  switch (dtype) {
    case MAMBARL_DTYPE_F32: return "f32";
    case MAMBARL_DTYPE_U8: return "u8";
    default: return "unknown";
  }
}
inline size_t view_dtype_size(int32_t dtype) {
  switch (dtype) {
    case MAMBARL_DTYPE_F32: return 4;
    case MAMBARL_DTYPE_U8: return 1;
    default: MAMBARL_FAIL("unknown mambarl_tensor dtype " << dtype);
  }
}
inline const char* view_device_name(int32_t device) {
  switch (device) {
    case MAMBARL_DEVICE_CPU: return "cpu";
    case MAMBARL_DEVICE_CUDA: return "cuda";
    default: return "an unknown device";
  }
}

// "(8, 4)"; a view with an invalid ndim prints as "(ndim=7)".
inline std::string shape_string(const mambarl_tensor& t) {
  std::ostringstream os;
  os << "(";
  if (t.ndim < 0 || t.ndim > 4) {
    os << "ndim=" << t.ndim;
  } else {
    for (int i = 0; i < t.ndim; ++i) os << (i ? ", " : "") << t.shape[i];
  }
  os << ")";
  return os.str();
}

// Number of elements; the view's ndim must be valid.
inline int64_t numel(const mambarl_tensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

// An optional argument that is not given: data NULL and ndim 0.
inline mambarl_tensor absent_view() {
  return mambarl_tensor{nullptr, MAMBARL_DTYPE_U8, MAMBARL_DEVICE_CPU, 0, {}};
}
inline bool view_given(const mambarl_tensor& t) { return !(t.data == nullptr && t.ndim == 0); }

// Throws Error unless `t` is a `dtype` tensor on `device` with exactly `dims`,
// e.g. "actor_act: obs has shape (8, 3), expected (8, 4)". `what` names the
// function and the argument. A null pointer passes only for zero elements.
inline void check_view(const std::string& what, const mambarl_tensor& t, int32_t dtype,
                       int32_t device, std::initializer_list<int64_t> dims) {
  bool same = t.ndim == static_cast<int32_t>(dims.size());
  int i = 0;
  for (int64_t d : dims) same = same && t.shape[i++] == d;
  if (!same) {
    mambarl_tensor expected = make_view(nullptr, dtype, dims);
    throw Error(what + " has shape " + shape_string(t) + ", expected " + shape_string(expected));
  }
  if (t.dtype != dtype)
    throw Error(what + " has dtype " + view_dtype_name(t.dtype) + " (" + std::to_string(t.dtype) +
                "), expected " + view_dtype_name(dtype));
  if (t.device != device)
    throw Error(what + " is on " + view_device_name(t.device) + ", expected " + view_device_name(device) +
                " memory");
  if (t.data == nullptr && numel(t) > 0) throw Error(what + " has a null data pointer");
}

}  // namespace mambarl
