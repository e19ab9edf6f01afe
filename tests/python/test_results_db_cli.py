#!/usr/bin/python3
"""End-to-end checks of `cpullm db` on an SQLite results database.

The database is made here the way any Python reader could: sqlite3 runs harness/results/schema.sql
as it stands, then the rows of one run go in with plain SQL. `cpullm db` must list the run, show
its point as a table and export it as JSON under the schema's column names, and refuse an absent
file, an unknown run and a missing run id with one 'cpullm: error:' line; a libpq conninfo
string is taken as PostgreSQL, its password masked. test_postgres.py runs the same checks
against a PostgreSQL server.

Usage: test_results_db_cli.py --cpullm BIN --workdir DIR
"""
import os
import sqlite3
import subprocess
import sys

from cli_checks import check, expect_error, parse_context, run_checks
from results_db_checks import ROWS, check_db_cli

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness", "results", "schema.sql")


def sqlite_database(path):
    """A database at schema.sql's latest version holding ROWS, written without cpullm."""
    with open(SCHEMA) as f:
        schema = f.read()
    versions = sum(1 for line in schema.splitlines() if line.startswith("-- migration "))
    with sqlite3.connect(path) as db:
        db.executescript(schema)
        db.executemany("INSERT INTO schema_version (version) VALUES (?)", [(v,) for v in range(1, versions + 1)])
        db.executescript(ROWS)
    return path


@check
def db_on_sqlite(ctx):
    check_db_cli(ctx.cpullm, sqlite_database(os.path.join(ctx.workdir, "results.db")))


@check
def absent_file_is_an_error_not_a_new_database(ctx):
    absent = os.path.join(ctx.workdir, "absent.db")
    expect_error([ctx.cpullm, "db", "--db", absent, "runs"], absent, "no such results database")
    assert not os.path.exists(absent)


@check
def unreachable_server_is_an_error(ctx):
    expect_error([ctx.cpullm, "db", "--db", "postgresql://cpullm:s3cret@127.0.0.1:1/results", "runs"],
                 "postgresql://cpullm:***@127.0.0.1:1/results: cannot connect to PostgreSQL")


@check
def conninfo_names_a_server_and_its_password_is_masked(ctx):
    """A libpq conninfo string is PostgreSQL, never an SQLite file whose name would hold the
    password; every form of the password is masked in the error."""
    folder = os.path.join(ctx.workdir, "conninfo")
    os.makedirs(folder)
    for location, shown in (("host=127.0.0.1 port=1 dbname=results user=cpullm password=s3cret", "password=***"),
                            ("host=127.0.0.1 port=1 password='s3 cret' dbname=results", "password=***"),
                            ("postgresql://cpullm@127.0.0.1:1/results?password=s3cret", "?password=***")):
        proc = subprocess.run([ctx.cpullm, "db", "--db", location, "runs"], capture_output=True, text=True, cwd=folder)
        assert proc.returncode == 1 and proc.stderr.startswith("cpullm: error: "), proc.stderr
        assert "cannot connect to PostgreSQL" in proc.stderr and shown in proc.stderr, proc.stderr
        assert "s3" not in proc.stderr and "cret" not in proc.stderr, proc.stderr
    # libpq's own complaint about a malformed string would quote a piece of the password.
    proc = subprocess.run([ctx.cpullm, "db", "--db", "host=127.0.0.1 password=s3 cret", "runs"], capture_output=True,
                          text=True, cwd=folder)
    assert proc.returncode == 1 and "not a PostgreSQL URL or connection string" in proc.stderr, proc.stderr
    assert "cret" not in proc.stderr, proc.stderr
    assert os.listdir(folder) == [], os.listdir(folder)
    # An SQLite file whose name has "=" in it is written ./NAME.
    expect_error([ctx.cpullm, "db", "--db", "./a=b.db", "runs"], "./a=b.db", "no such results database")


def main():
    ctx = parse_context(__doc__)
    return run_checks(ctx)


if __name__ == "__main__":
    sys.exit(main())
