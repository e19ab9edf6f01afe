// CSV as llama-bench writes it: a header of field names, then every value double-quoted.
// Per-repetition arrays (samples_ns, samples_ts) are left out, as llama-bench does.
#include "harness/bench/reporters.hpp"

namespace cpullm {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';  // a quote inside is doubled
    out += c;
  }
  return out + "\"";
}

class CsvReporter : public Reporter {
 public:
  explicit CsvReporter(std::FILE* out) : out_(out) {}

  void add(const Record& record) override {
    std::string header, row;
    for (const auto& [key, value] : record.items()) {
      if (value.is_array()) continue;
      const char* separator = row.empty() ? "" : ",";
      header.append(separator).append(key);
      row.append(separator).append(quoted(plain_text(value)));
    }
    if (!header_printed_) std::fprintf(out_, "%s\n", header.c_str());
    header_printed_ = true;
    std::fprintf(out_, "%s\n", row.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool header_printed_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_csv_reporter(std::FILE* out) { return std::make_unique<CsvReporter>(out); }

}  // namespace cpullm
