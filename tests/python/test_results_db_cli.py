"""End-to-end checks of `cpullm db` on an SQLite results database.

The database is made by `cpullm db import` from the rows of one run. `cpullm db` must list the
run, show its point as a table and export it as JSON under the schema's column names, import that
export again, and refuse an absent file, an unknown run, a missing run id and a bad document with
one 'cpullm: error:' line; a libpq conninfo string is taken as PostgreSQL, its password masked.
test_postgres.py runs the same checks against a PostgreSQL server.
"""
import os
import subprocess

import pytest

from cli_checks import expect_error
from results_db_checks import RUN, check_db_cli, check_db_import, import_runs


@pytest.fixture(scope="module")
def database(ctx):
    path = os.path.join(ctx.workdir, "results.db")
    import_runs(ctx.cpullm, path, RUN)
    return path


def test_db_on_sqlite(ctx, database):
    check_db_cli(ctx.cpullm, database)


def test_db_import_on_sqlite(ctx, database):
    check_db_import(ctx.cpullm, database)


def test_absent_file_is_an_error_not_a_new_database(ctx):
    absent = os.path.join(ctx.workdir, "absent.db")
    expect_error([ctx.cpullm, "db", "--db", absent, "runs"], absent, "no such results database")
    assert not os.path.exists(absent)


def test_unreachable_server_is_an_error(ctx):
    url = "postgresql://cpullm:s3cret@127.0.0.1:1/results"
    if os.environ.get("CPULLM_POSTGRES") == "OFF":
        expect_error([ctx.cpullm, "db", "--db", url, "runs"], "postgresql://cpullm:***@127.0.0.1:1/results: this cpullm "
                     "was built without PostgreSQL")
    else:
        expect_error([ctx.cpullm, "db", "--db", url, "runs"], "postgresql://cpullm:***@127.0.0.1:1/results: cannot connect "
                     "to PostgreSQL")


def test_conninfo_names_a_server_and_its_password_is_masked(ctx):
    """A libpq conninfo string is PostgreSQL, never an SQLite file whose name would hold the
    password; every form of the password is masked in the error."""
    without_postgres = os.environ.get("CPULLM_POSTGRES") == "OFF"
    refusal = "this cpullm was built without PostgreSQL" if without_postgres else "cannot connect to PostgreSQL"
    folder = os.path.join(ctx.workdir, "conninfo")
    os.makedirs(folder)
    for location, shown in (("host=127.0.0.1 port=1 dbname=results user=cpullm password=s3cret", "password=***"),
                            ("host=127.0.0.1 port=1 password='s3 cret' dbname=results", "password=***"),
                            ("postgresql://cpullm@127.0.0.1:1/results?password=s3cret", "?password=***")):
        proc = subprocess.run([ctx.cpullm, "db", "--db", location, "runs"], capture_output=True, text=True, cwd=folder)
        assert proc.returncode == 1 and proc.stderr.startswith("cpullm: error: "), proc.stderr
        assert refusal in proc.stderr and shown in proc.stderr, proc.stderr
        assert "s3" not in proc.stderr and "cret" not in proc.stderr, proc.stderr
    if not without_postgres:
        # libpq's own complaint about a malformed string would quote a piece of the password.
        proc = subprocess.run([ctx.cpullm, "db", "--db", "host=127.0.0.1 password=s3 cret", "runs"], capture_output=True,
                              text=True, cwd=folder)
        assert proc.returncode == 1 and "not a PostgreSQL URL or connection string" in proc.stderr, proc.stderr
        assert "cret" not in proc.stderr, proc.stderr
    assert os.listdir(folder) == [], os.listdir(folder)
    # An SQLite file whose name has "=" in it is written ./NAME.
    expect_error([ctx.cpullm, "db", "--db", "./a=b.db", "runs"], "./a=b.db", "no such results database")
