// The two database backends behind ResultsDb, one small interface: SQL with ? placeholders in,
// typed values out. SQLite for files, PostgreSQL (libpq) for postgresql:// URLs and conninfo strings.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace cpullm {

using SqlValue = std::variant<std::monostate, int64_t, double, std::string>;  // NULL, INTEGER, REAL, TEXT
using SqlRow = std::vector<SqlValue>;

class Connection {
 public:
  virtual ~Connection() = default;

  // One statement with ? placeholders; the rows it returns (INSERT ... RETURNING id included).
  virtual std::vector<SqlRow> query(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // Several statements without parameters, in SQLite's dialect (the schema's migrations):
  // PostgreSQL translates the types first.
  virtual void execute_script(const std::string& sql) = 0;
  // Starts a write transaction. SQLite takes the write lock at once (BEGIN IMMEDIATE) so two
  // writers wait on the busy timeout instead of failing when one upgrades a read lock.
  virtual void begin() = 0;
  // Inside a transaction: holds off every other connection's schema migration until commit
  // (SQLite: the write lock begin() took already does; PostgreSQL: an advisory lock), so two
  // servers opening a new database at once do not both create it.
  virtual void lock_schema() = 0;
  // The location as it may be printed: the path, or the URL with any password masked.
  virtual const std::string& name() const = 0;

  void commit() { query("COMMIT"); }
  void rollback() { query("ROLLBACK"); }
};

// A write transaction that rolls back unless committed, so an exception leaves nothing behind.
class Transaction {
 public:
  explicit Transaction(Connection& connection) : connection_(connection) { connection_.begin(); }
  ~Transaction() {
    if (!committed_) try { connection_.rollback(); } catch (...) {}  // the error in flight matters more
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit() {
    connection_.commit();
    committed_ = true;
  }

 private:
  Connection& connection_;
  bool committed_ = false;
};

// `text` with every PostgreSQL password in it masked as ***: a URL's user:PASSWORD@ and its
// ?password= parameter, a conninfo string's password=VALUE (quoted or not). For error messages
// and the command lines stored in runs; reports/resultsdb.py masks with the same patterns.
std::string without_password(const std::string& text);

// True for PostgreSQL's two forms of a location: a postgresql:// or postgres:// URL, and a libpq
// conninfo string, which starts with a keyword and "=" (`host=... dbname=...`; an SQLite file
// named so is written ./NAME). The password may also come from PGPASSWORD or PGPASSFILE, which
// libpq reads itself.
bool is_postgres(const std::string& location);

// WAL, synchronous=FULL (a committed point survives a crash of the machine too), a 30 s busy
// timeout, foreign keys on. create=false: an absent file is an Error.
std::unique_ptr<Connection> open_sqlite(const std::string& path, bool create);
std::unique_ptr<Connection> open_postgres(const std::string& url);

// Either of the above, by the location's form.
std::unique_ptr<Connection> open_connection(const std::string& location, bool create);

}  // namespace cpullm
