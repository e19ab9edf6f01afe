// The schema as an ordered list of migrations, read from harness/results/schema.sql (compiled in).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace cpullm {

struct Migration {
  int version = 0;  // 1, 2, ...: schema_version holds the highest applied
  std::string sql;  // its statements, SQLite's dialect, comments removed
};

// schema.sql's text, as built into the binary.
std::string_view schema_sql();

// schema.sql cut at its "-- migration N:" lines, in order, versions checked to be 1, 2, 3, ...
std::vector<Migration> schema_migrations();

// The version a database reaches after every migration: the newest this build knows.
int latest_schema_version();

}  // namespace cpullm
