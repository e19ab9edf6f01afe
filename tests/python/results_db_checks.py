"""What the `cpullm db` tests share on both backends (test_results_db_cli.py for SQLite,
test_postgres.py for PostgreSQL): the rows of one run, written through `cpullm db import` (the
database's one writer), and the checks of `cpullm db` on a database holding exactly those rows."""
import json
import socket
import subprocess

from cli_checks import expect_error, run

# One run with one point, two repetitions and a region, under the schema's column names.
RUN = {
    "run": {"kind": "bench", "command": "cpullm bench -m tiny.gguf -p 64", "started_at": "2026-11-30T10:00:00Z",
            "git_commit": "abc123-dirty", "host": "bench-01", "cpu_model": "Test CPU", "cores": 40, "sockets": 4,
            "numa_nodes": 4, "memory_bytes": 274877906944, "kernel": "6.1.0", "isa_level": "avx2",
            "governor": "performance", "fingerprint": "0123456789abcdef"},
    "results": [{"case_name": "pp64/f16/t2", "test": "pp", "format": "f16", "isa": "avx512", "n_threads": 2, "n_prompt": 64,
                 "n_gen": 0, "config_json": {"threads": 2}, "avg_ns": 100000000, "stddev_ns": 1000000, "avg_ts": 640.5,
                 "stddev_ts": 6.25, "peak_rss_bytes": 612368384, "placement": "first-touch",
                 "test_time": "2026-11-30T10:00:01Z",
                 "samples": [{"repetition": 0, "ns": 99000000, "ts": 646.4}, {"repetition": 1, "ns": 101000000, "ts": 633.7}],
                 "regions": [{"name": "q_proj", "calls": 4, "seconds": 0.01, "flops": 1e9, "bytes": 2e8}]}],
}


def import_runs(cpullm, location, documents, *flags):
    """`cpullm db import` of one document or a list of them; returns its stdout."""
    proc = subprocess.run([cpullm, "db", "--db", location, "import", *flags, "-"], input=json.dumps(documents),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


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
    expect_error(db + ["results", "one"], "a run id is a number")


def check_db_import(cpullm, location):
    """`cpullm db import` on a database holding RUN as run 1: the export of run 1 goes back in as
    run 2 with the same rows; --resume adds to an unfinished run only the cases it lacks and
    finishes it; bad documents are one clear error and write nothing."""
    db = [cpullm, "db", "--db", location]
    exported = json.loads(run(db + ["results", "1", "--export-json"]).stdout)
    assert "run 2 (bench): 1 points imported, 0 already there" in import_runs(cpullm, location, exported)
    again = json.loads(run(db + ["results", "2", "--export-json"]).stdout)
    drop_ids = lambda doc: [{k: v for k, v in r.items() if k not in ("id", "run_id")} for r in doc["results"]]
    assert drop_ids(again) == drop_ids(exported), (again, exported)
    assert {k: v for k, v in again["run"].items() if k != "id"} == {k: v for k, v in exported["run"].items() if k != "id"}

    sweep = {"run": {"kind": "sweep", "command": "cpullm sweep -m m.gguf"},
             "results": [dict(RUN["results"][0], case_name="a"), dict(RUN["results"][0], case_name="b")]}
    assert "run 3 (sweep): 2 points imported" in import_runs(cpullm, location, sweep, "--resume")
    sweep["results"].append(dict(RUN["results"][0], case_name="c"))
    sweep["run"]["finished_at"] = "2026-12-01T00:00:00Z"
    assert "run 3 (sweep): 1 points imported, 2 already there" in import_runs(cpullm, location, sweep, "--resume")
    runs = json.loads(run(db + ["runs", "--export-json"]).stdout)
    assert [r["points"] for r in runs] == [1, 1, 3] and runs[2]["finished_at"], runs
    assert runs[2]["host"] == socket.gethostname() and runs[2]["cpu_model"], "the fields not given are this host's"

    bad = dict(RUN, results=[dict(RUN["results"][0], avg_tps=1.0)])
    proc = subprocess.run(db + ["import", "-"], input=json.dumps(bad), capture_output=True, text=True)
    assert proc.returncode == 1 and "document 1, result 1: unknown field 'avg_tps'" in proc.stderr, proc.stderr
    proc = subprocess.run(db + ["import", "-"], input=json.dumps({"run": {"kind": "bench", "command": "x", "cores": "many"}}),
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "cores must be an integer" in proc.stderr, proc.stderr
    expect_error(db + ["import", "/nonexistent.json"], "/nonexistent.json: cannot open")
    assert len(json.loads(run(db + ["runs", "--export-json"]).stdout)) == 3, "a refused document writes nothing"
