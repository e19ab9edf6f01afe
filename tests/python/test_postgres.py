"""The results database on a real PostgreSQL server, started and stopped here.

initdb into a temporary folder, the server run as the unprivileged `postgres` user when this
runs as root, listening on a free loopback port; then every API test of test_results_db (the
Backends/*/postgres cases, which exist only when CPULLM_TEST_POSTGRES_URL is set) and the
`cpullm db` checks (results_db_checks.py) against it; then a role with a password, reached
through PGPASSWORD, PGPASSFILE and a conninfo string's password= by bench, db and report, the
password shown nowhere (stdout, stderr, the stored command, the HTML). Skips only when the
PostgreSQL server binaries are absent: scripts/setup installs them.
"""
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile

import pytest

from cli_checks import run, write_tiny_model
from conftest import from_env
from results_db_checks import RUN, check_db_cli, check_db_import, import_runs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A role that must give its password (every other connection is trusted).
SECRET_USER, SECRET = "secretuser", "s3cret-pw"


class Server:
    """A throwaway PostgreSQL cluster: trust authentication but for SECRET_USER, loopback only,
    fsync off (the tests kill processes, never the machine)."""

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
        hba = os.path.join(self.data, "pg_hba.conf")
        with open(hba) as f:
            rules = f.read()
        with open(hba, "w") as f:  # the first matching line wins
            f.write(f"host all {SECRET_USER} 127.0.0.1/32 scram-sha-256\n" + rules)
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self.tool("pg_ctl", "-D", self.data, "-l", os.path.join(self.root, "server.log"), "-o", options, "-w", "-t", "60",
                  "start")
        self.sql(f"CREATE ROLE {SECRET_USER} LOGIN SUPERUSER PASSWORD '{SECRET}'")

    def sql(self, statements):
        self.tool("psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url, "-c", statements)

    def stop(self):
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            self.tool("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def test_api_tests_on_postgres(ctx):
    proc = subprocess.run([ctx.api_tests, "--gtest_filter=Backends/*/postgres"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "CPULLM_TEST_POSTGRES_URL": ctx.server.url})
    passed = re.search(r"\[  PASSED  \] (\d+) test", proc.stdout)
    assert proc.returncode == 0 and passed and int(passed.group(1)) >= 10, proc.stdout[-4000:] + proc.stderr
    print(f"{passed.group(1)} API tests passed on PostgreSQL")


def test_db_command_on_postgres(ctx):
    ctx.server.sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    out = run([ctx.cpullm, "db", "--db", ctx.server.url, "runs"]).stdout  # creates the schema: no runs yet
    assert "no runs in" in out, out
    import_runs(ctx.cpullm, ctx.server.url, RUN)
    check_db_cli(ctx.cpullm, ctx.server.url)
    check_db_import(ctx.cpullm, ctx.server.url)


def cpullm(ctx, *args, **env):
    """cpullm with PGPASSWORD and PGPASSFILE as given here only; stdout and stderr must not hold the password."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PGPASSWORD", "PGPASSFILE")}
    proc = subprocess.run([ctx.cpullm, *args], capture_output=True, text=True, timeout=120, env={**clean, **env})
    assert SECRET not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc


def test_password_from_environment_passfile_and_conninfo(ctx):
    ctx.server.sql("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    tiny = os.path.join(ctx.workdir, "tiny.gguf")
    write_tiny_model(ctx.cpullm, tiny)
    conninfo = f"host=127.0.0.1 port={ctx.server.port} dbname=postgres user={SECRET_USER}"
    bench = ["bench", "-m", tiny, "-p", "0", "-n", "2", "-r", "1", "-o", "json", "--no-regions", "--db"]
    refused = cpullm(ctx, *bench, conninfo)
    assert refused.returncode == 1 and refused.stderr.startswith("cpullm: error: ") and "password" in refused.stderr, refused.stderr
    proc = cpullm(ctx, *bench, conninfo, PGPASSWORD=SECRET)
    assert proc.returncode == 0, proc.stderr
    passfile = os.path.join(ctx.workdir, "pgpass")
    with open(os.open(passfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(f"127.0.0.1:{ctx.server.port}:postgres:{SECRET_USER}:{SECRET}\n")
    proc = cpullm(ctx, *bench, conninfo + f" password={SECRET}")
    assert proc.returncode == 0, proc.stderr
    runs = cpullm(ctx, "db", "--db", conninfo, "runs", PGPASSFILE=passfile)
    assert runs.returncode == 0 and runs.stdout.count("| bench ") == 2 and "password=***" in runs.stdout, runs.stdout
    # report (Python, psycopg2): the password from the string, the environment or the file.
    for name, location, env in (("string", conninfo + f" password={SECRET}", {}),
                                ("url", f"postgresql://{SECRET_USER}:{SECRET}@127.0.0.1:{ctx.server.port}/postgres", {}),
                                ("env", conninfo, {"PGPASSWORD": SECRET}), ("file", conninfo, {"PGPASSFILE": passfile})):
        html = os.path.join(ctx.workdir, f"report-{name}.html")
        proc = cpullm(ctx, "report", "--db", location, "-o", html, **env)
        assert proc.returncode == 0, proc.stderr
        with open(html) as f:
            text = f.read()
        assert SECRET not in text and "2 runs" in text, name
    wrong = cpullm(ctx, "report", "--db", conninfo + " password=wrong-pw", "-o", os.path.join(ctx.workdir, "never.html"))
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1 and "wrong-pw" not in wrong.stderr, wrong.stderr
    assert wrong.stderr.startswith("cpullm: error: host=127.0.0.1") and "password=***" in wrong.stderr, wrong.stderr


@pytest.fixture(scope="module")
def ctx(ctx):
    bin_dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not bin_dirs:
        pytest.skip("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/pg_ctl); scripts/setup installs the "
                    "postgresql package")
    ctx.api_tests = from_env("CPULLM_RESULTS_DB_TESTS")
    ctx.server = Server(os.path.dirname(bin_dirs[-1]))
    try:
        ctx.server.start()
    except subprocess.CalledProcessError as e:
        ctx.server.stop()
        pytest.fail(f"starting PostgreSQL: {' '.join(e.cmd)}: {e.stdout}{e.stderr}")
    print(f"PostgreSQL {os.path.basename(os.path.dirname(ctx.server.bin_dir))} at {ctx.server.url}")
    yield ctx
    ctx.server.stop()
