// Parameters live in one flat buffer; a ParamLayout names the slices.
//
// Why one buffer: AdamW, grad clipping, checkpointing, actor weight refresh and
// (later) the NCCL all-reduce all act on "every parameter" and become one loop
// or one call over a contiguous array. Gradients use the same layout, so
// grads[offset] belongs to params[offset]. Layout is fixed at model
// construction; buffers are allocated once and never move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/check.hpp"
#include "policy/tensor.hpp"

namespace mambarl {

struct ParamInfo {
  std::string name;            // e.g. "layers.0.mixer.in_proj.weight"
  std::vector<int64_t> shape;  // 1-D or 2-D (rows, cols), row-major
  size_t offset = 0;           // in elements, into the flat buffer
  size_t numel = 0;
  bool weight_decay = true;    // false for A_log, D, dt biases, norm weights, biases
};

using ParamId = int;

class ParamLayout {
 public:
  ParamId add(const std::string& name, std::vector<int64_t> shape, bool weight_decay) {
    MAMBARL_CHECK(!shape.empty() && shape.size() <= 2,
                  "parameter '" << name << "' must be 1-D or 2-D");
    for (const auto& p : params_) MAMBARL_CHECK(p.name != name, "duplicate parameter '" << name << "'");
    ParamInfo info;
    info.name = name;
    info.weight_decay = weight_decay;
    info.shape = std::move(shape);
    info.numel = 1;
    for (int64_t d : info.shape) {
      MAMBARL_CHECK(d > 0, "parameter '" << name << "' has a non-positive dimension " << d);
      info.numel *= static_cast<size_t>(d);
    }
    // Keep every tensor 16-element aligned so SIMD/CUDA vector loads of a
    // slice never straddle its neighbour.
    info.offset = (size_ + 15) / 16 * 16;
    size_ = info.offset + info.numel;
    params_.push_back(std::move(info));
    return static_cast<ParamId>(params_.size() - 1);
  }

  const std::vector<ParamInfo>& params() const { return params_; }
  const ParamInfo& operator[](ParamId id) const { return params_.at(static_cast<size_t>(id)); }
  size_t size() const { return size_; }  // total elements including alignment padding
  // The offset of `name`, which must exist with exactly `shape`; `who` names
  // the caller in the error (an engine built for another config or layout).
  size_t offset_of(const std::string& name, const std::vector<int64_t>& shape, const char* who) const {
    const ParamId id = find(name);
    MAMBARL_CHECK(id >= 0, who << ": the model has no parameter '" << name << "'");
    MAMBARL_CHECK(params_[static_cast<size_t>(id)].shape == shape,
                  who << ": parameter '" << name << "' does not have the shape its mixer config implies");
    return params_[static_cast<size_t>(id)].offset;
  }
  // Returns -1 when absent.
  ParamId find(const std::string& name) const {
    for (size_t i = 0; i < params_.size(); ++i)
      if (params_[i].name == name) return static_cast<ParamId>(i);
    return -1;
  }

 private:
  std::vector<ParamInfo> params_;
  size_t size_ = 0;
};

// Typed views of a flat buffer (parameters or gradients) by ParamId.
template <typename S>
class ParamView {
 public:
  ParamView(const ParamLayout& layout, S* data) : layout_(&layout), data_(data) {}

  S* ptr(ParamId id) const { return data_ + (*layout_)[id].offset; }
  // A 2-D parameter (rows, cols) as a row-major matrix.
  MatMap<S> mat(ParamId id) const {
    const auto& p = (*layout_)[id];
    MAMBARL_CHECK(p.shape.size() == 2, "parameter '" << p.name << "' is not 2-D");
    return MatMap<S>(ptr(id), p.shape[0], p.shape[1]);
  }
  // Any parameter as a flat vector.
  VecMap<S> vec(ParamId id) const {
    const auto& p = (*layout_)[id];
    return VecMap<S>(ptr(id), static_cast<Eigen::Index>(p.numel));
  }
  const ParamLayout& layout() const { return *layout_; }
  S* data() const { return data_; }

 private:
  const ParamLayout* layout_;
  S* data_;
};

}  // namespace mambarl
