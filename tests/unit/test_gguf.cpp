// GGUF reader and writer: every value type round-trips, tensors are used in place, and each
// kind of malformed file is refused with an error that names the file and the problem.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <functional>

#include "engine/format/gguf.hpp"
#include "engine/format/gguf_writer.hpp"
#include "engine/util/error.hpp"
#include "engine/util/mapped_file.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

using test::GgufBytes;
using test::TempDir;
using test::write_bytes;

TEST(GgmlTypes, SizesFollowGgmlBlockLayouts) {
  struct Expected { uint32_t type; const char* name; int64_t block, bytes; };
  for (auto e : {Expected{0, "F32", 1, 4}, {1, "F16", 1, 2}, {2, "Q4_0", 32, 18}, {3, "Q4_1", 32, 20},
                 {6, "Q5_0", 32, 22}, {7, "Q5_1", 32, 24}, {8, "Q8_0", 32, 34}, {9, "Q8_1", 32, 36},
                 {10, "Q2_K", 256, 84}, {12, "Q4_K", 256, 144}, {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292},
                 {20, "IQ4_NL", 32, 18}, {23, "IQ4_XS", 256, 136}, {29, "IQ1_M", 256, 56}, {30, "BF16", 1, 2},
                 {34, "TQ1_0", 256, 54}, {35, "TQ2_0", 256, 66}, {39, "MXFP4", 32, 17}}) {
    auto traits = ggml_type_traits(e.type);
    ASSERT_TRUE(traits) << e.name;
    EXPECT_EQ(traits->name, e.name);
    EXPECT_EQ(traits->block_elements, e.block) << e.name;
    EXPECT_EQ(traits->block_bytes, e.bytes) << e.name;
  }
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u}) {
    EXPECT_FALSE(ggml_type_traits(removed));
    EXPECT_NE(std::string(ggml_type_rejection(removed)).find("removed"), std::string::npos);
  }
  EXPECT_FALSE(ggml_type_traits(40));
  EXPECT_EQ(ggml_type_rejection(40), "unknown to ggml");
}

TEST(GgufWriter, RoundTripsMetadataAndTensorsInPlace) {
  TempDir dir;
  const std::string path = dir.file("roundtrip.gguf");
  std::vector<float> f32_values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  std::vector<uint16_t> f16_values(64, 0x3c00);  // 1.0 in FP16
  {
    GgufWriter writer(path, 64);
    writer.add_u32("test.u32", 42);
    writer.add_f32("test.f32", 0.5f);
    writer.add_bool("test.bool", true);
    writer.add_string("test.string", "héllo");
    writer.add_strings("test.strings", {"a", "", "ccc"});
    const float floats[] = {1.0f, 2.5f};
    writer.add_f32s("test.floats", floats);
    const int32_t ints[] = {-1, 7, 9};
    writer.add_i32s("test.ints", ints);
    writer.add_tensor("a", GgmlType::F32, {3, 2});
    writer.add_tensor("b", GgmlType::F16, {64});
    writer.add_tensor("q", GgmlType::Q8_0, {32, 2});
    writer.write_data({reinterpret_cast<const std::byte*>(f32_values.data()), f32_values.size() * 4});
    // Tensor b arrives in two pieces: the writer must not care how data is chunked.
    writer.write_data({reinterpret_cast<const std::byte*>(f16_values.data()), 40});
    writer.write_data({reinterpret_cast<const std::byte*>(f16_values.data()) + 40, 88});
    std::vector<std::byte> q8(2 * 34, std::byte{7});
    writer.write_data(q8);
    writer.finish();
  }
  GgufFile file(path);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 64u);
  EXPECT_EQ(file.data_offset() % 64, 0u);
  EXPECT_EQ(file.require_uint("test.u32"), 42u);
  EXPECT_EQ(file.require_float("test.f32"), 0.5);
  EXPECT_TRUE(file.bool_or("test.bool", false));
  EXPECT_EQ(file.require_string("test.string"), "héllo");
  const GgufValue& strings = file.require_array("test.strings", GgufValueType::STRING);
  ASSERT_EQ(strings.count, 3u);
  EXPECT_EQ(strings.items[2].string, "ccc");
  EXPECT_EQ(file.require_array("test.floats", GgufValueType::F32).number_at(1), 2.5);
  EXPECT_EQ(file.require_array("test.ints", GgufValueType::I32).integer_at(0), -1);

  ASSERT_EQ(file.tensors().size(), 3u);
  const GgufTensorInfo& a = file.require_tensor("a");
  EXPECT_EQ(a.ne[0], 3);
  EXPECT_EQ(a.ne[1], 2);
  EXPECT_EQ(a.bytes, 24u);
  EXPECT_EQ(std::memcmp(a.data, f32_values.data(), 24), 0);
  const GgufTensorInfo& b = file.require_tensor("b");
  EXPECT_EQ(b.offset % 64, 0u);
  EXPECT_EQ(std::memcmp(b.data, f16_values.data(), 128), 0);
  // In place: the tensors' data pointers are the mapping itself, offsets apart.
  EXPECT_EQ(b.data - a.data, static_cast<std::ptrdiff_t>(b.offset - a.offset));
  EXPECT_EQ(file.require_tensor("q").bytes, 68u);
}

// Reads one byte of every 4 KiB page, so that the whole mapping is faulted in.
std::byte touch_every_page(std::span<const std::byte> bytes) {
  std::byte seen{};
  for (std::size_t i = 0; i < bytes.size(); i += 4096) seen |= *static_cast<const volatile std::byte*>(&bytes[i]);
  return seen;
}

// What share of a file, mapped and read through, the kernel maps with 2 MiB entries.
double huge_page_share(const std::string& path) {
  MappedFile file(path);
  EXPECT_NE(touch_every_page(file.bytes()), std::byte{0});  // every test file here holds no zero bytes
  const std::optional<std::size_t> huge = file.huge_page_bytes();
  return huge ? static_cast<double>(*huge) / static_cast<double>(file.size()) : -1.0;
}

constexpr std::size_t kLargeFile = std::size_t{24} << 20;

// The writer sends whole 4 MiB pieces, so a model it writes is cached in 2 MiB folios and mapped
// with 2 MiB entries, where the kernel and file system do that for large writes at all: the
// control, the same bytes written 4 MiB at a time with write(2), says whether they do here.
TEST(GgufWriter, WritesFilesTheKernelMapsWithHugePages) {
  TempDir dir;
  const std::vector<std::byte> data(kLargeFile, std::byte{3});
  const std::string control = dir.file("control.bin");
  {
    const int fd = ::open(control.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    for (std::size_t done = 0; done < data.size(); done += std::size_t{4} << 20)
      ASSERT_EQ(::write(fd, data.data() + done, std::size_t{4} << 20), ssize_t{4} << 20);
    ::close(fd);
  }
  const double control_share = huge_page_share(control);
  if (control_share < 0) GTEST_SKIP() << "no /proc/self/smaps here";
  if (control_share < 0.5)
    GTEST_SKIP() << "this kernel caches a file written in 4 MiB pieces in small folios (" << control_share * 100
                 << "% mapped in 2 MiB pages): nothing for the writer to gain";
  const std::string path = dir.file("large.gguf");
  {
    GgufWriter writer(path);
    writer.add_tensor("w", GgmlType::F32, {static_cast<int64_t>(kLargeFile / 4)});
    for (std::size_t done = 0; done < data.size(); done += 1 << 20)  // the quantizer's pieces are about this size
      writer.write_data({data.data() + done, std::size_t{1} << 20});
    writer.finish();
  }
  EXPECT_GE(huge_page_share(path), 0.75) << "the control reached " << control_share;
  EXPECT_EQ(GgufFile(path).require_tensor("w").data[kLargeFile - 1], std::byte{3});
}

// A model read from disk (not in the page cache) through cpullm's mapping, whose huge-page
// advice makes the kernel read it in 2 MiB folios: the way a server's first load reads it.
TEST(MappedFile, ReadsAFileFromDiskInHugePages) {
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(thp, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages are off here (" << (modes.empty() ? "unknown" : modes) << ")";
  TempDir dir;
  const std::string path = dir.file("cold.bin");
  write_bytes(path, std::vector<std::byte>(kLargeFile, std::byte{5}));
  {
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fdatasync(fd), 0);  // clean pages, which the advice below may drop
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    ::close(fd);
  }
  const double share = huge_page_share(path);
  if (share < 0) GTEST_SKIP() << "no /proc/self/smaps here";
  EXPECT_GE(share, 0.75);
  write_bytes(dir.file("empty.bin"), {});
  EXPECT_EQ(MappedFile(dir.file("empty.bin")).huge_page_bytes(), std::size_t{0});  // nothing mapped
}

TEST(GgufWriter, RefusesShortOrLongData) {
  TempDir dir;
  GgufWriter writer(dir.file("short.gguf"));
  writer.add_tensor("a", GgmlType::F32, {4});
  std::vector<std::byte> eight(8);
  writer.write_data(eight);
  EXPECT_THROW(writer.finish(), Error);
  GgufWriter over(dir.file("long.gguf"));
  over.add_tensor("a", GgmlType::F32, {1});
  EXPECT_THROW(over.write_data(eight), Error);
}

// A file with every metadata value type, including nested arrays, built byte by byte.
std::vector<std::byte> every_value_type(uint32_t version) {
  GgufBytes b;
  b.header(version, 0, 14);
  b.str("u8").u32(0).pod<uint8_t>(200);
  b.str("i8").u32(1).pod<int8_t>(-5);
  b.str("u16").u32(2).pod<uint16_t>(60000);
  b.str("i16").u32(3).pod<int16_t>(-30000);
  b.str("u32").u32(4).pod<uint32_t>(4000000000u);
  b.str("i32").u32(5).pod<int32_t>(-2000000000);
  b.str("f32").u32(6).pod<float>(1.25f);
  b.str("bool").u32(7).pod<uint8_t>(1);
  b.str("string").u32(8).str("text");
  b.str("u64").u32(10).pod<uint64_t>(1ull << 40);
  b.str("i64").u32(11).pod<int64_t>(-(1ll << 40));
  b.str("f64").u32(12).pod<double>(-0.125);
  b.str("u16s").u32(9).u32(2).u64(3).pod<uint16_t>(1).pod<uint16_t>(2).pod<uint16_t>(3);
  // [[1, 2], ["x"]]: an array of arrays, each inner array carrying its own element type.
  b.str("nested").u32(9).u32(9).u64(2);
  b.u32(5).u64(2).pod<int32_t>(1).pod<int32_t>(2);
  b.u32(8).u64(1).str("x");
  return b.bytes;
}

TEST(GgufReader, ReadsEveryValueTypeInVersions2And3) {
  TempDir dir;
  for (uint32_t version : {2u, 3u}) {
    const std::string path = dir.file("values.gguf");
    test::write_bytes(path, every_value_type(version));
    GgufFile file(path);
    EXPECT_EQ(file.version(), version);
    EXPECT_EQ(file.require_uint("u8"), 200u);
    EXPECT_EQ(file.find("i8")->integer, -5);
    EXPECT_EQ(file.require_uint("u16"), 60000u);
    EXPECT_EQ(file.find("i16")->integer, -30000);
    EXPECT_EQ(file.require_uint("u32"), 4000000000u);
    EXPECT_EQ(file.find("i32")->integer, -2000000000);
    EXPECT_EQ(file.require_float("f32"), 1.25);
    EXPECT_TRUE(file.bool_or("bool", false));
    EXPECT_EQ(file.require_string("string"), "text");
    EXPECT_EQ(file.require_uint("u64"), 1ull << 40);
    EXPECT_EQ(file.find("i64")->integer, -(1ll << 40));
    EXPECT_EQ(file.require_float("f64"), -0.125);
    EXPECT_EQ(file.require_array("u16s", GgufValueType::U16).integer_at(2), 3);
    const GgufValue& nested = file.require_array("nested", GgufValueType::ARRAY);
    ASSERT_EQ(nested.items.size(), 2u);
    EXPECT_EQ(nested.items[0].integer_at(1), 2);
    EXPECT_EQ(nested.items[1].items[0].string, "x");
    EXPECT_THROW(file.require_uint("i8"), Error);     // negative
    EXPECT_THROW(file.require_string("u8"), Error);   // wrong type
    EXPECT_THROW(file.require_uint("absent"), Error);
  }
}

// One valid file with one F32 tensor of 4 values, as a base for the malformed ones below.
GgufBytes one_tensor_file(uint64_t ne0 = 4, uint32_t type = 0, uint64_t offset = 0) {
  GgufBytes b;
  b.header(3, 1, 1).str("general.architecture").u32(8).str("llama");
  b.str("w").u32(1).u64(ne0).u32(type).u64(offset);
  b.pad(32);
  b.bytes.resize(b.bytes.size() + 64);
  return b;
}

struct BadFile {
  const char* what;
  std::function<std::vector<std::byte>()> bytes;
  const char* expected;  // a piece of the error message
};

TEST(GgufReader, RefusesMalformedFilesWithClearErrors) {
  const std::vector<BadFile> cases = {
      {"empty file", [] { return std::vector<std::byte>{}; }, "too short"},
      {"bad magic", [] { auto b = one_tensor_file(); b.bytes[0] = std::byte{'X'}; return b.bytes; }, "bad magic"},
      {"version 1", [] { GgufBytes b; b.header(1, 0, 0); return b.bytes; }, "version 1 is not supported"},
      {"version 4", [] { GgufBytes b; b.header(4, 0, 0); return b.bytes; }, "unknown GGUF version 4"},
      {"big-endian", [] { GgufBytes b; b.header(0x03000000, 0, 0); return b.bytes; }, "big-endian"},
      {"huge metadata count", [] { GgufBytes b; b.header(3, 0, 1ull << 60); return b.bytes; }, "metadata entries"},
      {"huge tensor count", [] { GgufBytes b; b.header(3, ~0ull, 0); return b.bytes; }, "cpullm accepts at most 262144"},
      {"more tensors than the file holds", [] { GgufBytes b; b.header(3, 1000, 0); return b.bytes; }, "tensors, more than"},
      {"more metadata than the file holds", [] { GgufBytes b; b.header(3, 0, 1000); return b.bytes; },
       "metadata entries, more than"},
      {"string past the end", [] { GgufBytes b; b.header(3, 0, 1).u64(1000).u64(0).u64(0); return b.bytes; },
       "claims 1000 bytes"},
      {"unknown value type", [] { GgufBytes b; b.header(3, 0, 1).str("k").u32(13).u32(0); return b.bytes; },
       "unknown value type 13"},
      {"bool of 2", [] { GgufBytes b; b.header(3, 0, 1).str("k").u32(7).pod<uint8_t>(2); return b.bytes; },
       "must be 0 or 1"},
      {"array count too big", [] { GgufBytes b; b.header(3, 0, 1).str("k").u32(9).u32(4).u64(1ull << 61); return b.bytes; },
       "claims 2305843009213693952 elements"},
      {"arrays nested too deep",
       [] {
         GgufBytes b;
         b.header(3, 0, 1).str("k").u32(9);
         for (int i = 0; i < 40; ++i) b.u32(9).u64(1);
         return b.bytes;
       },
       "deeper than"},
      {"alignment not a power of two",
       [] { GgufBytes b; b.header(3, 0, 1).str("general.alignment").u32(4).u32(24); return b.bytes; }, "power of two"},
      {"alignment of the wrong type",
       [] { GgufBytes b; b.header(3, 0, 1).str("general.alignment").u32(10).u64(32); return b.bytes; }, "must be u32"},
      {"duplicate key",
       [] { GgufBytes b; b.header(3, 0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2); return b.bytes; },
       "duplicate metadata key 'k'"},
      {"zero dimensions",
       [] { GgufBytes b; b.header(3, 1, 0).str("w").u32(0).u32(0).u64(0).u64(0).u64(0); return b.bytes; }, "has 0 dimensions"},
      {"five dimensions",
       [] { GgufBytes b; b.header(3, 1, 0).str("w").u32(5); for (int i = 0; i < 5; ++i) b.u64(1); return b.bytes; },
       "has 5 dimensions"},
      {"zero extent", [] { return one_tensor_file(0).bytes; }, "must be positive"},
      {"dimensions overflow",
       [] { GgufBytes b; b.header(3, 1, 0).str("w").u32(2).u64(1ull << 40).u64(1ull << 40).u32(0).u64(0); return b.bytes; },
       "overflow"},
      {"removed type", [] { return one_tensor_file(4, 4).bytes; }, "removed from ggml (was Q4_2)"},
      {"unknown type", [] { return one_tensor_file(4, 1000).bytes; }, "unknown to ggml"},
      {"row not a multiple of the block", [] { return one_tensor_file(33, 8).bytes; }, "not a multiple of its block size"},
      {"interleaved rows not whole groups", [] { return one_tensor_file(32, 4098).bytes; },
       "of type CPULLM_Q4_0_R8 has 1 rows, not a multiple of 8"},
      {"interleaved Q8_0 rows not whole groups", [] { return one_tensor_file(32, 4099).bytes; },
       "of type CPULLM_Q8_0_R8 has 1 rows, not a multiple of 8"},
      {"misaligned offset", [] { return one_tensor_file(4, 0, 4).bytes; }, "not a multiple of the alignment"},
      {"tensor outside the file", [] { return one_tensor_file(4, 0, 1 << 20).bytes; }, "lies outside the file"},
      {"tensor larger than the file", [] { return one_tensor_file(1 << 20).bytes; }, "lies outside the file"},
      {"truncated tensor info", [] { auto b = one_tensor_file().bytes; b.resize(60); return b; }, "truncated"},
      {"duplicate tensor names",
       [] {
         GgufBytes b;
         b.header(3, 2, 0).str("w").u32(1).u64(4).u32(0).u64(0).str("w").u32(1).u64(4).u32(0).u64(32);
         b.pad(32).bytes.resize(b.bytes.size() + 64);
         return b.bytes;
       },
       "duplicate tensor name 'w'"},
      {"overlapping tensors",
       [] {
         GgufBytes b;
         b.header(3, 2, 0).str("a").u32(1).u64(16).u32(0).u64(0).str("b").u32(1).u64(4).u32(0).u64(32);
         b.pad(32).bytes.resize(b.bytes.size() + 128);
         return b.bytes;
       },
       "overlap"},
  };
  TempDir dir;
  for (const BadFile& bad : cases) {
    const std::string path = dir.file("bad.gguf");
    test::write_bytes(path, bad.bytes());
    try {
      GgufFile file(path);
      ADD_FAILURE() << bad.what << ": accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << bad.what << ": " << message;
      EXPECT_NE(message.find(bad.expected), std::string::npos) << bad.what << ": " << message;
    }
  }
}

TEST(GgufReader, MissingFileNamesIt) {
  try {
    GgufFile file("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf: cannot open"), std::string::npos);
  }
}

TEST(GgufReader, ReadsLlamaCppFiles) {
  auto path = test::shared_model("stories260K-q4_0.gguf");
  if (!path) GTEST_SKIP() << "../shared/models/stories260K-q4_0.gguf not found";
  GgufFile file(*path);
  EXPECT_EQ(file.require_string("general.architecture"), "llama");
  // llama.cpp keeps ffn_down in F16 (172 columns are no multiple of 32) and the rest Q4_0.
  EXPECT_EQ(file.require_tensor("blk.0.ffn_down.weight").type, GgmlType::F16);
  EXPECT_EQ(file.require_tensor("blk.0.attn_q.weight").type, GgmlType::Q4_0);
  EXPECT_EQ(file.require_tensor("output.weight").type, GgmlType::Q8_0);
  EXPECT_EQ(file.require_tensor("blk.0.attn_q.weight").bytes, 64u * 64 / 32 * 18);
}

}  // namespace
}  // namespace cpullm
