"""cpullm installed and moved: the engine and the binary alone, built with -DBUILD_TESTING=OFF
-DCPULLM_POSTGRES=OFF -DCPULLM_MPI=OFF in their own tree (CPULLM_MINIMAL_BUILD, beside the test
build so that ccache serves its objects), installed with `cmake --install` into a prefix, the tree
removed and the prefix moved elsewhere. From the moved copy, with no source tree in reach: `tune`
plans for a hardware profile, `bench --db` stores a run and `report` renders it, `topo` reads a
profile, and a postgresql:// URL is refused with an error that says why."""
import os
import shutil
import subprocess

import pytest

from conftest import from_env


def sh(*command, **kw):
    proc = subprocess.run(command, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{' '.join(command)} exited {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(ctx):
    """(the moved prefix, the minimal tree's CMakeCache.txt)."""
    tree, source = from_env("CPULLM_MINIMAL_BUILD"), from_env("CPULLM_SOURCE_DIR")
    shutil.rmtree(tree, ignore_errors=True)
    sh("cmake", "-S", source, "-B", tree, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_TESTING=OFF",
       "-DCPULLM_POSTGRES=OFF", "-DCPULLM_MPI=OFF")
    sh("cmake", "--build", tree, "--target", "cpullm", timeout=1700)
    prefix = os.path.join(ctx.workdir, "prefix")
    sh("cmake", "--install", tree, "--prefix", prefix)
    with open(os.path.join(tree, "CMakeCache.txt")) as f:
        cache = f.read()
    shutil.rmtree(tree)
    moved = os.path.join(ctx.workdir, "moved")
    os.rename(prefix, moved)
    return moved, cache


def cpullm(installed, *args, expect_ok=True, env_extra=None):
    """The moved copy's binary, run from the work folder with none of the variables that would
    point it at the source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CPULLM_DATA_DIR", "CPULLM_BIN", "CPULLM_PROFILES")}
    env.update(env_extra or {})
    binary = os.path.join(installed[0], "bin", "cpullm")
    proc = subprocess.run([binary, *args], capture_output=True, text=True, env=env, cwd=os.path.dirname(installed[0]),
                          timeout=300)
    if expect_ok:
        assert proc.returncode == 0, f"cpullm {' '.join(args)} exited {proc.returncode}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def tiny_model(installed):
    path = os.path.join(os.path.dirname(installed[0]), "tiny.gguf")
    cpullm(installed, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "128", "--heads", "4",
           "--kv-heads", "2", "--vocab", "1000", "--ctx", "256", "-o", path)
    return path


def test_minimal_build_needs_no_test_or_database_server_libraries(installed):
    cache = installed[1]
    for package in ("GTest_DIR", "benchmark_DIR"):
        assert f"{package}:PATH=" not in cache or f"{package}:PATH={package}-NOTFOUND" in cache, f"{package} was looked for"
    assert "CPULLM_POSTGRES:BOOL=OFF" in cache and "CPULLM_MPI:BOOL=OFF" in cache and "BUILD_TESTING:BOOL=OFF" in cache


def test_installed_layout(installed):
    prefix = installed[0]
    for relative in ("bin/cpullm", "share/cpullm/tuning/__init__.py", "share/cpullm/tuning/tune.py",
                     "share/cpullm/tuning/profiles/e5-4627v4.json", "share/cpullm/tuning/spaces/host.toml",
                     "share/cpullm/reports/__init__.py", "share/cpullm/reports/template.html",
                     "share/cpullm/reports/data/gpus.json", "share/cpullm/suites/workloads.json",
                     "share/cpullm/harness/results/schema.sql"):
        assert os.path.isfile(os.path.join(prefix, relative)), relative


def test_tune_plans_from_the_moved_copy(installed, tiny_model):
    out = cpullm(installed, "tune", "--hardware", "e5-4627v4", "-m", tiny_model).stdout
    assert "is not this machine: planning only" in out, out


def test_topo_reads_the_installed_profile(installed):
    out = cpullm(installed, "topo", "--hardware", "e5-4627v4", "--json").stdout
    assert os.path.join(installed[0], "share", "cpullm", "tuning", "profiles", "e5-4627v4.json") in out, out


def test_bench_stores_and_report_renders_from_the_moved_copy(installed, tiny_model):
    db = os.path.join(os.path.dirname(installed[0]), "results.db")
    cpullm(installed, "bench", "-m", tiny_model, "-p", "8", "-n", "4", "-r", "1", "--db", db)
    page = os.path.join(os.path.dirname(installed[0]), "report.html")
    cpullm(installed, "report", "--db", db, "-o", page)
    with open(page) as f:
        text = f.read()
    assert '<section id="latency">' in text and "cpullm bench -m" in text


def test_data_dir_variable_overrides_the_binary_location(installed):
    empty = os.path.join(os.path.dirname(installed[0]), "empty")
    os.makedirs(empty, exist_ok=True)
    proc = cpullm(installed, "tune", "--help", expect_ok=False, env_extra={"CPULLM_DATA_DIR": empty})
    assert proc.returncode == 1 and f"cpullm: error: {empty}/tuning/tune.py: not found" in proc.stderr, proc.stderr


def test_postgres_url_refused_without_the_backend(installed):
    proc = cpullm(installed, "db", "--db", "postgresql://u:secret@127.0.0.1:1/r", "runs", expect_ok=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == ("cpullm: error: postgresql://u:***@127.0.0.1:1/r: this cpullm was built without PostgreSQL "
                                   "(configure with -DCPULLM_POSTGRES=ON; needs libpq-dev)"), proc.stderr
