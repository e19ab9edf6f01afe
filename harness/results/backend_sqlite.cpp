// The SQLite backend: one file, write-ahead log so readers never block the writer and a
// killed writer loses only its open transaction.
#include <sqlite3.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "harness/results/backend.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr int busy_timeout_ms = 30000;  // parallel sweeps share one file: wait for the writer

class SqliteConnection final : public Connection {
 public:
  SqliteConnection(const std::string& path, bool create) : path_(path) {
    struct stat info {};
    if (!create && stat(path.c_str(), &info) != 0) fail_file(path, "no such results database");
    const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    sqlite3* db = nullptr;
    const int opened = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    handle_.reset(db);  // closed by the destructor, or here when the constructor throws
    if (opened != SQLITE_OK) fail_file(path, "cannot open as an SQLite database: {}", db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_busy_timeout(handle_.get(), busy_timeout_ms);
    // The first statement reads the file's header: a file that is not SQLite fails here.
    // Switching a new file to WAL needs it alone for a moment, and SQLite answers BUSY at once
    // there instead of calling the busy handler: processes opening one new file together retry.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
    int wal = SQLITE_OK;
    while (((wal = sqlite3_exec(handle_.get(), "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr)) & 0xff) ==
               SQLITE_BUSY &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (wal != SQLITE_OK) fail_file(path, "SQLite: {}", sqlite3_errmsg(handle_.get()));
    execute_script("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;");
  }

  std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params) override {
    sqlite3_stmt* statement = nullptr;
    check(sqlite3_prepare_v2(handle_.get(), sql.c_str(), static_cast<int>(sql.size()), &statement, nullptr), sql);
    std::vector<SqlRow> rows;
    try {
      for (size_t i = 0; i < params.size(); ++i) check(bind(statement, static_cast<int>(i) + 1, params[i]), sql);
      int step;
      while ((step = sqlite3_step(statement)) == SQLITE_ROW) rows.push_back(read_row(statement));
      check(step, sql);
    } catch (...) {
      sqlite3_finalize(statement);
      throw;
    }
    sqlite3_finalize(statement);
    return rows;
  }

  void execute_script(const std::string& sql) override {
    char* message = nullptr;
    if (sqlite3_exec(handle_.get(), sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      const std::string text = message ? message : sqlite3_errmsg(handle_.get());
      sqlite3_free(message);
      fail_file(path_, "SQLite: {}", text);
    }
  }

  void begin() override { query("BEGIN IMMEDIATE", {}); }
  void lock_schema() override {}  // BEGIN IMMEDIATE holds the only write lock already
  const std::string& name() const override { return path_; }

 private:
  static int bind(sqlite3_stmt* statement, int index, const SqlValue& value) {
    if (const auto* i = std::get_if<int64_t>(&value)) return sqlite3_bind_int64(statement, index, *i);
    if (const auto* d = std::get_if<double>(&value)) return sqlite3_bind_double(statement, index, *d);
    if (const auto* s = std::get_if<std::string>(&value))
      return sqlite3_bind_text(statement, index, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
    return sqlite3_bind_null(statement, index);
  }

  static SqlRow read_row(sqlite3_stmt* statement) {
    SqlRow row;
    for (int column = 0; column < sqlite3_column_count(statement); ++column) {
      switch (sqlite3_column_type(statement, column)) {
        case SQLITE_INTEGER: row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(statement, column))); break;
        case SQLITE_FLOAT: row.emplace_back(sqlite3_column_double(statement, column)); break;
        case SQLITE_NULL: row.emplace_back(std::monostate{}); break;
        default: {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, column));
          row.emplace_back(std::string(text, static_cast<size_t>(sqlite3_column_bytes(statement, column))));
        }
      }
    }
    return row;
  }

  void check(int code, const std::string& sql) {
    if (code != SQLITE_OK && code != SQLITE_DONE && code != SQLITE_ROW)
      fail_file(path_, "SQLite: {} (in: {})", sqlite3_errmsg(handle_.get()), sql.substr(0, sql.find_first_of("(\n")));
  }

  struct Close {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
  };
  std::string path_;
  std::unique_ptr<sqlite3, Close> handle_;
};

}  // namespace

std::unique_ptr<Connection> open_sqlite(const std::string& path, bool create) {
  return std::make_unique<SqliteConnection>(path, create);
}

}  // namespace cpullm
