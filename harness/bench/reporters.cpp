#include "harness/bench/reporters.hpp"

#include <fmt/format.h>

#include "engine/util/error.hpp"

namespace cpullm {

// Defined in report_*.cpp, one per format.
std::unique_ptr<Reporter> make_markdown_reporter(std::FILE* out, std::vector<MarkdownColumn> columns);
std::unique_ptr<Reporter> make_csv_reporter(std::FILE* out);
std::unique_ptr<Reporter> make_json_reporter(std::FILE* out, bool lines);
std::unique_ptr<Reporter> make_sql_reporter(std::FILE* out, const std::string& table);

std::unique_ptr<Reporter> make_reporter(const std::string& format, std::FILE* out, std::vector<MarkdownColumn> columns,
                                        const std::string& sql_table) {
  if (format == "md") return make_markdown_reporter(out, std::move(columns));
  if (format == "csv") return make_csv_reporter(out);
  if (format == "json") return make_json_reporter(out, false);
  if (format == "jsonl") return make_json_reporter(out, true);
  if (format == "sql") return make_sql_reporter(out, sql_table);
  fail("-o: unknown output format '{}' (md, csv, json, jsonl or sql)", format);
}

std::string plain_text(const nlohmann::ordered_json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  if (value.is_number_float()) return fmt::format("{:.6f}", value.get<double>());
  return value.dump();
}

}  // namespace cpullm
