// A build without the PostgreSQL backend (-DCPULLM_POSTGRES=OFF): a postgresql:// URL or conninfo
// string is refused with an error that says why, never taken for an SQLite file name.
#include "harness/results/backend.hpp"
#include "engine/util/error.hpp"

namespace cpullm {

std::unique_ptr<Connection> open_postgres(const std::string& url) {
  fail_file(without_password(url), "this cpullm was built without PostgreSQL (configure with -DCPULLM_POSTGRES=ON; needs libpq-dev)");
}

}  // namespace cpullm
