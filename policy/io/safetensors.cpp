#include "policy/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include "kernels/base/check.hpp"
#include "policy/io/posix_file.hpp"
#include "policy/io/strict_json.hpp"

namespace mambarl {

namespace {

using nlohmann::json;

// The reference reader refuses headers above 100 MB; real headers are kilobytes to a
// few MB. Checked before the header is allocated.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

constexpr DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                                DType::I64, DType::I32, DType::U8};

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType d : kAllDTypes)
    if (s == dtype_name(d)) return d;
  return std::nullopt;
}

std::string known_dtypes() {
  std::string out;
  for (DType d : kAllDTypes) out += std::string(out.empty() ? "" : ", ") + dtype_name(d);
  return out;
}

template <typename Int> std::string shape_str(const std::vector<Int>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

// Bytes of a tensor with these (non-negative) dimensions, or nullopt on 64-bit overflow.
std::optional<uint64_t> checked_nbytes(const std::vector<int64_t>& shape, DType dtype) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return std::nullopt;
  return n;
}

// A JSON value as it appears in an error message: a number as nlohmann writes it
// (1e0 as 1.0; 2^64 and above, which do not fit 64 bits, in floating point),
// otherwise its kind.
std::string describe(const json& v) { return v.is_number() ? v.dump() : kind_phrase(v); }

void read_exact(int fd, uint64_t offset, void* dst, size_t n, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, std::min(n, kMaxIoChunk), static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    MAMBARL_CHECK(r >= 0, path << ": read failed at byte " << offset << ": " << errno_message());
    MAMBARL_CHECK(r > 0, path << ": truncated: file ended at byte " << offset
                              << " while reading (was it changed during the read?)");
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
}

// ---- header -> records ------------------------------------------------------------

struct TensorEntry {
  TensorRecord record;  // bytes still empty
  uint64_t begin = 0;   // data_offsets, relative to the data section
  uint64_t end = 0;
};

uint64_t require_u64(const json& v, uint64_t max, const std::string& where, const std::string& path) {
  // nlohmann reads a non-negative integer literal that fits 64 bits as an unsigned
  // number, exactly; "-0", "1.0" and "1e2" are other kinds of number.
  const std::optional<uint64_t> x = v.is_number_unsigned() ? std::optional(v.get<uint64_t>()) : std::nullopt;
  MAMBARL_CHECK(x && *x <= max, path << ": " << where << " is " << describe(v)
                                     << ", expected a non-negative integer"
                                     << (x ? " of at most " + std::to_string(max) : std::string()));
  return *x;
}

TensorEntry parse_tensor_entry(const std::string& name, const json& v, uint64_t data_size,
                               const std::string& path) {
  const std::string t = "tensor " + json_quote(name);
  MAMBARL_CHECK(v.is_object(), path << ": " << t << " is " << describe(v) << ", expected an object");
  for (const auto& [key, value] : v.items())
    MAMBARL_CHECK(key == "dtype" || key == "shape" || key == "data_offsets",
                  path << ": " << t << ": unknown field " << json_quote(key)
                       << " (expected dtype, shape, data_offsets)");
  auto field = [&](const char* key) -> const json& {
    const auto f = v.find(key);
    MAMBARL_CHECK(f != v.end(), path << ": " << t << ": missing field \"" << key << "\"");
    return *f;
  };

  TensorEntry e;
  e.record.name = name;
  const json& dtype = field("dtype");
  MAMBARL_CHECK(dtype.is_string(), path << ": " << t << ": dtype is " << describe(dtype) << ", expected a string");
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  const std::optional<DType> d = parse_dtype(dtype_text);
  MAMBARL_CHECK(d, path << ": " << t << ": unknown or unsupported dtype " << json_quote(dtype_text)
                        << " (supported: " << known_dtypes() << ")");
  e.record.dtype = *d;

  const json& shape = field("shape");
  MAMBARL_CHECK(shape.is_array(), path << ": " << t << ": shape is " << describe(shape) << ", expected an array");
  for (size_t i = 0; i < shape.size(); ++i) {
    const uint64_t dim = require_u64(shape[i], std::numeric_limits<int64_t>::max(),
                                     t + ": shape[" + std::to_string(i) + "]", path);
    e.record.shape.push_back(static_cast<int64_t>(dim));
  }

  const json& offsets = field("data_offsets");
  MAMBARL_CHECK(offsets.is_array() && offsets.size() == 2,
                path << ": " << t << ": data_offsets must be an array [begin, end], got "
                     << (offsets.is_array() ? "an array of " + std::to_string(offsets.size()) : describe(offsets)));
  e.begin = require_u64(offsets[0], UINT64_MAX, t + ": data_offsets[0]", path);
  e.end = require_u64(offsets[1], UINT64_MAX, t + ": data_offsets[1]", path);
  const std::string range = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  MAMBARL_CHECK(e.begin <= e.end,
                path << ": " << t << ": data_offsets " << range << " end before they begin");
  // Offsets that point past the end are what a file cut short looks like.
  MAMBARL_USER_CHECK(e.end <= data_size, path << " is truncated: " << t << ": data_offsets " << range
                                              << " run past the data section (" << data_size << " bytes)");

  const std::optional<uint64_t> nbytes = checked_nbytes(e.record.shape, e.record.dtype);
  MAMBARL_CHECK(nbytes, path << ": " << t << ": shape " << shape_str(e.record.shape) << " of "
                             << dtype_name(e.record.dtype) << " overflows 64 bits of bytes");
  MAMBARL_CHECK(*nbytes == e.end - e.begin, path << ": " << t << ": shape " << shape_str(e.record.shape)
                                                 << " of " << dtype_name(e.record.dtype) << " needs "
                                                 << *nbytes << " bytes but data_offsets " << range << " span "
                                                 << e.end - e.begin);
  return e;
}

// The tensors must tile [0, data_size) exactly. Header order need not be data order
// (the reference reader sorts by offsets too), so check in offset order.
void check_tiling(const std::vector<TensorEntry>& entries, uint64_t data_size, const std::string& path) {
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(entries[a].begin, entries[a].end) <
           std::make_pair(entries[b].begin, entries[b].end);
  });
  uint64_t covered = 0;
  const TensorEntry* prev = nullptr;
  for (size_t i : order) {
    const TensorEntry& e = entries[i];
    MAMBARL_CHECK(e.begin >= covered, path << ": tensor " << json_quote(e.record.name) << " [" << e.begin
                                           << ", " << e.end << "] overlaps tensor "
                                           << json_quote(prev->record.name) << " [" << prev->begin << ", "
                                           << prev->end << "]");
    MAMBARL_CHECK(e.begin == covered, path << ": hole in the data section: bytes [" << covered << ", "
                                           << e.begin << ") belong to no tensor (next is "
                                           << json_quote(e.record.name) << ")");
    covered = e.end;
    prev = &e;
  }
  MAMBARL_CHECK(covered == data_size, path << ": the data section has " << data_size
                                           << " bytes but the tensors cover only the first " << covered);
}

// ---- records -> header ------------------------------------------------------------

// The root object is written member by member, "__metadata__" (its keys sorted,
// as std::map holds them) and then the tensors in the caller's order: a
// nlohmann::json object would sort them, and an ordered_json one looks each new
// key up by a linear scan, O(n^2) over a header of n tensors.
std::string build_header(const SafetensorsFile& file, const std::string& path) {
  std::string header = "{";
  if (!file.metadata.empty())
    header += "\"__metadata__\":" + dump_json(json(file.metadata), path + ": __metadata__");
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const TensorRecord& r = file.tensors[i];
    const std::string key = dump_json(r.name, path + ": the name of tensor #" + std::to_string(i));
    const std::string t = "tensor " + key;
    MAMBARL_CHECK(r.name != "__metadata__", path << ": \"__metadata__\" is reserved, not a tensor name");
    MAMBARL_CHECK(names.insert(r.name).second, path << ": duplicate " << t);
    for (int64_t d : r.shape)
      MAMBARL_CHECK(d >= 0, path << ": " << t << ": negative dimension in shape " << shape_str(r.shape));
    const std::optional<uint64_t> nbytes = checked_nbytes(r.shape, r.dtype);
    MAMBARL_CHECK(nbytes && *nbytes == r.bytes.size(),
                  path << ": " << t << " holds " << r.bytes.size() << " bytes but shape "
                       << shape_str(r.shape) << " of " << dtype_name(r.dtype) << " needs "
                       << (nbytes ? std::to_string(*nbytes) : std::string("more than 2^64")));
    nlohmann::ordered_json entry;  // the fields in the reference writer's order
    entry["dtype"] = dtype_name(r.dtype);
    entry["shape"] = r.shape;
    entry["data_offsets"] = {offset, offset + *nbytes};
    offset += *nbytes;
    header += (i > 0 || !file.metadata.empty() ? "," : "") + key + ":" + entry.dump();
  }
  header += "}";
  // Spaces are JSON whitespace; padding N to a multiple of 8 starts the data 8-aligned
  // (what the reference writer does), so a reader may map tensors in place.
  header.append((8 - header.size() % 8) % 8, ' ');
  MAMBARL_CHECK(header.size() <= kMaxHeaderBytes, path << ": header of " << header.size()
                                                       << " bytes exceeds the " << kMaxHeaderBytes
                                                       << " limit");
  // Never write what read_safetensors would refuse (e.g. past JsonLimits::max_values,
  // ~30k tensors): re-parsing a header of a few KB costs nothing next to the data.
  parse_json(header, path + ": refusing to write a header the reader would reject: header JSON");
  return header;
}

}  // namespace

// ---- public API -------------------------------------------------------------------

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64: return 8;
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::I32: return 4;
    case DType::U8: return 1;
  }
  MAMBARL_FAIL("invalid DType " << static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::U8: return "U8";
  }
  MAMBARL_FAIL("invalid DType " << static_cast<int>(dtype));
}

size_t shape_numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) {
    MAMBARL_CHECK(d >= 0, "shape " << shape_str(shape) << " has a negative dimension");
    MAMBARL_CHECK(!__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n),
                  "shape " << shape_str(shape) << " has more elements than fit in size_t");
  }
  return n;
}

const TensorRecord* SafetensorsFile::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorRecord& SafetensorsFile::at(const std::string& name) const {
  if (const TensorRecord* t = find(name)) return *t;
  constexpr size_t kListed = 8;
  std::ostringstream os;
  for (size_t i = 0; i < std::min(tensors.size(), kListed); ++i) os << (i ? ", " : "") << tensors[i].name;
  if (tensors.size() > kListed) os << ", ... (" << tensors.size() - kListed << " more)";
  MAMBARL_FAIL((source.empty() ? "" : source + ": ")
               << "no tensor '" << name << "'; it has " << tensors.size() << " tensors: " << os.str());
}

TensorRecord make_tensor_bytes(std::string name, DType dtype, std::vector<int64_t> shape, const void* bytes,
                               size_t nbytes) {
  const size_t numel = shape_numel(shape);
  size_t expected = 0;
  MAMBARL_CHECK(!__builtin_mul_overflow(numel, dtype_size(dtype), &expected) && expected == nbytes,
                "tensor '" << name << "': shape " << shape_str(shape) << " of " << dtype_name(dtype)
                           << " does not take " << nbytes << " bytes");
  TensorRecord t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  const auto* p = static_cast<const uint8_t*>(bytes);
  t.bytes.assign(p, p + nbytes);
  return t;
}

void check_tensor_matches(const TensorRecord& t, DType expected, size_t n) {
  MAMBARL_CHECK(t.dtype == expected && t.numel() == n,
                "tensor '" << t.name << "' is " << dtype_name(t.dtype) << " " << shape_str(t.shape) << " ("
                           << t.numel() << " elements), expected " << dtype_name(expected) << " with " << n
                           << " elements");
  MAMBARL_CHECK(t.bytes.size() == n * dtype_size(expected),
                "tensor '" << t.name << "' holds " << t.bytes.size() << " bytes, expected "
                           << n * dtype_size(expected));
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  // Everything that can be checked is checked before the filesystem is touched.
  const std::string header = build_header(file, path);
  write_file_atomically(path, [&](int fd) {
    const uint64_t n = header.size();
    uint8_t len[8];
    std::memcpy(len, &n, 8);  // little-endian host (static_assert in the header)
    write_all(fd, len, sizeof len, path);
    write_all(fd, header.data(), header.size(), path);
    for (const TensorRecord& t : file.tensors) write_all(fd, t.bytes.data(), t.bytes.size(), path);
  });
}

SafetensorsFile read_safetensors(const std::string& path) {
  // O_NONBLOCK so that a FIFO at `path` is refused below instead of blocking open();
  // reads of a regular file ignore the flag.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  MAMBARL_USER_CHECK(fd.ok(), path << ": cannot open: " << errno_message());
  struct stat st {};
  MAMBARL_CHECK(::fstat(fd.get(), &st) == 0, path << ": cannot stat: " << errno_message());
  MAMBARL_USER_CHECK(!S_ISDIR(st.st_mode), path << " is a directory, not a safetensors checkpoint");
  MAMBARL_USER_CHECK(S_ISREG(st.st_mode), path << ": not a regular file");
  const auto file_size = static_cast<uint64_t>(st.st_size);

  // The first errors a user meets are a file that is not a checkpoint at all
  // (`mambarl eval config.yaml`) and one cut short by a full disk or an
  // interrupted copy; they are told apart by whether the header would begin
  // with the '{' of a JSON object.
  MAMBARL_USER_CHECK(file_size > 0, path << " is empty, not a safetensors checkpoint");
  MAMBARL_USER_CHECK(file_size >= 8, path << " is truncated or not a safetensors checkpoint: it has "
                                          << file_size << " bytes, fewer than the 8 of the header length");
  uint8_t len[8];
  read_exact(fd.get(), 0, len, sizeof len, path);
  uint64_t n = 0;
  std::memcpy(&n, len, 8);  // little-endian host (static_assert in the header)
  char first = '{';  // a file that ends after the length field has its header cut off
  if (file_size > 8) read_exact(fd.get(), 8, &first, 1, path);
  MAMBARL_USER_CHECK(n <= kMaxHeaderBytes && first == '{',
                     path << " is not a safetensors checkpoint (its first 8 bytes give a header length of "
                          << n << " bytes" << (n > kMaxHeaderBytes ? ", above the limit of 100 MiB" : "")
                          << (first != '{' ? ", and the header does not start with '{'" : "") << ")");
  MAMBARL_USER_CHECK(n <= file_size - 8, path << " is truncated: its header says " << n
                                              << " bytes, the file has " << file_size - 8
                                              << " after the 8-byte length");
  MAMBARL_CHECK(n > 0, path << ": header is empty, expected a JSON object");

  std::string header(n, '\0');
  read_exact(fd.get(), 8, header.data(), header.size(), path);
  std::vector<std::string> keys;  // the root's keys in header order, which is the tensors' order
  const json root = parse_json(header, path + ": header JSON", {}, &keys);  // UTF-8 checked here

  const uint64_t data_start = 8 + n;
  const uint64_t data_size = file_size - data_start;
  SafetensorsFile out;
  out.source = path;
  std::vector<TensorEntry> entries;
  for (const std::string& key : keys) {
    const json& value = root.at(key);
    if (key == "__metadata__") {
      MAMBARL_CHECK(value.is_object(), path << ": __metadata__ is " << describe(value) << ", expected an object");
      for (const auto& [k, v] : value.items()) {
        MAMBARL_CHECK(v.is_string(), path << ": __metadata__ value " << json_quote(k) << " is " << describe(v)
                                          << ", expected a string");
        out.metadata.emplace(k, v.get<std::string>());
      }
    } else {
      entries.push_back(parse_tensor_entry(key, value, data_size, path));
    }
  }
  check_tiling(entries, data_size, path);

  // Only now, with every span inside the real file, is tensor memory allocated.
  out.tensors.reserve(entries.size());
  for (TensorEntry& e : entries) {
    e.record.bytes.resize(e.end - e.begin);
    read_exact(fd.get(), data_start + e.begin, e.record.bytes.data(), e.record.bytes.size(), path);
    out.tensors.push_back(std::move(e.record));
  }
  return out;
}

}  // namespace mambarl
