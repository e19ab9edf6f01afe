// The markdown table, llama-bench's default output: right-aligned numbers, "avg ± stddev" rates.
#include <fmt/format.h>

#include "harness/bench/reporters.hpp"

namespace cpullm {
namespace {

std::string cell(const Record& record, const MarkdownColumn& column) {
  const auto& value = record.contains(column.key) ? record[column.key] : Record();
  if (value.is_null()) return "-";
  switch (column.kind) {
    case MarkdownColumn::Kind::bytes: {
      const double bytes = value.get<double>();
      return bytes >= (1 << 30) ? fmt::format("{:.2f} GiB", bytes / (1 << 30)) : fmt::format("{:.2f} MiB", bytes / (1 << 20));
    }
    case MarkdownColumn::Kind::count: {
      const double n = value.get<double>();
      return n >= 1e9 ? fmt::format("{:.2f} B", n / 1e9) : fmt::format("{:.2f} M", n / 1e6);
    }
    case MarkdownColumn::Kind::rate: {
      const auto& spread = record.contains(column.spread_key) ? record[column.spread_key] : Record();
      return spread.is_null() ? fmt::format("{:.2f}", value.get<double>())
                              : fmt::format("{:.2f} ± {:.2f}", value.get<double>(), spread.get<double>());
    }
    case MarkdownColumn::Kind::text:
    case MarkdownColumn::Kind::number:
      break;
  }
  if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
  return value.is_number_float() ? fmt::format("{:.2f}", value.get<double>()) : plain_text(value);
}

class MarkdownReporter : public Reporter {
 public:
  MarkdownReporter(std::FILE* out, std::vector<MarkdownColumn> columns) : out_(out), columns_(std::move(columns)) {}

  void add(const Record& record) override {
    if (!header_printed_) {
      for (const auto& c : columns_) std::fprintf(out_, "| %s ", c.title.c_str());
      std::fputs("|\n", out_);
      for (const auto& c : columns_) std::fputs(c.kind == MarkdownColumn::Kind::text ? "| --- " : "| ---: ", out_);
      std::fputs("|\n", out_);
      header_printed_ = true;
    }
    for (const auto& c : columns_) std::fprintf(out_, "| %s ", cell(record, c).c_str());
    std::fputs("|\n", out_);
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  std::vector<MarkdownColumn> columns_;
  bool header_printed_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_markdown_reporter(std::FILE* out, std::vector<MarkdownColumn> columns) {
  return std::make_unique<MarkdownReporter>(out, std::move(columns));
}

}  // namespace cpullm
