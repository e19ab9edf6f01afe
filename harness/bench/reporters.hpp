// Output formats of `cpullm bench`, one reporter per format behind one interface (as
// google/benchmark's console/CSV/JSON reporters). A result is a flat JSON object whose keys are
// llama-bench's field names where the meaning is the same; every reporter prints records as
// they arrive, so a long run shows its points one by one.
#pragma once
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cpullm {

using Record = nlohmann::ordered_json;

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void add(const Record& record) = 0;  // one finished point
  virtual void finish() {}                     // after the last point (closes JSON's array)
};

// One column of the markdown table: its title and the record key it shows, rendered by kind.
struct MarkdownColumn {
  // text left-aligned; the others right-aligned: number as it is (floats to 2 decimals), bytes in
  // MiB/GiB, count in M/B, rate "avg ± stddev" from key and spread_key.
  enum class Kind { text, number, bytes, count, rate };
  std::string title;
  std::string key;
  Kind kind = Kind::text;
  std::string spread_key;  // rate only: the key of the standard deviation
};

// Formats: md (the columns given), csv, json, jsonl, sql (INSERTs into `sql_table`, created
// first, as llama-bench's -o sql: pipe it into sqlite3). Error for an unknown format.
std::unique_ptr<Reporter> make_reporter(const std::string& format, std::FILE* out, std::vector<MarkdownColumn> columns,
                                        const std::string& sql_table);

// A value as plain text: strings as they are, numbers without exponent, booleans 1/0, null "".
std::string plain_text(const nlohmann::ordered_json& value);

}  // namespace cpullm
