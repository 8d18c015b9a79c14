// Checkpoints as safetensors files, readable by PyTorch and the Hugging Face tools.
//
// Format (huggingface/safetensors, tensor.rs):
//   u64 little-endian N | N bytes of UTF-8 JSON header | data section
// The header is one object: tensor name -> {"dtype","shape","data_offsets":[begin,end]}
// with offsets into the data section, plus an optional "__metadata__" object of
// string -> string. The writer emits compact JSON padded with spaces so N is a
// multiple of 8 (the data then starts 8-aligned), "__metadata__" first, tensors in
// the caller's order laid out back to back. Tensor data is raw little-endian,
// row-major ("C" order). The format allows no padding between tensors, so only the
// order keeps each one naturally aligned in the file: list wider dtypes first (the
// reference writer sorts by dtype size) when a reader may map tensors in place.
//
// The reader treats the file as hostile: every length is checked against the real
// file size before anything is allocated, and the tensors must tile the data
// section exactly (no holes, no overlap, nothing left over). Any problem is a
// mambarl::Error whose message starts with the file's path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace mambarl {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; tensors are copied as raw host bytes");

// The subset of safetensors dtypes we read and write.
enum class DType { F64, F32, F16, BF16, I64, I32, U8 };

size_t dtype_size(DType dtype);       // bytes per element
const char* dtype_name(DType dtype);  // the header spelling: "F32", "BF16", ...

// The DType whose bytes are exactly a T; F16 and BF16 have no C++ type here.
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }

// Product of the dimensions ({} -> 1). Throws on a negative dimension or a product
// that overflows size_t.
size_t shape_numel(const std::vector<int64_t>& shape);

struct TensorRecord {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // row-major; {} is a scalar (numel 1)
  std::vector<uint8_t> bytes;  // numel() * dtype_size(dtype), little-endian
  size_t numel() const { return shape_numel(shape); }
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__"; omitted from the file when empty
  std::vector<TensorRecord> tensors;            // written in this order, back to back; read in header order
  std::string source;  // the path it was read from (prefixes at()'s error); empty if built in memory

  const TensorRecord* find(const std::string& name) const;  // nullptr if absent
  // Throws an error naming the tensor and listing a few of the names present.
  const TensorRecord& at(const std::string& name) const;
};

// `bytes` must hold numel(shape) * dtype_size(dtype) bytes; that count is checked.
TensorRecord make_tensor_bytes(std::string name, DType dtype, std::vector<int64_t> shape, const void* bytes,
                               size_t nbytes);

// Throws unless t.dtype == expected and t.numel() == n, naming the tensor and both sides.
void check_tensor_matches(const TensorRecord& t, DType expected, size_t n);

// A tensor of dtype_of<T>() holding numel(shape) elements copied from `data`.
template <typename T> TensorRecord make_tensor(std::string name, std::vector<int64_t> shape, const T* data) {
  const size_t nbytes = shape_numel(shape) * sizeof(T);
  return make_tensor_bytes(std::move(name), dtype_of<T>(), std::move(shape), data, nbytes);
}

// Copies t into dst[0, n); t must be of dtype_of<T>() with exactly n elements.
template <typename T> void copy_to(const TensorRecord& t, T* dst, size_t n) {
  check_tensor_matches(t, dtype_of<T>(), n);
  if (n) std::memcpy(dst, t.bytes.data(), n * sizeof(T));
}

// Atomic replace: writes `path`.tmp.<pid> in the same directory, fsyncs it, renames it
// over `path`, then fsyncs the directory. On a failure before the rename the temp file
// is removed and whatever was at `path` is untouched. Two threads of one process must
// not write the same path at once: they would share the temp file.
void write_safetensors(const std::string& path, const SafetensorsFile& file);

SafetensorsFile read_safetensors(const std::string& path);

}  // namespace mambarl
