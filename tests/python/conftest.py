"""What the Python tests get from CTest through the environment (tests/CMakeLists.txt runs each
file as one CTest test, `python3 -m pytest FILE`):
  CPULLM_BIN             the cpullm binary under test (tuning/ and reports/, imported by a test,
                         ask it for the format registry and costs: tuning/registry.py)
  CPULLM_SHARED_MODELS   the shared test models (checks that need one skip where it is absent)
  CPULLM_TEST_WORK       the file's work folder, emptied before its first test
and, for the files that need them, CPULLM_BENCH_KERNELS (bench_kernels), CPULLM_RESULTS_DB_TESTS
(test_results_db), CPULLM_NUMA_MPI_TESTS (test_numa_mpi) and CPULLM_POSTGRES (ON or OFF: whether the
build has the PostgreSQL backend). The `ctx` fixture holds them, one per file; a file adds what its
checks share by overriding `ctx`."""
import os
import shutil
import types

import pytest


def from_env(name):
    """The variable's value; the test errors (not skips) where CTest did not set it."""
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run the Python tests through ctest (tests/CMakeLists.txt sets it)")
    return value


@pytest.fixture(scope="module")
def ctx():
    workdir = from_env("CPULLM_TEST_WORK")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    cpullm = os.environ.get("CPULLM_BIN")
    return types.SimpleNamespace(cpullm=os.path.abspath(cpullm) if cpullm else None, workdir=workdir,
                                 shared=os.environ.get("CPULLM_SHARED_MODELS", ""))


def pytest_sessionfinish(session, exitstatus):
    """Every test skipped (no server, no MPI, no shared model): exit 77, CTest's SKIP_RETURN_CODE,
    so that ctest reports the file as skipped rather than passed."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if exitstatus == 0 and reporter and reporter.stats.get("skipped") and not reporter.stats.get("passed"):
        session.exitstatus = 77
