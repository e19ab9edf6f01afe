// Cuts schema.sql into its migrations. A migration starts at a line "-- migration N: ..." and
// runs to the next one; text before the first is the file's preamble.
#include "harness/results/schema.hpp"

#include <charconv>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr std::string_view migration_marker = "-- migration ";

// A line without its "--" comment (the schema has no "--" inside string literals).
std::string_view without_comment(std::string_view line) {
  const size_t comment = line.find("--");
  return comment == std::string_view::npos ? line : line.substr(0, comment);
}

}  // namespace

std::vector<Migration> schema_migrations() {
  std::vector<Migration> migrations;
  std::string_view text = schema_sql();
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (line.starts_with(migration_marker)) {
      const std::string_view number = line.substr(migration_marker.size());
      int version = 0;
      std::from_chars(number.data(), number.data() + number.size(), version);
      if (version != static_cast<int>(migrations.size()) + 1)
        fail("schema.sql: migration {} where {} was expected (versions run 1, 2, 3, ...)", version, migrations.size() + 1);
      migrations.push_back({version, ""});
    } else if (!migrations.empty()) {
      const std::string_view code = without_comment(line);
      if (code.find_first_not_of(" \t\r") != std::string_view::npos) migrations.back().sql.append(code).append("\n");
    }
  }
  if (migrations.empty()) fail("schema.sql: no \"-- migration 1:\" line");
  return migrations;
}

int latest_schema_version() {
  static const int latest = static_cast<int>(schema_migrations().size());
  return latest;
}

}  // namespace cpullm
