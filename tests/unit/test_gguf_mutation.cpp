// Hostile input for the GGUF reader, the model loader and the tokenizer loader: thousands of
// corrupted variants of real files (truncated in every region, bit-flipped, with hostile counts,
// lengths, dimensions, offsets and types, structurally broken) must each either load and run, or
// end in one cpullm::Error that names the file. Another exception, an error at run time or a
// mutant slower than kHangSeconds fails the test; a crash or a sanitizer report fails the
// process, which is what the ASan + UBSan build of this test is for.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <typeinfo>

#include "engine/format/ggml_types.hpp"
#include "engine/format/gguf.hpp"
#include "engine/model/model.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

using Bytes = std::vector<std::byte>;

// Mutants per seed file and family, thinned evenly beyond that: about 15000 in all when every
// seed is present. The 700 KB vocabulary gets few: parsing its 32000 pieces is the slow part.
constexpr std::size_t kMutantsPerFamily = 1500;
constexpr std::size_t kVocabMutantsPerFamily = 100;
constexpr std::size_t kDataFlips = 150;  // of a model's bit flips, those aimed at tensor data
constexpr uint64_t kRandomSeed = 0x6767756675;
constexpr double kHangSeconds = 2.0;
constexpr int64_t kContext = 8;
constexpr int kFailuresShown = 25;  // per seed and family; the rest are only counted

Bytes little_endian(uint64_t value, uint64_t size) {
  Bytes out(size);
  std::memcpy(out.data(), &value, size);
  return out;
}

Bytes text_bytes(std::string_view text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return Bytes(data, data + text.size());
}

// ---- An independent walker over a valid GGUF file: the fields mutations aim at ----

enum class Kind { Count, Length, Dim, TensorType, KvType, Offset, Value, KeyName, TensorName };

struct Field {
  uint64_t pos, size;  // the field's bytes (for names: the text)
  Kind kind;
  std::string what;
};

struct Layout {
  std::vector<Field> fields;
  std::vector<uint64_t> boundaries;  // where each header part, key/value and tensor info starts
  uint64_t info_end = 0;             // end of header + metadata + tensor infos
  uint64_t data_start = 0;
  std::vector<std::pair<uint64_t, uint64_t>> tensors;  // each tensor's data: file position, bytes
};

class Walker {
 public:
  explicit Walker(const Bytes& bytes) : bytes_(bytes) {}

  Layout walk() {
    pos_ = 8;  // magic and version: the structural edits change those
    out_.boundaries = {0, 4, 8};
    const uint64_t n_tensors = read(Kind::Count, 8, "tensor count");
    const uint64_t n_kvs = read(Kind::Count, 8, "metadata count");
    uint64_t alignment = kGgufDefaultAlignment;
    for (uint64_t i = 0; i < n_kvs; ++i) {
      out_.boundaries.push_back(pos_);
      const std::string key = text(Kind::KeyName, fmt::format("key #{}", i));
      const auto type = static_cast<uint32_t>(read(Kind::KvType, 4, fmt::format("type of '{}'", key)));
      if (key == "general.alignment") alignment = load(pos_, 4);
      value(type, fmt::format("value of '{}'", key), true);
    }
    std::vector<std::pair<uint64_t, uint64_t>> extents;
    for (uint64_t i = 0; i < n_tensors; ++i) {
      out_.boundaries.push_back(pos_);
      const std::string name = text(Kind::TensorName, fmt::format("tensor #{}", i));
      const uint64_t n_dims = read(Kind::Count, 4, fmt::format("dimension count of '{}'", name));
      uint64_t elements = 1;
      for (uint64_t d = 0; d < n_dims; ++d)
        elements *= read(Kind::Dim, 8, fmt::format("dimension {} of '{}'", d, name));
      const auto type = static_cast<uint32_t>(read(Kind::TensorType, 4, fmt::format("type of '{}'", name)));
      const auto traits = ggml_type_traits(type);
      if (!traits) throw std::runtime_error("walker: seed tensor '" + name + "' has an unknown type");
      const uint64_t offset = read(Kind::Offset, 8, fmt::format("offset of '{}'", name));
      extents.emplace_back(offset, elements / traits->block_elements * traits->block_bytes);
    }
    out_.info_end = pos_;
    out_.data_start = (pos_ + alignment - 1) / alignment * alignment;
    out_.boundaries.push_back(out_.data_start);
    for (auto [offset, bytes] : extents) out_.tensors.emplace_back(out_.data_start + offset, bytes);
    return std::move(out_);
  }

 private:
  void require(uint64_t at, uint64_t size) const {
    if (at + size > bytes_.size()) throw std::runtime_error("walker: the seed ends inside a field");
  }

  uint64_t load(uint64_t at, uint64_t size) const {
    require(at, size);
    uint64_t value = 0;
    std::memcpy(&value, bytes_.data() + at, size);  // little-endian, like the file
    return value;
  }

  uint64_t read(Kind kind, uint64_t size, std::string what, bool record = true) {
    const uint64_t value = load(pos_, size);
    if (record) out_.fields.push_back({pos_, size, kind, std::move(what)});
    pos_ += size;
    return value;
  }

  std::string text(Kind kind, const std::string& what) {
    const uint64_t length = read(Kind::Length, 8, "name length of " + what);
    require(pos_, length);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    if (length) out_.fields.push_back({pos_, length, kind, what + " '" + s + "'"});
    pos_ += length;
    return s;
  }

  void value(uint32_t type, const std::string& what, bool record) {
    // Bytes per GGUF value type, 0 for string (8) and array (9); written out here rather than
    // taken from the reader so that the walker does not share its mistakes.
    static constexpr uint64_t kSizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type >= std::size(kSizes)) throw std::runtime_error("walker: unknown value type in seed");
    if (type == 8) {
      pos_ += read(Kind::Length, 8, "length of " + what, record);
    } else if (type == 9) {
      const auto element = static_cast<uint32_t>(read(Kind::KvType, 4, "element type of " + what, record));
      const uint64_t count = read(Kind::Count, 8, "element count of " + what, record);
      if (element < std::size(kSizes) && kSizes[element]) {
        pos_ += count * kSizes[element];
        return;
      }
      // Of a long array (the vocabulary) only the first, the last and 8 between are aimed at.
      for (uint64_t i = 0; i < count; ++i)
        value(element, fmt::format("{}[{}]", what, i),
              record && (count <= 10 || i % (count / 8) == 0 || i + 1 == count));
    } else {
      read(Kind::Value, kSizes[type], what, record);
    }
  }

  const Bytes& bytes_;
  Layout out_;
  uint64_t pos_ = 0;
};

// ---- Seeds, mutants and running them ----

struct Seed {
  std::string name;
  Bytes bytes;
  Layout layout;
  bool runs_model = false;  // the pristine file loads as a Model, so mutants are loaded and run as one
  std::size_t per_family = kMutantsPerFamily;
};

struct Mutant {
  std::string what;
  uint64_t size;                                    // bytes kept, or more: zeros beyond the seed's end
  std::vector<std::pair<uint64_t, Bytes>> patches;  // bytes overwritten
  bool must_reject = false;
};

struct Seeds {
  Seeds() {
    // One thread: on a busy machine (ctest -j, a build alongside) OpenMP barriers can stretch
    // a tiny forward() to most of a second, which the hang guard would take for a hang.
    omp_set_num_threads(1);
    const std::string synthetic = dir.file("synthetic.gguf");
    // 400 pieces: the synthetic vocabulary's bytes, letters and specials alone take 354.
    write_synthetic_model(synthetic, {.shape = {"mutation", 2, 64, 160, 8, 2, 400, 64}, .progress = false});
    add("synthetic (2 layers, dim 64, F16)", synthetic, kMutantsPerFamily);
    for (std::string name : {"stories260K.gguf", "stories260K-q8_0.gguf", "ggml-vocab-llama-spm.gguf"}) {
      if (auto path = test::shared_model(name))
        add(name, *path, name.starts_with("ggml-vocab") ? kVocabMutantsPerFamily : kMutantsPerFamily);
      else
        std::cout << "[seeds] " << name << " is not in the shared models: one seed fewer\n";
    }
  }

  void add(const std::string& name, const std::string& path, std::size_t per_family) {
    Seed seed{name, test::read_bytes(path), {}, false, per_family};
    seed.layout = Walker(seed.bytes).walk();
    // The walker aims every mutation, so it must see the seed as the reader does.
    const GgufFile file(path);
    const auto& tensors = file.tensors();
    bool agrees = file.data_offset() == seed.layout.data_start && tensors.size() == seed.layout.tensors.size();
    for (std::size_t i = 0; agrees && i < tensors.size(); ++i)
      agrees = std::pair(file.data_offset() + tensors[i].offset, tensors[i].bytes) == seed.layout.tensors[i];
    if (!agrees) throw std::runtime_error("the walker and the reader disagree on the layout of " + path);
    if (!tensors.empty()) {
      try {
        Model model(path, kContext);
        seed.runs_model = true;
      } catch (const Error& e) {
        std::cout << "[seeds] " << name << " does not load as a Model (" << e.what()
                  << "); its mutants go through GgufFile and Tokenizer only\n";
      }
    }
    std::cout << "[seeds] " << name << ": " << seed.bytes.size() << " bytes, " << seed.layout.fields.size()
              << " fields, header + metadata + tensor infos " << seed.layout.info_end << " bytes\n";
    list.push_back(std::move(seed));
  }

  test::TempDir dir;
  std::vector<Seed> list;
};

const Seeds& seeds() {
  static const Seeds instance;
  return instance;
}

// The first `size` bytes; beyond the end of `bytes`, zeros that take no disk space. Written over
// the last mutant rather than after truncating it to nothing: ext4 flushes a file rewritten
// that way on every close, which would make the disk, not the engine, set the runtime.
void write_mutant(const std::string& path, const Bytes& bytes, uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const uint64_t kept = std::min<uint64_t>(size, bytes.size());
  const bool ok = fd >= 0 && ::pwrite(fd, bytes.data(), kept, 0) == static_cast<ssize_t>(kept) &&
                  ::ftruncate(fd, static_cast<off_t>(kept)) == 0 && ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("cannot write " + path);
}

struct Outcome {
  bool rejected = false;
  std::string problem;  // empty: it ran, or was refused with an Error naming the file
};

// Loads the file as the CLI would and uses it.
Outcome exercise(const std::string& path, bool runs_model) {
  std::string stage = "loading";
  try {
    std::optional<Model> model;
    std::optional<GgufFile> file;
    if (runs_model) model.emplace(path, kContext);
    else file.emplace(path);
    const Tokenizer tokenizer = Tokenizer::from_gguf(model ? model->file() : *file);
    stage = "Tokenizer::encode";
    const std::vector<int32_t> ids = tokenizer.encode("Hello world", true);
    if (!model) return {};
    // One step with the prompt's largest id, as a caller would feed it: a tokenizer whose ids the
    // model cannot run would be a loader bug. Flipped weights can make the logits NaN, which
    // Model::forward refuses with an Error naming the file: a clean refusal, not a failure.
    stage = "Model::forward";
    std::span<const float> logits = model->forward(*std::max_element(ids.begin(), ids.end()), 0);
    const int64_t vocab = model->config().vocab_size;
    if (static_cast<int64_t>(logits.size()) != vocab)
      return {false, fmt::format("forward gave {} logits for a vocabulary of {}", logits.size(), vocab)};
    return {};
  } catch (const Error& e) {
    const std::string message = e.what();
    const bool non_finite = stage == "Model::forward" && message.find("the logits are not finite") != std::string::npos;
    if (stage != "loading" && !non_finite) return {true, fmt::format("{} failed at run time: {}", stage, message)};
    return {true, message.starts_with(path + ": ") ? "" : "the error does not name the file: " + message};
  } catch (const std::exception& e) {
    return {false, fmt::format("{} threw {} instead of cpullm::Error: {}", stage, typeid(e).name(), e.what())};
  } catch (...) {
    return {false, stage + " threw something that is not a std::exception"};
  }
}

// Runs every mutant of one family on one seed, reports what failed and prints a summary.
void run_family(const Seed& seed, const std::string& family, std::vector<Mutant> mutants) {
  if (mutants.size() > seed.per_family) {  // thinned evenly, so that every part of the file keeps some
    std::vector<Mutant> kept;
    for (std::size_t i = 0; i < seed.per_family; ++i)
      kept.push_back(std::move(mutants[i * mutants.size() / seed.per_family]));
    mutants = std::move(kept);
  }
  const std::string path = seeds().dir.file("mutant.gguf");
  Bytes work = seed.bytes;
  std::size_t rejected = 0, failures = 0;
  double slowest = 0;
  std::string slowest_what;
  for (const Mutant& m : mutants) {
    for (const auto& [pos, bytes] : m.patches) std::memcpy(work.data() + pos, bytes.data(), bytes.size());
    write_mutant(path, work, m.size);
    for (const auto& [pos, bytes] : m.patches) std::memcpy(work.data() + pos, seed.bytes.data() + pos, bytes.size());

    const auto start = std::chrono::steady_clock::now();
    Outcome outcome = exercise(path, seed.runs_model);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string& problem = outcome.problem;
    if (problem.empty() && m.must_reject && !outcome.rejected) problem = "accepted, but this file must be refused";
    if (problem.empty() && seconds > kHangSeconds) problem = fmt::format("took {:.1f} s (a hang?)", seconds);
    if (seconds > slowest) slowest = seconds, slowest_what = m.what;
    rejected += outcome.rejected;
    if (!problem.empty() && ++failures <= kFailuresShown)
      ADD_FAILURE() << seed.name << ", " << family << ", " << m.what << ": " << problem;
  }
  std::cout << fmt::format("[{}] {}: {} mutants, {} rejected, {} accepted; slowest {:.1f} ms ({})\n", family,
                           seed.name, mutants.size(), rejected, mutants.size() - rejected, slowest * 1e3, slowest_what);
  EXPECT_EQ(failures, 0u) << seed.name << ", " << family << ": mutants that failed (the first are shown above)";
}

// ---- The mutation families ----

// Cuts at every byte of header, metadata and tensor infos (every Nth byte where the budget is
// smaller), at and around every region boundary, and at each tensor's start, middle and end.
TEST(GgufMutation, Truncations) {
  for (const Seed& seed : seeds().list) {
    const Layout& l = seed.layout;
    std::set<uint64_t> cuts;
    for (uint64_t b : l.boundaries) cuts.insert({b - 1, b, b + 1});
    for (auto [start, bytes] : l.tensors) cuts.insert({start, start + bytes / 2, start + bytes - 1});
    const uint64_t budget = std::max<uint64_t>(1, seed.per_family - std::min(seed.per_family, cuts.size()));
    for (uint64_t at = 0; at < l.info_end; at += (l.info_end + budget - 1) / budget) cuts.insert(at);
    uint64_t needed = l.info_end;  // without these bytes the file cannot be whole
    for (auto [start, bytes] : l.tensors) needed = std::max(needed, start + bytes);
    std::vector<Mutant> mutants;
    for (uint64_t at : cuts)
      if (at < seed.bytes.size()) mutants.push_back({fmt::format("truncated to {} bytes", at), at, {}, at < needed});
    run_family(seed, "truncation", std::move(mutants));
  }
}

// 1 to 4 random bits flipped in header, metadata and tensor infos, and some in tensor data.
TEST(GgufMutation, BitFlips) {
  std::mt19937_64 rng(kRandomSeed);
  for (const Seed& seed : seeds().list) {
    const Layout& l = seed.layout;
    std::vector<Mutant> mutants;
    for (std::size_t i = 0; i < seed.per_family; ++i) {
      const bool in_data = !l.tensors.empty() && i < kDataFlips;
      std::uniform_int_distribution<uint64_t> where(in_data ? l.data_start : 0,
                                                    (in_data ? seed.bytes.size() : l.info_end) - 1);
      std::map<uint64_t, std::byte> flipped;
      std::string what = "bits flipped (byte.bit):";
      for (int n = std::uniform_int_distribution<int>(1, 4)(rng); n > 0; --n) {
        const uint64_t pos = where(rng);
        const int bit = std::uniform_int_distribution<int>(0, 7)(rng);
        flipped.try_emplace(pos, seed.bytes[pos]).first->second ^= std::byte(1u << bit);
        what += fmt::format(" {}.{}", pos, bit);
      }
      Mutant m{what, seed.bytes.size(), {}};
      for (auto [pos, byte] : flipped) m.patches.emplace_back(pos, Bytes{byte});
      mutants.push_back(std::move(m));
    }
    run_family(seed, "bit flips", std::move(mutants));
  }
}

// Every count, length, dimension, offset, type and scalar value the walker found, overwritten
// with what a hostile or broken writer could put there.
TEST(GgufMutation, HostileFields) {
  for (const Seed& seed : seeds().list) {
    const uint64_t size = seed.bytes.size();
    std::vector<Mutant> mutants;
    for (const Field& f : seed.layout.fields) {
      if (f.kind == Kind::KeyName || f.kind == Kind::TensorName) continue;
      uint64_t current = 0;
      std::memcpy(&current, seed.bytes.data() + f.pos, f.size);
      std::vector<uint64_t> values;
      if (f.kind == Kind::TensorType)
        values = {4, 5, 31, 36, 40, 1000, 0xFFFFFFFF, 0, 1, 2, 8, 30};  // removed, unknown, then other sizes
      else if (f.kind == Kind::KvType)
        values = {13, 1000, 0xFFFFFFFF, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};  // each valid one reads differently
      else
        values = {0, 1, 0xFFFFFFFF, ~0ull, 1ull << 62, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                  size, size + 1, size - f.pos - f.size + 1, current + 1, current - 1};
      std::set<uint64_t> seen{current};
      for (uint64_t v : values) {
        if (f.size < 8) v &= (1ull << (8 * f.size)) - 1;  // a narrower field gets the low bytes
        if (seen.insert(v).second)
          mutants.push_back(
              {fmt::format("{} at {} set to {}", f.what, f.pos, v), size, {{f.pos, little_endian(v, f.size)}}});
      }
    }
    run_family(seed, "hostile fields", std::move(mutants));
  }
}

// Wrong magic, unsupported versions, duplicate tensor names and keys, overlapping tensors, and
// renamed keys and tensors (a required one gone missing must be named).
TEST(GgufMutation, StructuralEdits) {
  for (const Seed& seed : seeds().list) {
    const uint64_t size = seed.bytes.size();
    std::vector<Mutant> mutants;
    for (uint32_t magic : {0x47475546u, 0u, 0x746a6767u})  // "FUGG" (byte-swapped), zeros, "ggjt" (pre-GGUF)
      mutants.push_back({fmt::format("magic 0x{:08x}", magic), size, {{0, little_endian(magic, 4)}}, true});
    for (uint32_t version : {0u, 1u, 4u, 0x03000000u, 0x02000000u})  // the last two: big-endian 3 and 2
      mutants.push_back({fmt::format("version 0x{:08x}", version), size, {{4, little_endian(version, 4)}}, true});

    const std::vector<Field>& fields = seed.layout.fields;
    auto bytes_of = [&](const Field& f) {
      return Bytes(seed.bytes.begin() + f.pos, seed.bytes.begin() + f.pos + f.size);
    };
    const Field* previous_offset = nullptr;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const Field& f = fields[i];
      if (f.kind == Kind::Offset) {
        if (previous_offset)  // two tensors at one offset
          mutants.push_back(
              {previous_offset->what + " copied to " + f.what, size, {{f.pos, bytes_of(*previous_offset)}}, true});
        previous_offset = &f;
      }
      if (f.kind != Kind::KeyName && f.kind != Kind::TensorName) continue;
      mutants.push_back({"renamed " + f.what, size, {{f.pos, text_bytes("#")}}});
      const std::string_view alignment = "general.alignment";  // its value becomes the alignment
      if (f.kind == Kind::KeyName && f.size == alignment.size())
        mutants.push_back({"renamed " + f.what + " to general.alignment", size, {{f.pos, text_bytes(alignment)}}});
      // The next name of the same kind and length becomes a duplicate of this one.
      for (std::size_t j = i + 1; j < fields.size(); ++j)
        if (fields[j].kind == f.kind && fields[j].size == f.size && bytes_of(fields[j]) != bytes_of(f)) {
          mutants.push_back({f.what + " copied onto " + fields[j].what, size, {{fields[j].pos, bytes_of(f)}}, true});
          break;
        }
    }
    run_family(seed, "structural edits", std::move(mutants));
  }
}

// Counts the file could hold were each entry smallest, in a large (sparse) file, and a broken
// first entry: the reader must refuse that entry, not first reserve memory for every claimed
// one (here 3 to 14 times the file's size; ASan's max_allocation_size_mb makes that fatal).
TEST(GgufMutation, HugeCountsInALargeFile) {
  constexpr uint64_t kSize = 512ull << 20;
  const uint64_t broken = ~0ull;  // the length of the first key, tensor name or string
  test::GgufBytes kvs, tensors, strings;
  kvs.header(3, 0, (kSize - 24) / 13).u64(broken);
  tensors.header(3, (kSize - 24) / 32, 0).u64(broken);
  strings.header(3, 0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64((kSize - 100) / 8).u64(broken);
  for (auto [what, file] : {std::pair{"metadata count", &kvs}, {"tensor count", &tensors}, {"array count", &strings}})
    run_family({fmt::format("{} in a {} MiB file", what, kSize >> 20), file->bytes, {}, false, 1}, "huge counts",
               {{"zeros after the broken first entry", kSize, {}, true}});
}

// Byte pieces "<0xXX>" whose two digits are not hex digits. sscanf's %2x also takes a sign
// or "0x", so these check that the tokenizer indexes its 256-entry byte table only with 0..255.
TEST(GgufMutation, BytePieceText) {
  Bytes pattern = little_endian(6, 8);  // a 6-byte string starting "<0x"
  for (std::byte b : text_bytes("<0x")) pattern.push_back(b);
  for (const Seed& seed : seeds().list) {
    auto found = std::search(seed.bytes.begin(), seed.bytes.end(), pattern.begin(), pattern.end());
    if (found == seed.bytes.end()) continue;
    const uint64_t digits = static_cast<uint64_t>(found - seed.bytes.begin()) + pattern.size();
    std::vector<Mutant> mutants;
    for (std::string_view text : {"-1", "-F", "+1", " 1", "0x", "GG"})
      mutants.push_back({fmt::format("byte piece at {} made '<0x{}>'", digits - 3, text), seed.bytes.size(),
                         {{digits, text_bytes(text)}}});
    run_family(seed, "byte piece text", std::move(mutants));
  }
}

}  // namespace
}  // namespace cpullm
