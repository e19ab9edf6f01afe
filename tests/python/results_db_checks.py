"""What the `cpullm db` tests share on both backends (test_results_db_cli.py for SQLite,
test_postgres.py for PostgreSQL): the rows of one run, and the checks of `cpullm db` on a
database holding exactly those rows."""
import json

from cli_checks import expect_error, run

# One run with one point, two repetitions and a region, in SQL both SQLite and PostgreSQL accept.
ROWS = """
INSERT INTO runs (kind, command, started_at, git_commit, host, cpu_model, cores, sockets, numa_nodes,
                  memory_bytes, kernel, isa_level, governor, fingerprint)
  VALUES ('bench', 'cpullm bench -m tiny.gguf -p 64', '2026-11-30T10:00:00Z', 'abc123-dirty', 'bench-01',
          'Test CPU', 40, 4, 4, 274877906944, '6.1.0', 'avx2', 'performance', '0123456789abcdef');
INSERT INTO results (run_id, case_name, test, format, isa, n_threads, n_prompt, n_gen, config_json,
                     avg_ns, stddev_ns, avg_ts, stddev_ts, peak_rss_bytes, placement, test_time)
  VALUES (1, 'pp64/f16/t2', 'pp', 'f16', 'avx512', 2, 64, 0, '{"threads": 2}',
          100000000, 1000000, 640.5, 6.25, 612368384, 'first-touch', '2026-11-30T10:00:01Z');
INSERT INTO samples (result_id, repetition, ns, ts) VALUES (1, 0, 99000000, 646.4), (1, 1, 101000000, 633.7);
INSERT INTO regions (result_id, name, calls, seconds, flops, bytes) VALUES (1, 'q_proj', 4, 0.01, 1e9, 2e8);
"""


def check_db_cli(cpullm, location):
    """`cpullm db` against a database holding ROWS (and nothing else)."""
    db = [cpullm, "db", "--db", location]
    runs = run(db + ["runs"]).stdout
    for fragment in ["| id ", "| bench ", "cpullm bench -m tiny.gguf -p 64", "abc123-dirty", "bench-01"]:
        assert fragment in runs, f"{fragment!r} not in:\n{runs}"

    table = run(db + ["results", "1"]).stdout
    for fragment in ["run 1 (bench, unfinished): cpullm bench -m tiny.gguf -p 64", "pp64/f16/t2", "640.50 ± 6.25",
                     "584.00 MiB"]:
        assert fragment in table, f"{fragment!r} not in:\n{table}"

    exported = json.loads(run(db + ["results", "1", "--export-json"]).stdout)
    assert exported["run"]["memory_bytes"] == 274877906944 and exported["run"]["finished_at"] is None, exported["run"]
    assert exported["run"]["points"] == 1
    [point] = exported["results"]
    assert point["case_name"] == "pp64/f16/t2" and point["avg_ts"] == 640.5 and point["placement"] == "first-touch", point
    assert point["energy_j"] is None and point["n_gen"] == 0, point
    assert [s["ts"] for s in point["samples"]] == [646.4, 633.7], point["samples"]
    assert point["regions"] == [{"name": "q_proj", "calls": 4, "seconds": 0.01, "flops": 1e9, "bytes": 2e8,
                                 "counters_json": None}], point["regions"]
    assert json.loads(run(db + ["runs", "--export-json"]).stdout)[0]["command"] == "cpullm bench -m tiny.gguf -p 64"

    expect_error(db + ["results", "99"], "no run 99")
    expect_error(db + ["results"], "which run?")
