#!/usr/bin/python3
"""The results database on a real PostgreSQL server, started and stopped here.

initdb into a temporary folder, the server run as the unprivileged `postgres` user when this
runs as root, listening on a free loopback port; then every API test of test_results_db (the
Backends/*/postgres cases, which exist only when CPULLM_TEST_POSTGRES_URL is set) and the
`cpullm db` checks (results_db_checks.py) against it. Skips (exit 77) only when the
PostgreSQL server binaries are absent: scripts/setup installs them.

Usage: test_postgres.py --cpullm BIN --api-tests BIN --workdir DIR
"""
import argparse
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile

from cli_checks import check, run, run_checks
from results_db_checks import ROWS, check_db_cli

SKIP = 77


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A throwaway PostgreSQL cluster: trust authentication, loopback only, fsync off (the tests
    kill processes, never the machine)."""

    def __init__(self, bin_dir):
        self.bin_dir = bin_dir
        self.root = tempfile.mkdtemp(prefix="cpullm-pg-")
        self.as_user = []
        if os.geteuid() == 0:  # the server refuses to run as root
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.root, "data")
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def tool(self, name, *args, check=True):
        return subprocess.run(self.as_user + [os.path.join(self.bin_dir, name), *args], capture_output=True, text=True,
                              timeout=120, check=check)

    def start(self):
        self.tool("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.tool("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "server.log"), "-o", options, "-w", "-t", "60",
                  "start")

    def sql(self, statements):
        self.tool("psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url, "-c", statements)

    def stop(self):
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self.tool("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@check
def api_tests_on_postgres(ctx):
    proc = subprocess.run([ctx.api_tests, "--gtest_filter=Backends/*/postgres"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "CPULLM_TEST_POSTGRES_URL": ctx.server.url})
    passed = re.search(r"\[  PASSED  \] (\d+) test", proc.stdout)
    assert proc.returncode == 0 and passed and int(passed.group(1)) >= 10, proc.stdout[-4000:] + proc.stderr
    return f"{passed.group(1)} API tests passed on PostgreSQL"


@check
def db_command_on_postgres(ctx):
    ctx.server.sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    out = run([ctx.cpullm, "db", "--db", ctx.server.url, "runs"]).stdout  # creates the schema: no runs yet
    assert "no runs in" in out, out
    ctx.server.sql(ROWS)
    check_db_cli(ctx.cpullm, ctx.server.url)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpullm", required=True)
    parser.add_argument("--api-tests", required=True)
    ctx = parser.parse_args()
    bin_dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not bin_dirs:
        print("SKIP: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl); scripts/setup installs the "
              "postgresql package")
        return SKIP
    ctx.server = Server(os.path.dirname(bin_dirs[-1]))
    try:
        ctx.server.start()
        print(f"PostgreSQL {os.path.basename(os.path.dirname(ctx.server.bin_dir))} at {ctx.server.url}")
        return run_checks(ctx)
    except subprocess.CalledProcessError as e:
        print(f"FAIL starting PostgreSQL: {' '.join(e.cmd)}: {e.stdout}{e.stderr}")
        return 1
    finally:
        ctx.server.stop()


if __name__ == "__main__":
    sys.exit(main())
