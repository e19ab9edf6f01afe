"""cpullm beside its peers. `cpullm db import` of llama.cpp's llama-bench output: the real files
llama-bench v0.5.0 wrote (../shared/reference/llama-bench: -o json, jsonl and sql) become one run
each, their tests results of engine llama.cpp whose every number equals the file's; broken output
is refused with one error naming the file and the test. `cpullm bench --engine llama.cpp=DIR` runs
a fake llama-bench (a script printing llama-bench's JSON for the arguments it was given) at every
point and stores what it printed. The report's Peers section sets the two engines side by side."""
import json
import os

import pytest

from cli_checks import expect_error, run, write_tiny_model
from db_builder import Runs

FIXTURES = ("tiny-1b-v0.5.0.json", "tiny-1b-v0.5.0.jsonl", "tiny-1b-v0.5.0.sql")


def fixture(ctx, name):
    path = os.path.join(ctx.shared, "..", "reference", "llama-bench", name) if ctx.shared else ""
    if not os.path.exists(path):
        pytest.skip(f"{name} is absent from ../shared/reference/llama-bench")
    return path


def written_tests(path):
    """The tests as the file holds them, as text values where SQL holds them so."""
    text = open(path).read()
    if path.endswith(".json"):
        return json.loads(text)
    if path.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    tests = []
    for line in text.splitlines():
        if line.startswith("INSERT INTO llama_bench ("):
            columns = line[len("INSERT INTO llama_bench ("):line.index(") VALUES (")].split(", ")
            values = line[line.index(") VALUES (") + len(") VALUES ("):-2]
            tests.append(dict(zip(columns, [v.strip("'") for v in values.split("', '")])))
    return tests


def imported(ctx, database, path, *options):
    out = run([ctx.cpullm, "db", "--db", database, "import", path, *options]).stdout
    run_id = out.split()[1]
    return json.loads(run([ctx.cpullm, "db", "--db", database, "results", run_id, "--export-json"]).stdout)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_test_of_llama_bench_output_is_stored_as_written(ctx, name):
    path = fixture(ctx, name)
    database = os.path.join(ctx.workdir, f"{name}.db")
    stored = imported(ctx, database, path, "--host", "epyc-box")
    written = written_tests(path)
    assert stored["run"]["kind"] == "import"
    assert stored["run"]["host"] == "epyc-box" and stored["run"]["cpu_model"] == "AMD EPYC"
    assert len(stored["results"]) == len(written) > 0
    for test, result in zip(written, stored["results"]):
        assert result["engine"] == "llama.cpp"
        assert result["engine_commit"] == test["build_commit"] == "de3ff81"
        assert result["engine_version"] == str(test["build_number"])
        n_prompt, n_gen = int(test["n_prompt"]), int(test["n_gen"])
        assert (result["n_prompt"], result["n_gen"], result["n_depth"]) == (n_prompt, n_gen, int(test["n_depth"]))
        assert result["test"] == ("pp" if n_gen == 0 else "tg")
        assert result["n_threads"] == int(test["n_threads"])
        assert result["format"] == test["model_type"].split()[-1].lower()
        assert result["kv_type"] == test["type_k"]
        assert result["avg_ts"] == pytest.approx(float(test["avg_ts"]), rel=1e-12)
        assert result["stddev_ts"] == pytest.approx(float(test["stddev_ts"]), rel=1e-12)
        assert result["avg_ns"] == pytest.approx(float(test["avg_ns"]), rel=1e-12)
        assert result["gen_ts" if n_gen else "prompt_ts"] == result["avg_ts"]
        assert result["test_time"] == test["test_time"]
        assert [s["ns"] for s in result["samples"]] == test.get("samples_ns", [])
        assert json.loads(result["config_json"])["n_ubatch"] in (512, "512")
    assert len({r["case_name"] for r in stored["results"]}) == len(written)  # unique within the run


def test_llama_bench_run_on_this_machine_by_default(ctx):
    path = fixture(ctx, FIXTURES[1])
    stored = imported(ctx, os.path.join(ctx.workdir, "here.db"), path)
    assert stored["run"]["host"] == os.uname().nodename


@pytest.mark.parametrize("content, fragments", [
    ('[{"build_commit": "x", "build_number": 1, "avg_ts": 1.0, "model_filename": "m.gguf", "model_type": "llama 1B Q4_0", '
     '"n_prompt": 64, "n_gen": 0, "n_threads": 2}]', ["test 1: no avg_ns"]),
    ('{"build_commit": "x", "build_number": 1, "avg_ts": "fast", "avg_ns": 1, "model_filename": "m.gguf", '
     '"model_type": "llama 1B Q4_0", "n_prompt": 64, "n_gen": 0, "n_threads": 2}\n', ["test 1: avg_ts must be a number"]),
    ('{"build_commit": "x", "build_number": 1, "avg_ts": 1, "avg_ns": 1, "model_filename": "m.gguf", '
     '"model_type": "llama 1B Q4_0", "n_prompt": 0, "n_gen": 0, "n_threads": 2}\n', ["test 1: n_prompt 0, n_gen 0"]),
    ('{"build_commit": "x", "build_number": 1, "avg_ts": 1, "avg_ns": 1, "model_filename": "m.gguf", '
     '"model_type": "llama 1B Q4_0", "n_prompt": 1, "n_gen": 0, "n_threads": 2}\n{"build_commit": ', ["test 2: not JSON"]),
    ("INSERT INTO llama_bench (build_commit, avg_ts) VALUES ('x', '1", ["insert 1: a quoted string does not end"]),
    ("INSERT INTO llama_bench (build_commit, avg_ts) VALUES ('x');", ["insert 1: 2 columns but fewer values"]),
])
def test_broken_llama_bench_output_is_refused_naming_the_test(ctx, content, fragments):
    path = os.path.join(ctx.workdir, "broken.out")
    with open(path, "w") as f:
        f.write(content)
    database = os.path.join(ctx.workdir, "broken.db")
    expect_error([ctx.cpullm, "db", "--db", database, "import", path], path, *fragments)
    if os.path.exists(database):  # nothing half-imported
        assert "no runs" in run([ctx.cpullm, "db", "--db", database, "runs"]).stdout


def test_host_and_resume_are_refused_where_they_mean_nothing(ctx):
    path = fixture(ctx, FIXTURES[0])
    database = os.path.join(ctx.workdir, "options.db")
    expect_error([ctx.cpullm, "db", "--db", database, "import", path, "--resume"], path, "no --resume")
    own = os.path.join(ctx.workdir, "own.json")
    with open(own, "w") as f:
        json.dump({"run": {"kind": "bench", "command": "cpullm bench"}, "results": []}, f)
    expect_error([ctx.cpullm, "db", "--db", database, "import", own, "--host", "elsewhere"], own, "--host names")


def test_report_sets_cpullm_against_the_imported_peer_point_by_point(ctx):
    """A database holding the llama-bench import and cpullm runs at the same points (twice as fast
    at prefill, half as fast at decode): the Peers section's ratios are the stored tokens/s over
    each other, the peer's wins said as plainly as cpullm's, and no other section counts the
    peer's results as cpullm's."""
    path = fixture(ctx, FIXTURES[0])
    database = os.path.join(ctx.workdir, "peers.db")
    runs = Runs()
    run_id = runs.add_run(kind="bench", command="cpullm bench -m models/tiny-1b-q4_0.gguf,models/tiny-1b-q8_0.gguf")
    written = written_tests(path)
    for i, test in enumerate(written):
        phase = "pp" if test["n_gen"] == 0 else "tg"
        speed = test["avg_ts"] * (2.0 if phase == "pp" else 0.5)
        runs.add_result(run_id, case_name=f"point{i}", test=phase, model_filename=test["model_filename"], format="q4_0",
                        n_prompt=test["n_prompt"], n_gen=test["n_gen"], n_depth=0, n_threads=test["n_threads"], n_seq=1,
                        kv_type="f16", avg_ts=speed, stddev_ts=speed * 0.01)
    runs.write(ctx.cpullm, database)
    run([ctx.cpullm, "db", "--db", database, "import", path])
    html, data = os.path.join(ctx.workdir, "peers.html"), os.path.join(ctx.workdir, "peers.json")
    run([ctx.cpullm, "report", "--db", database, "-o", html, "--json", data])
    peers = json.load(open(data))["peers"]
    stored = {}
    for run_id in ("1", "2"):
        for r in json.loads(run([ctx.cpullm, "db", "--db", database, "results", run_id, "--export-json"]).stdout)["results"]:
            stored[r["id"]] = r
    assert len(peers) == len(written)
    for p in peers:
        mine, theirs = stored[p["cpullm_result"]], stored[p["peer_result"]]
        assert mine["engine"] == "cpullm" and theirs["engine"] == "llama.cpp" == p["peer_engine"]
        assert (mine["test"], mine["n_prompt"], mine["n_gen"], mine["n_threads"]) == \
               (theirs["test"], theirs["n_prompt"], theirs["n_gen"], theirs["n_threads"])
        assert p["ratio"] == pytest.approx(mine["avg_ts"] / theirs["avg_ts"], rel=1e-12)
        assert p["ratio"] == pytest.approx(2.0 if mine["test"] == "pp" else 0.5, rel=1e-9)
        assert p["low"] < p["ratio"] < p["high"]
    page = open(html).read()
    section = page[page.index('<section id="peers">'):]
    section = section[:section.index("</section>")]
    assert section.count("cpullm 2.00\u00d7 faster") == sum(1 for t in written if t["n_gen"] == 0)
    assert section.count("<b>llama.cpp 2.00\u00d7 faster</b>") == sum(1 for t in written if t["n_gen"] > 0)
    assert "llama.cpp (build 1 de3ff81)" in section and "<svg" in section
    assert f"{len(written)} results of cpullm and {len(written)} of its peers" in page


FAKE_LLAMA_BENCH = """#!/usr/bin/env python3
# llama-bench's JSON for the arguments given, as llama.cpp v0.5.0 writes it; each call logged.
import json, sys
args = sys.argv[1:]
value = {args[i]: args[i + 1] for i in range(0, len(args) - 1, 2)}
with open(sys.argv[0] + ".log", "a") as log:
    log.write(" ".join(args) + "\\n")
if "FAIL" in value["-m"]:
    sys.stderr.write("error: failed to load model\\n")
    sys.exit(1)
tests = []
prompt, gen = int(value["-p"]), int(value["-n"])
if "-pg" in value:
    prompt, gen = map(int, value["-pg"].split(","))
for p, n in ([(prompt, 0)] if prompt else []) + ([(0, gen)] if gen else []) if "-pg" not in value else [(prompt, gen)]:
    ts = 100.0 + p + n
    tests.append({"build_commit": "fake123", "build_number": 7, "cpu_info": "fake cpu", "model_filename": value["-m"],
                  "model_type": "llama 1M F32", "n_batch": int(value["-b"]), "n_ubatch": int(value["-ub"]),
                  "n_threads": int(value["-t"]), "type_k": value["-ctk"], "type_v": value["-ctv"], "flash_attn": -1,
                  "n_prompt": p, "n_gen": n, "n_depth": int(value["-d"]), "test_time": "2026-12-01T00:00:00Z",
                  "avg_ns": 1e9 * (p + n) / ts, "stddev_ns": 1000, "avg_ts": ts, "stddev_ts": 1.0,
                  "samples_ns": [1e9 * (p + n) / ts] * int(value["-r"]), "samples_ts": [ts] * int(value["-r"])})
print(json.dumps(tests, indent=2))
"""


@pytest.fixture(scope="module")
def fake_llama(ctx):
    folder = os.path.join(ctx.workdir, "fake-llama")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "llama-bench")
    with open(path, "w") as f:
        f.write(FAKE_LLAMA_BENCH)
    os.chmod(path, 0o755)
    model = os.path.join(ctx.workdir, "tiny.gguf")
    write_tiny_model(ctx.cpullm, model)
    return folder, model


def test_bench_engine_measures_the_peer_at_every_point_and_stores_it(ctx, fake_llama):
    folder, model = fake_llama
    database = os.path.join(ctx.workdir, "engine.db")
    proc = run([ctx.cpullm, "bench", "-m", model, "-p", "16", "-n", "8", "-t", "1", "-r", "2", "-d", "0,4",
                "--kv-type", "f32", "--engine", f"llama.cpp={folder}", "--db", database, "--no-regions"])
    calls = open(os.path.join(folder, "llama-bench.log")).read().splitlines()
    assert len(calls) == 4  # one call per point: pp16 and tg8, each at depth 0 and 4
    for call in calls:
        assert f"-m {model} -t 1 -r 2" in call and "-ctk f32 -ctv f32" in call and "-o json" in call
    assert sum(" -d 4 " in c for c in calls) == 2
    assert proc.stderr.count("cpullm: bench: llama.cpp (build 7 fake123)") == 4
    stored = json.loads(run([ctx.cpullm, "db", "--db", database, "results", "1", "--export-json"]).stdout)["results"]
    peers = [r for r in stored if r["engine"] == "llama.cpp"]
    ours = [r for r in stored if r["engine"] == "cpullm"]
    assert len(peers) == 4 and len(ours) == 4
    for r in peers:
        assert r["model_filename"] == model and r["engine_commit"] == "fake123" and r["engine_version"] == "7"
        assert r["avg_ts"] == 100.0 + r["n_prompt"] + r["n_gen"] and len(r["samples"]) == 2
        assert r["kv_type"] == "f32" and r["n_threads"] == 1
    assert {(r["test"], r["n_prompt"], r["n_gen"], r["n_depth"]) for r in peers} == \
           {(r["test"], r["n_prompt"], r["n_gen"], r["n_depth"]) for r in ours}


def test_bench_engine_refusals(ctx, fake_llama):
    folder, model = fake_llama
    expect_error([ctx.cpullm, "bench", "-m", model, "-n", "4", "-p", "0", "--engine", "vllm"], "--engine vllm",
                 "llama.cpp")
    absent = os.path.join(ctx.workdir, "no-such-folder")
    expect_error([ctx.cpullm, "bench", "-m", model, "-n", "4", "-p", "0", "--engine", f"llama.cpp={absent}"],
                 "is not an executable llama-bench")
    failing = os.path.join(ctx.workdir, "FAIL.gguf")
    write_tiny_model(ctx.cpullm, failing)
    expect_error([ctx.cpullm, "bench", "-m", failing, "-n", "4", "-p", "0", "-r", "1", "--engine", f"llama.cpp={folder}"],
                 "llama.cpp:", "exited 1", "failed to load model")
