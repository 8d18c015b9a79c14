// safetensors reader/writer and the strict JSON it is built on.
//
// Format compatibility is evidenced by byte-exact files: the writer must produce
// exactly the bytes the format prescribes (the first vector below is the one the
// reference implementation's own serializer test expects), and the reader must
// accept files laid out the way other writers lay them out. Robustness is
// evidenced by every truncation of a valid file and a table of corrupt headers:
// each must be a mambarl::Error naming the file, never a crash.
#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "kernels/base/check.hpp"
#include "kernels/base/rng.hpp"
#include "policy/io/safetensors.hpp"
#include "policy/io/strict_json.hpp"

namespace fs = std::filesystem;
using namespace mambarl;

namespace {

// A fresh directory per test case, removed afterwards.
struct TempDir {
  fs::path dir;
  TempDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("mambarl_test_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
  // Names of leftover temp files ("<name>.tmp.<pid>").
  std::vector<std::string> temp_files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
    return out;
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in, "cannot open " << path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE_MESSAGE(out.good(), "cannot write " << path);
}

// A string literal with embedded NULs, whole.
template <size_t N> std::string bytes_of(const char (&lit)[N]) { return std::string(lit, N - 1); }

std::string le_u64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

// A safetensors file from a header text and a data section.
std::string file_bytes(const std::string& header, const std::string& data) {
  return le_u64(header.size()) + header + data;
}

// Requires f() to throw a mambarl::Error whose message starts with `prefix` and
// contains `needle`. Any other exception escapes and fails the test case.
// The message of the UserError `f` throws: one with no internal check text.
template <typename F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.find("failed at") == std::string::npos, msg);
    BOOST_TEST(msg.find(".cpp:") == std::string::npos, msg);
    return msg;
  } catch (const Error& e) {
    BOOST_ERROR("an internal Error, not a UserError: " << e.what());
    return e.what();
  }
  BOOST_ERROR("no mambarl::UserError");
  return "";
}

template <typename F> void require_error(F&& f, const std::string& prefix, const std::string& needle) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    BOOST_TEST(msg.rfind(prefix, 0) == 0u, "message does not start with '" << prefix << "': " << msg);
    BOOST_TEST(msg.find(needle) != std::string::npos, "message lacks '" << needle << "': " << msg);
    return;
  }
  BOOST_ERROR("no mambarl::Error (expected one containing '" << needle << "')");
}

// One tensor of every dtype, a scalar and a zero-size one, plus metadata.
SafetensorsFile sample_file() {
  SafetensorsFile f;
  f.metadata["format"] = "pt";
  f.metadata["config"] = "policy:\n  d_model: 64\n  note: \"quoted\\path\"\n";
  f.metadata["unicode"] = "\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80";  // e-acute, check mark, emoji
  const double f64[6] = {0.5, -1.25, 3e300, -0.0, 1e-310, 42};     // (2, 3); 1e-310 is subnormal
  f.tensors.push_back(make_tensor("layers.0.mixer.A_log", {2, 3}, f64));
  const float f32[4] = {1.0f, -2.5f, 3.4e38f, 1e-40f};  // (4)
  f.tensors.push_back(make_tensor("layers.0.mixer.in_proj.weight", {4}, f32));
  const uint8_t f16[6] = {0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b};  // 1, -2, 65504 as IEEE half
  f.tensors.push_back(make_tensor_bytes("half", DType::F16, {3}, f16, sizeof f16));
  const uint8_t bf16[8] = {0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0xbf};  // 1, 2, 3, -1: (2, 2)
  f.tensors.push_back(make_tensor_bytes("brain", DType::BF16, {2, 2}, bf16, sizeof bf16));
  const int64_t step = 1234567890123;  // scalar: shape {}
  f.tensors.push_back(make_tensor("step", {}, &step));
  f.tensors.push_back(make_tensor<int32_t>("empty", {0, 7}, nullptr));
  const int32_t i32[3] = {-7, 0, 2147483647};  // (3)
  f.tensors.push_back(make_tensor("counts", {3}, i32));
  const uint8_t u8[5] = {0, 1, 2, 254, 255};  // (1, 5)
  f.tensors.push_back(make_tensor("mask", {1, 5}, u8));
  return f;
}

void require_same(const SafetensorsFile& a, const SafetensorsFile& b) {
  BOOST_TEST((a.metadata == b.metadata));
  BOOST_REQUIRE_EQUAL(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const TensorRecord& x = a.tensors[i];
    const TensorRecord& y = b.tensors[i];
    BOOST_TEST_CONTEXT("tensor " << i << " " << x.name) {
      BOOST_TEST(x.name == y.name);
      BOOST_TEST((x.dtype == y.dtype));
      BOOST_TEST(x.shape == y.shape, boost::test_tools::per_element());
      BOOST_TEST(x.bytes == y.bytes, boost::test_tools::per_element());
    }
  }
}

}  // namespace

// ================================ safetensors =====================================

BOOST_AUTO_TEST_SUITE(safetensors)

BOOST_AUTO_TEST_CASE(dtype_sizes_and_names) {
  const std::pair<DType, std::pair<size_t, std::string>> table[] = {
      {DType::F64, {8, "F64"}},   {DType::F32, {4, "F32"}}, {DType::F16, {2, "F16"}},
      {DType::BF16, {2, "BF16"}}, {DType::I64, {8, "I64"}}, {DType::I32, {4, "I32"}},
      {DType::U8, {1, "U8"}}};
  for (const auto& [d, expect] : table) {
    BOOST_TEST(dtype_size(d) == expect.first);
    BOOST_TEST(dtype_name(d) == expect.second);
  }
}

BOOST_AUTO_TEST_CASE(round_trip_all_dtypes_shapes_and_metadata) {
  TempDir tmp;
  const std::string path = tmp.file("ckpt.safetensors");
  const SafetensorsFile original = sample_file();
  write_safetensors(path, original);
  const SafetensorsFile back = read_safetensors(path);
  require_same(original, back);
  BOOST_TEST(back.source == path);
  BOOST_TEST(tmp.temp_files().empty());

  // The header length is a multiple of 8, so the data section starts 8-aligned.
  const std::string bytes = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  BOOST_TEST(n % 8 == 0u);
  BOOST_TEST(bytes[8] == '{');

  // Typed views recover the exact values (bitwise: memcpy, no conversion).
  double f64[6];  // (2, 3)
  copy_to(back.at("layers.0.mixer.A_log"), f64, 6);
  BOOST_TEST(f64[2] == 3e300);
  BOOST_TEST(f64[4] == 1e-310);
  BOOST_TEST(std::signbit(f64[3]));
  float f32[4];  // (4)
  copy_to(back.at("layers.0.mixer.in_proj.weight"), f32, 4);
  BOOST_TEST(f32[1] == -2.5f);
  BOOST_TEST(f32[3] == 1e-40f);
  int64_t step = 0;
  copy_to(back.at("step"), &step, 1);
  BOOST_TEST(step == 1234567890123);
  BOOST_TEST(back.at("empty").numel() == 0u);
  BOOST_TEST(back.at("step").numel() == 1u);

  // Overwriting an existing checkpoint replaces it.
  SafetensorsFile smaller;
  const float one = 1.0f;
  smaller.tensors.push_back(make_tensor("x", {1}, &one));
  write_safetensors(path, smaller);
  require_same(smaller, read_safetensors(path));
}

// The reference serializer's own test vector: one F32 tensor "attn.0" of shape (1, 2, 3)
// holding 0..5. Its 64-byte header needs no padding.
BOOST_AUTO_TEST_CASE(bytes_match_the_format_exactly) {
  TempDir tmp;
  const std::string path = tmp.file("attn.safetensors");
  const float v[6] = {0, 1, 2, 3, 4, 5};  // (1, 2, 3)
  SafetensorsFile f;
  f.tensors.push_back(make_tensor("attn.0", {1, 2, 3}, v));
  write_safetensors(path, f);
  const std::string expected = bytes_of("\x40\0\0\0\0\0\0\0") +  // N = 64, u64 little-endian
                               R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})" +
                               bytes_of(
                                   "\0\0\0\0"
                                   "\0\0\x80\x3f"
                                   "\0\0\0\x40"
                                   "\0\0\x40\x40"
                                   "\0\0\x80\x40"
                                   "\0\0\xa0\x40");
  BOOST_TEST(slurp(path) == expected);

  // Metadata first, a key that needs escaping, tensors in the caller's order laid out
  // back to back, and one space of padding to bring N from 143 to 144.
  SafetensorsFile g;
  g.metadata["format"] = "pt";
  const int64_t i64[2] = {1, -1};   // (2)
  const uint8_t u8[3] = {1, 2, 3};  // (3)
  g.tensors.push_back(make_tensor("a\"b", {2}, i64));
  g.tensors.push_back(make_tensor("u", {3}, u8));
  write_safetensors(path, g);
  const std::string expected_g =
      bytes_of("\x90\0\0\0\0\0\0\0") +  // N = 144
      R"({"__metadata__":{"format":"pt"},"a\"b":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},)"
      R"("u":{"dtype":"U8","shape":[3],"data_offsets":[16,19]}} )" +
      bytes_of(
          "\x01\0\0\0\0\0\0\0"
          "\xff\xff\xff\xff\xff\xff\xff\xff"
          "\x01\x02\x03");
  BOOST_TEST(slurp(path) == expected_g);

  // No tensors, no metadata: "{}" padded to 8.
  write_safetensors(path, SafetensorsFile{});
  BOOST_TEST(slurp(path) == bytes_of("\x08\0\0\0\0\0\0\0{}      "));
  BOOST_TEST(read_safetensors(path).tensors.empty());
}

// Other writers: header keys in any order (older reference versions sorted by name,
// not by offset), whitespace inside the JSON, no padding.
BOOST_AUTO_TEST_CASE(reads_files_laid_out_by_other_writers) {
  TempDir tmp;
  const std::string path = tmp.file("other.safetensors");
  const std::string header =
      "{ \"b\": {\"shape\": [1], \"dtype\": \"I32\", \"data_offsets\": [4, 8]},\n"
      "  \"a\": {\"data_offsets\": [0, 4], \"dtype\": \"I32\", \"shape\": []},\n"
      "  \"z\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [8, 8]} }";
  spit(path, file_bytes(header, bytes_of("\x07\0\0\0"
                                         "\x09\0\0\0")));
  const SafetensorsFile f = read_safetensors(path);
  BOOST_REQUIRE_EQUAL(f.tensors.size(), 3u);
  BOOST_TEST(f.tensors[0].name == "b");  // header order is kept
  int32_t a = 0, b = 0;
  copy_to(f.at("a"), &a, 1);
  copy_to(f.at("b"), &b, 1);
  BOOST_TEST(a == 7);
  BOOST_TEST(b == 9);
  BOOST_TEST(f.at("z").bytes.empty());
}

// A checkpoint cut short (a full disk, an interrupted copy) is what a user
// meets most: every cut says so, naming the file, without internal check text.
BOOST_AUTO_TEST_CASE(every_truncation_is_an_error_naming_the_file) {
  TempDir tmp;
  const std::string good = tmp.file("good.safetensors");
  write_safetensors(good, sample_file());
  const std::string bytes = slurp(good);
  const std::string cut = tmp.file("cut.safetensors");
  for (size_t len = 0; len < bytes.size(); ++len) {
    BOOST_TEST_CONTEXT("prefix of " << len << " of " << bytes.size() << " bytes") {
      spit(cut, bytes.substr(0, len));
      const std::string msg = user_error_of([&] { read_safetensors(cut); });
      const std::string expect = len == 0  ? cut + " is empty, not a safetensors checkpoint"
                                 : len < 8 ? cut + " is truncated or not a safetensors checkpoint: it has " +
                                                 std::to_string(len) +
                                                 " bytes, fewer than the 8 of the header length"
                                           : cut + " is truncated: ";
      BOOST_TEST(msg.rfind(expect, 0) == 0u, msg);
    }
  }
}

// What a user who runs `mambarl eval config.yaml` or points at a directory sees.
BOOST_AUTO_TEST_CASE(a_file_that_is_no_checkpoint_gets_a_plain_message) {
  TempDir tmp;
  const std::string yaml = tmp.file("config.yaml");
  spit(yaml, "env: {type: cartpole}\npolicy: {type: mamba1}\n");
  BOOST_TEST(user_error_of([&] { read_safetensors(yaml); }) ==
             yaml + " is not a safetensors checkpoint (its first 8 bytes give a header length of " +
                 std::to_string(8751755354237726309ULL) +
                 " bytes, above the limit of 100 MiB, and the header does not start with '{')");
  BOOST_TEST(user_error_of([&] { read_safetensors(tmp.dir.string()); }) ==
             tmp.dir.string() + " is a directory, not a safetensors checkpoint");
  BOOST_TEST(user_error_of([&] { read_safetensors(tmp.file("absent.safetensors")); }) ==
             tmp.file("absent.safetensors") + ": cannot open: No such file or directory");
}

BOOST_AUTO_TEST_CASE(corrupt_headers_are_errors_naming_the_file) {
  struct Case {
    const char* what;
    std::string file;    // whole file bytes
    const char* needle;  // expected in the message
  };
  // A header with one F32 tensor "w" whose entry is `entry`, over `data`.
  auto w = [](const std::string& entry, const std::string& data) {
    return file_bytes("{\"w\":" + entry + "}", data);
  };
  const std::string four(4, '\x11'), eight(8, '\x22'), twelve(12, '\x33');
  std::string deep = "{\"__metadata__\":";  // 70 nested arrays: past the 64-level limit
  deep += std::string(70, '[') + std::string(70, ']') + "}";
  const Case cases[] = {
      {"shorter than the length field", bytes_of("\x05\0\0"),
       " is truncated or not a safetensors checkpoint: it has 3 bytes"},
      {"header longer than the file", le_u64(1234) + "{" + std::string(199, ' '),
       " is truncated: its header says 1234 bytes, the file has 200 after the 8-byte length"},
      {"not JSON, longer than the file", le_u64(1234) + std::string(200, ' '),
       " is not a safetensors checkpoint (its first 8 bytes give a header length of 1234 bytes, and the "
       "header "
       "does not start with '{')"},
      {"header above 100 MiB", le_u64(uint64_t{200} << 20) + "{}", "above the limit of 100 MiB)"},
      {"header length near 2^64", le_u64(UINT64_MAX) + "{}", "above the limit of 100 MiB)"},
      {"empty header", le_u64(0), "header is empty"},
      {"header not an object", file_bytes("[1]     ", ""), "does not start with '{'"},
      {"leading whitespace", file_bytes(" {}", ""), "does not start with '{'"},
      {"invalid UTF-8 in a name", file_bytes("{\"\xff\":1}", ""), "ill-formed UTF-8"},
      {"overlong UTF-8 in metadata", file_bytes("{\"__metadata__\":{\"k\":\"\xc0\xaf\"}}", ""),
       "ill-formed UTF-8"},
      {"invalid JSON", file_bytes("{\"w\":}", ""), "column 6: syntax error while parsing value - unexpected '}'"},
      {"trailing comma", file_bytes("{\"__metadata__\":{},}", ""), "expected string literal"},
      {"NUL padding", file_bytes(bytes_of("{}\0\0\0\0\0\0"), ""), "a NUL byte at byte 2"},
      {"nesting too deep", file_bytes(deep, ""), "nesting deeper than 64"},
      {"duplicate tensor name",
       file_bytes("{\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                  "\"w\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                  eight),
       "duplicate key \"w\""},
      {"duplicate __metadata__", file_bytes("{\"__metadata__\":{},\"__metadata__\":{}}", ""),
       "duplicate key"},
      {"metadata value not a string", file_bytes("{\"__metadata__\":{\"step\":5}}", ""),
       "__metadata__ value \"step\" is 5, expected a string"},
      {"metadata not an object", file_bytes("{\"__metadata__\":[\"a\"]}", ""),
       "__metadata__ is an array, expected an object"},
      {"tensor entry not an object", w("[0,4]", four), "tensor \"w\" is an array, expected an object"},
      {"missing dtype", w("{\"shape\":[1],\"data_offsets\":[0,4]}", four), "missing field \"dtype\""},
      {"missing shape", w("{\"dtype\":\"F32\",\"data_offsets\":[0,4]}", four), "missing field \"shape\""},
      {"missing data_offsets", w("{\"dtype\":\"F32\",\"shape\":[1]}", four),
       "missing field \"data_offsets\""},
      {"extra field", w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"strides\":[1]}", four),
       "unknown field \"strides\""},
      {"unknown dtype", w("{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}", four),
       "unknown or unsupported dtype \"Q4\""},
      {"dtype not a string", w("{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}", four),
       "dtype is 4, expected a string"},
      {"shape not an array", w("{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}", four),
       "shape is 1, expected an array"},
      {"negative shape entry", w("{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}", four),
       "shape[0] is -1, expected a non-negative integer"},
      {"fractional shape entry", w("{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}", four),
       "shape[0] is 1.5"},
      {"integral but not an integer literal",
       w("{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}", four), "shape[0] is 1.0"},
      {"string shape entry", w("{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}", four),
       "shape[0] is a string"},
      {"shape entry above int64",
       w("{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}", four),
       "of at most 9223372036854775807"},
      {"shape product overflows",
       w("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}", four),
       "overflows 64 bits"},
      {"shape disagrees with the span", w("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}", four),
       "needs 8 bytes but data_offsets [0, 4] span 4"},
      {"data_offsets not a pair", w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}", four),
       "data_offsets must be an array [begin, end], got an array of 1"},
      {"negative offset", w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}", four),
       "data_offsets[0] is -4"},
      {"offset above 2^64",
       w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}", four),
       "data_offsets[1] is 1.8446744073709552e+19"},  // above 64 bits: read as floating point
      {"offsets reversed", w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}", four),
       "end before they begin"},
      {"offsets past the data", w("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", four),
       " is truncated: tensor \"w\": data_offsets [0, 8] run past the data section (4 bytes)"},
      {"overlapping tensors",
       file_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                  twelve),
       "tensor \"b\" [4, 12] overlaps tensor \"a\" [0, 8]"},
      {"hole between tensors",
       file_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                  twelve),
       "bytes [4, 8) belong to no tensor"},
      {"hole at the start", w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}", eight),
       "bytes [0, 4) belong to no tensor"},
      {"bytes after the last tensor", w("{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", eight),
       "the data section has 8 bytes but the tensors cover only the first 4"},
      {"data but no tensors", file_bytes("{}", four), "cover only the first 0"},
  };
  TempDir tmp;
  const std::string path = tmp.file("corrupt.safetensors");
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      spit(path, c.file);
      require_error([&] { read_safetensors(path); }, path, c.needle);
    }
  }
  const std::string fifo = tmp.file("fifo");  // must be refused, not block in open()
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  require_error([&] { read_safetensors(fifo); }, fifo + ": ", "not a regular file");
}

// Seeded random corruption of the length field and header: each result is either a
// clean Error starting with the file's path or a file that is valid in every respect (it rewrites
// and rereads to the same records).
BOOST_AUTO_TEST_CASE(random_header_corruption_is_an_error_or_a_valid_file) {
  TempDir tmp;
  const std::string good = tmp.file("good.safetensors");
  write_safetensors(good, sample_file());
  const std::string bytes = slurp(good);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string path = tmp.file("fuzz.safetensors");
  const std::string again = tmp.file("again.safetensors");
  static const char kJsonish[] = "0123456789-+.eE,:[]{}\" \\u\t";  // bytes likeliest to make new structure
  Rng rng(20240607);
  int accepted = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string mutated = bytes;
    const uint32_t edits = 1 + rng.below(3);
    for (uint32_t k = 0; k < edits; ++k) {
      const size_t at = rng.below(static_cast<uint32_t>(8 + n));
      mutated[at] =
          rng.below(2) ? kJsonish[rng.below(sizeof kJsonish - 1)] : static_cast<char>(rng.below(256));
    }
    spit(path, mutated);
    BOOST_TEST_CONTEXT("iteration " << iter) {
      try {
        const SafetensorsFile f = read_safetensors(path);
        ++accepted;
        write_safetensors(again, f);
        require_same(f, read_safetensors(again));
      } catch (const Error& e) {
        // "<path>: ..." or, for what a user meets first, "<path> is truncated: ..."
        const std::string w = e.what();
        BOOST_TEST((w.rfind(path + ": ", 0) == 0u || w.rfind(path + " is ", 0) == 0u), w);
      }
    }
  }
  BOOST_TEST_MESSAGE("random corruption: " << accepted << " of 1500 mutated files were still valid");
}

BOOST_AUTO_TEST_CASE(write_into_a_missing_directory_fails_cleanly) {
  TempDir tmp;
  const std::string path = tmp.file("no/such/dir/ckpt.safetensors");
  require_error([&] { write_safetensors(path, sample_file()); }, path + ": ", "cannot create temp file");
  BOOST_TEST(!fs::exists(tmp.dir / "no"));
}

BOOST_AUTO_TEST_CASE(invalid_records_are_refused_before_touching_the_disk) {
  TempDir tmp;
  const std::string path = tmp.file("ckpt.safetensors");
  write_safetensors(path, sample_file());
  const std::string before = slurp(path);

  auto broken = [](auto&& mutate) {
    SafetensorsFile f = sample_file();
    mutate(f);
    return f;
  };
  const std::pair<SafetensorsFile, const char*> cases[] = {
      {broken([](SafetensorsFile& f) { f.tensors[1].bytes.pop_back(); }),
       "holds 15 bytes but shape [4] of F32 needs 16"},
      {broken([](SafetensorsFile& f) { f.tensors[1].shape = {-4}; }), "negative dimension"},
      {broken([](SafetensorsFile& f) { f.tensors[2].name = f.tensors[0].name; }), "duplicate tensor"},
      {broken([](SafetensorsFile& f) { f.tensors[0].name = "__metadata__"; }), "reserved"},
      {broken([](SafetensorsFile& f) { f.tensors[0].name = "bad\xff"; }), "not valid UTF-8"},
      {broken([](SafetensorsFile& f) { f.metadata["k"] = "\xed\xa0\x80"; }),
       "not valid UTF-8"},  // a surrogate
      // 50k scalars take 6 JSON values each: 300k, past the 2^18 read_safetensors accepts.
      {broken([](SafetensorsFile& f) {
         const uint8_t zero = 0;
         for (int i = 0; i < 50000; ++i) f.tensors.push_back(make_tensor("t" + std::to_string(i), {}, &zero));
       }),
       "the reader would reject: header JSON: more than 262144 values"},
  };
  for (const auto& [file, needle] : cases) {
    BOOST_TEST_CONTEXT(needle) {
      require_error([&] { write_safetensors(path, file); }, path + ": ", needle);
      BOOST_TEST(slurp(path) == before);
      BOOST_TEST(tmp.temp_files().empty());
    }
  }
}

// A real I/O failure part-way through the file: RLIMIT_FSIZE makes write() fail with
// EFBIG past byte 200 (inside the header), which works even as root (a read-only
// directory would not stop root).
BOOST_AUTO_TEST_CASE(failed_write_leaves_the_old_file_and_no_temp_file) {
  TempDir tmp;
  const std::string path = tmp.file("ckpt.safetensors");
  SafetensorsFile old_file;
  const float x[2] = {1, 2};  // (2)
  old_file.tensors.push_back(make_tensor("x", {2}, x));
  write_safetensors(path, old_file);
  const std::string before = slurp(path);
  BOOST_REQUIRE_LT(before.size(), 200u);

  rlimit saved{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  rlimit small = saved;
  small.rlim_cur = 200;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
  BOOST_REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  bool threw = false;
  std::string msg;
  try {
    write_safetensors(path, sample_file());  // ~600 bytes
  } catch (const Error& e) {
    threw = true;
    msg = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);

  BOOST_TEST(threw);
  BOOST_TEST(msg.rfind(path + ": ", 0) == 0u, msg);
  BOOST_TEST(msg.find("write failed") != std::string::npos, msg);
  BOOST_TEST(slurp(path) == before);
  BOOST_TEST(tmp.temp_files().empty());
  require_same(old_file, read_safetensors(path));
}

// The rename is the last step that can fail: with a directory in the way, the fully
// written and synced temp file must still be removed.
BOOST_AUTO_TEST_CASE(failed_rename_removes_the_temp_file) {
  TempDir tmp;
  const std::string path = tmp.file("in_the_way");
  fs::create_directories(fs::path(path) / "child");
  require_error([&] { write_safetensors(path, sample_file()); }, path + ": ", "cannot rename");
  BOOST_TEST(fs::is_directory(fs::path(path) / "child"));
  BOOST_TEST(tmp.temp_files().empty());
}

BOOST_AUTO_TEST_CASE(typed_access_checks_dtype_and_count) {
  TempDir tmp;
  const std::string path = tmp.file("ckpt.safetensors");
  write_safetensors(path, sample_file());
  const SafetensorsFile f = read_safetensors(path);

  float buf[8];  // larger than any tensor used below
  require_error([&] { copy_to(f.at("layers.0.mixer.A_log"), buf, 6); },
                "tensor 'layers.0.mixer.A_log' is F64 [2, 3]", "expected F32 with 6 elements");
  require_error([&] { copy_to(f.at("layers.0.mixer.in_proj.weight"), buf, 5); },
                "tensor 'layers.0.mixer.in_proj.weight' is F32 [4] (4 elements)",
                "expected F32 with 5 elements");
  require_error([&] { f.at("layers.9.mixer.A_log"); }, path + ": no tensor 'layers.9.mixer.A_log'",
                "8 tensors: layers.0.mixer.A_log, layers.0.mixer.in_proj.weight, half");
  BOOST_TEST(f.find("nope") == nullptr);
  BOOST_TEST(f.find("half") == &f.tensors[2]);

  const uint8_t three[3] = {1, 2, 3};
  require_error([&] { make_tensor_bytes("h", DType::F16, {2}, three, 3); }, "tensor 'h': shape [2] of F16",
                "does not take 3 bytes");
  require_error([&] { make_tensor<float>("n", {-1}, nullptr); }, "shape [-1]", "negative dimension");
  require_error(
      [&] {
        make_tensor<float>("n", {int64_t{1} << 62, int64_t{1} << 62}, nullptr);
      },
      "shape [", "more elements than fit");
}

BOOST_AUTO_TEST_SUITE_END()

// =================================== JSON =========================================
// nlohmann::json does the parsing; these cases pin what parse_json adds to it
// (the limits, duplicate keys, NUL bytes, root key order, plain messages) and
// the bytes dump_json writes, which are part of the file format.

BOOST_AUTO_TEST_SUITE(json)

using nlohmann::json;

json parse(const std::string& text, const JsonLimits& limits = {}) { return parse_json(text, "t", limits); }

void require_parse_error(const std::string& text, const std::string& needle, const JsonLimits& limits = {}) {
  BOOST_TEST_CONTEXT("text: " << text) {
    const std::string msg = user_error_of([&] { parse(text, limits); });
    BOOST_TEST(msg.rfind("t: ", 0) == 0u, msg);
    BOOST_TEST(msg.find(needle) != std::string::npos, msg);
    BOOST_TEST(msg.find("json.exception") == std::string::npos, msg);
  }
}

BOOST_AUTO_TEST_CASE(syntax_errors_say_where_without_the_library_tag) {
  require_parse_error("{\"w\":}", "parse error at line 1, column 6: syntax error while parsing value - unexpected '}'");
  require_parse_error("{\"a\":1,}", "expected string literal");
  require_parse_error("[1] [2]", "expected end of input");
  require_parse_error("01", "expected end of input");
  require_parse_error("// c\n1", "invalid literal");
  require_parse_error("NaN", "invalid literal");
  require_parse_error("\"a\nb\"", "control character U+000A (LF) must be escaped");
  require_parse_error(R"("\ud83d")", "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF");
  require_parse_error("", "unexpected end of input");
  // nlohmann would stop at the NUL as at the end of the text.
  require_parse_error(bytes_of("{}\0\0"), "a NUL byte at byte 2");
}

BOOST_AUTO_TEST_CASE(ill_formed_utf8_is_refused) {
  const std::string ok = "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xed\x9f\xbf";  // up to U+10FFFF, U+D7FF
  BOOST_TEST(parse("\"" + ok + "\"").get<std::string>() == ok);
  // Overlong forms, surrogates, above U+10FFFF, cut short, stray continuation bytes.
  const char* bad[] = {
      "\xc0\xaf",         "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80",
      "\xf5\x80\x80\x80", "\xe2\x82", "\x80",         "\xfe",         "\xc3\x28"};
  for (const char* b : bad) require_parse_error(std::string("\"") + b + "\"", "ill-formed UTF-8");
}

BOOST_AUTO_TEST_CASE(integers_stay_exact_in_64_bits) {
  const json v = parse("[0, 18446744073709551615, 9007199254740993, 18446744073709551616, -3, -0, 1.0, 1e2]");
  BOOST_TEST(v[1].get<uint64_t>() == UINT64_MAX);           // no trip through double
  BOOST_TEST(v[2].get<uint64_t>() == 9007199254740993u);    // 2^53 + 1
  for (size_t i = 0; i < v.size(); ++i)
    BOOST_TEST_CONTEXT(v[i].dump()) { BOOST_TEST(v[i].is_number_unsigned() == (i < 3)); }
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_refused_at_any_depth) {
  require_parse_error("{\"k\":1, \"j\":2, \"k\":3}", "duplicate key \"k\"");
  require_parse_error("{\"a\":[{\"x\":1,\"x\":1}]}", "duplicate key \"x\"");
  // The same key in sibling objects is no duplicate.
  BOOST_TEST(parse("[{\"x\":1},{\"x\":2,\"y\":{\"x\":3}}]").size() == 2u);
}

BOOST_AUTO_TEST_CASE(root_keys_come_in_document_order) {
  std::vector<std::string> keys;
  const json v = parse_json(" {\"z\" : [1, [], {\"q\":1}], \"a\":\"x\",\n\"m\":null}\r\n\t", "t", {}, &keys);
  BOOST_TEST(keys == (std::vector<std::string>{"z", "a", "m"}), boost::test_tools::per_element());
  BOOST_TEST(v.size() == 3u);
}

BOOST_AUTO_TEST_CASE(nesting_and_size_limits) {
  auto nested = [](size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  BOOST_TEST(parse(nested(64)).size() == 1u);
  require_parse_error(nested(65), "nesting deeper than 64 levels");
  // Far past the limit: an error as soon as the limit is passed.
  require_parse_error(std::string(1000000, '['), "nesting deeper than 64");
  require_parse_error("{\"a\":" + nested(64) + "}", "nesting deeper than 64");

  JsonLimits tight;
  tight.max_depth = 2;
  tight.max_values = 3;
  BOOST_TEST(parse("[[]]", tight).size() == 1u);
  require_parse_error("[[[]]]", "nesting deeper than 2 levels", tight);
  BOOST_TEST(parse("[1,2]", tight).size() == 2u);  // 3 values: the array and two numbers
  require_parse_error("[1,2,3]", "more than 3 values", tight);
  require_parse_error("{\"a\":{},\"b\":1,\"c\":2}", "more than 3 values", tight);
}

BOOST_AUTO_TEST_CASE(writer_is_compact_and_escapes_minimally) {
  nlohmann::ordered_json obj;
  obj["k"] = "a\"\\/\n\t\x01\x1f\x7f\xc3\xa9";
  obj["n"] = {uint64_t{0}, UINT64_MAX};
  obj["e"] = json::object();
  // Only '"', '\\' and C0 controls are escaped (lowercase hex, as serde_json);
  // '/', DEL and non-ASCII pass through.
  const std::string k = "\"a\\\"\\\\/\\n\\t\\u0001\\u001f\x7f\xc3\xa9\"";
  const std::string expected = "{\"k\":" + k + ",\"n\":[0,18446744073709551615],\"e\":{}}";
  BOOST_TEST(obj.dump() == expected);
  // A json object (not ordered_json) writes its keys sorted.
  BOOST_TEST(dump_json(parse(expected), "t") == "{\"e\":{},\"k\":" + k + ",\"n\":[0,18446744073709551615]}");
  BOOST_TEST(json_quote("") == "\"\"");
  BOOST_TEST(json_quote("a\xff") == "\"a\xef\xbf\xbd\"");  // U+FFFD: a message never fails
  require_error([] { dump_json(json("bad\xff"), "w"); }, "w: not valid UTF-8", "");
}

BOOST_AUTO_TEST_CASE(string_maps_name_the_bad_member) {
  BOOST_TEST((parse_string_map("{\"a\":\"1\",\"b\":\"\"}", "m") ==
              std::map<std::string, std::string>{{"a", "1"}, {"b", ""}}));
  require_error([] { parse_string_map("[\"a\"]", "m"); }, "m is an array, expected an object", "");
  require_error([] { parse_string_map("{\"a\":5}", "m"); }, "m 'a' is a number, expected a string", "");
  require_error([] { parse_string_map("{\"a\":\"1\",\"a\":\"2\"}", "m"); }, "m: duplicate key \"a\"", "");
}

BOOST_AUTO_TEST_SUITE_END()
