// The PostgreSQL backend (libpq): the same tables for a team collecting results from many
// servers. Values travel as text; results come back typed by their column's type.
#include <libpq-fe.h>

#include <cmath>
#include <regex>

#include "harness/results/backend.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// PostgreSQL type OIDs (pg_type.dat) that come back as numbers rather than text.
constexpr Oid int2_oid = 21, int4_oid = 23, int8_oid = 20, float4_oid = 700, float8_oid = 701, numeric_oid = 1700;
// Any constant shared by every cpullm process: the key of the advisory lock around migrations.
constexpr int64_t schema_lock_key = 0x6370756c6c6d;  // "cpullm"

// The schema's SQLite types in PostgreSQL's words: 64-bit keys and integers (model sizes and
// memory exceed 2^31), double precision reals.
std::string postgres_ddl(const std::string& sql) {
  static const std::regex primary_key(R"(\bINTEGER PRIMARY KEY\b)"), integer(R"(\bINTEGER\b)"), real(R"(\bREAL\b)");
  std::string out = std::regex_replace(sql, primary_key, "BIGSERIAL PRIMARY KEY");
  out = std::regex_replace(out, integer, "BIGINT");
  return std::regex_replace(out, real, "DOUBLE PRECISION");
}

// ? placeholders -> $1, $2, ... (none of cpullm's statements has a ? inside a string literal).
std::string numbered_placeholders(const std::string& sql) {
  std::string out;
  int next = 1;
  for (const char c : sql) {
    if (c != '?') out += c;
    else out.append(1, '$').append(std::to_string(next++));
  }
  return out;
}

// A double as PostgreSQL reads it back exactly: shortest round-trip digits, its own words for
// the non-finite values.
std::string postgres_real(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return fmt::format("{}", value);
}

class PostgresConnection final : public Connection {
 public:
  explicit PostgresConnection(const std::string& url) : name_(without_password(url)) {
    // libpq's own complaint about a malformed string quotes pieces of it, the password's too.
    char* parse_error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &parse_error);
    PQfreemem(parse_error);
    if (!parsed) fail("--db: not a PostgreSQL URL or connection string that libpq can read (not shown: it may hold a password)");
    PQconninfoFree(parsed);
    // connect_timeout comes first so that one in the URL overrides it: a server that does not
    // answer is an error after 10 s, not a hang.
    const char* keywords[] = {"connect_timeout", "dbname", nullptr};
    const char* values[] = {"10", url.c_str(), nullptr};
    connection_.reset(PQconnectdbParams(keywords, values, 1));
    if (!connection_) fail_file(name_, "PostgreSQL: out of memory");
    if (PQstatus(connection_.get()) != CONNECTION_OK) fail_file(name_, "cannot connect to PostgreSQL: {}", error_message());
    // CREATE TABLE IF NOT EXISTS reports each table it skips as a NOTICE on stderr otherwise.
    PQsetNoticeProcessor(connection_.get(), [](void*, const char*) {}, nullptr);
  }

  std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params) override {
    std::vector<std::string> texts(params.size());
    std::vector<const char*> pointers(params.size(), nullptr);  // nullptr: SQL NULL
    for (size_t i = 0; i < params.size(); ++i) {
      if (const auto* n = std::get_if<int64_t>(&params[i])) texts[i] = std::to_string(*n);
      else if (const auto* d = std::get_if<double>(&params[i])) texts[i] = postgres_real(*d);
      else if (const auto* s = std::get_if<std::string>(&params[i])) texts[i] = *s;
      else continue;
      pointers[i] = texts[i].c_str();
    }
    const Result result(PQexecParams(connection_.get(), numbered_placeholders(sql).c_str(), static_cast<int>(params.size()),
                                     nullptr, pointers.data(), nullptr, nullptr, 0));
    check(result.get(), sql);
    std::vector<SqlRow> rows(static_cast<size_t>(PQntuples(result.get())));
    for (int r = 0; r < PQntuples(result.get()); ++r)
      for (int c = 0; c < PQnfields(result.get()); ++c) rows[r].push_back(read_value(result.get(), r, c));
    return rows;
  }

  void execute_script(const std::string& sql) override {
    const Result result(PQexec(connection_.get(), postgres_ddl(sql).c_str()));  // PQexec runs several statements
    check(result.get(), sql);
  }

  void begin() override { query("BEGIN", {}); }
  void lock_schema() override { query("SELECT pg_advisory_xact_lock(?)", {schema_lock_key}); }
  const std::string& name() const override { return name_; }

 private:
  struct Finish {
    void operator()(PGconn* connection) const { PQfinish(connection); }
  };
  struct Clear {
    void operator()(PGresult* result) const { PQclear(result); }
  };
  using Result = std::unique_ptr<PGresult, Clear>;

  static SqlValue read_value(const PGresult* result, int row, int column) {
    if (PQgetisnull(result, row, column)) return std::monostate{};
    const char* text = PQgetvalue(result, row, column);
    switch (PQftype(result, column)) {
      case int2_oid: case int4_oid: case int8_oid: return static_cast<int64_t>(std::stoll(text));
      case float4_oid: case float8_oid: case numeric_oid: return std::stod(text);
      default: return std::string(text, static_cast<size_t>(PQgetlength(result, row, column)));
    }
  }

  // libpq's message on one line: the CLI prints exactly one error line.
  std::string error_message() const {
    static const std::regex line_breaks(R"(\s*\n\s*)");
    std::string message = std::regex_replace(std::string(PQerrorMessage(connection_.get())), line_breaks, " ");
    while (!message.empty() && message.back() == ' ') message.pop_back();
    return message;
  }

  void check(const PGresult* result, const std::string& sql) const {
    const ExecStatusType status = PQresultStatus(result);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
      fail_file(name_, "PostgreSQL: {} (in: {})", error_message(), sql.substr(0, sql.find_first_of("(\n")));
  }

  std::string name_;
  std::unique_ptr<PGconn, Finish> connection_;
};

}  // namespace

std::unique_ptr<Connection> open_postgres(const std::string& url) {
  return std::make_unique<PostgresConnection>(url);
}

}  // namespace cpullm
