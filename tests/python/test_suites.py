"""suites/decode_bandwidth.py and suites/prefill_compute.py end to end on a tiny synthetic model: each
stores its run through `cpullm bench --db --suite` in a fresh database, with the roof or peak it
read before the run, and `cpullm report` on that database shows both runs in its suites section:
case, ISA, threads, tokens/s, reference, the share the script printed, and the script's command
line. Also: bench refuses a reference without --suite and a --suite without its reference."""
import html.parser
import json
import os
import re
import sqlite3
import subprocess
import types

import pytest

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
# Seconds-long settings: a 2-layer model of width 256, 4 decode steps or a 16-token prompt, one
# thread, AVX2 (every x86 CPU cpullm's vector kernels run on), the roofs timed briefly.
COMMON = ["--cases", "tiny:q8_0", "--isa", "avx2", "--threads", "1", "--roof-min-time", "0.01"]
SUITES = {"decode_bandwidth": ["--tokens", "4"], "prefill_compute": ["--tokens", "16", "--reps", "1"]}
PRINTED_SHARE = {"decode_bandwidth": 7, "prefill_compute": 6}  # the "of roof" / "of peak" column of a printed row, split


class SuiteTables(html.parser.HTMLParser):
    """The suites section of a report: {suite: [row cells as text]} from its <h3> and table rows."""

    def __init__(self):
        super().__init__()
        self.tables, self.depth, self.suite, self.cell, self.row, self.in_h3 = {}, 0, None, None, None, False

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.depth = 1 if dict(attrs).get("id") == "suites" else 0
        elif self.depth and tag == "h3":
            self.in_h3, self.suite = True, ""
        elif self.depth and tag == "tr":
            self.row = []
        elif self.depth and tag == "td":
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "section":
            self.depth = 0
        elif tag == "h3":
            self.in_h3 = False
        elif tag == "td" and self.cell is not None:
            self.row.append(self.cell)
            self.cell = None
        elif tag == "tr" and self.row:
            self.tables.setdefault(self.suite, []).append(self.row)
            self.row = None

    def handle_data(self, data):
        if self.in_h3:
            self.suite += data
        elif self.cell is not None:
            self.cell += data


def run(command, **kw):
    return subprocess.run(command, capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def suites(ctx):
    """Both suites run into one fresh database, then the report on it: what each printed, stored
    and the report's suites tables show. The build folder is the one holding cpullm (it sits at the
    top of its build tree, bench_kernels under suites/kernels)."""
    build = os.path.dirname(ctx.cpullm)
    db = os.path.join(ctx.workdir, "suites.db")
    printed = {}  # suite -> its stdout table's first row, split
    for suite, options in SUITES.items():
        result = run(["/usr/bin/python3", os.path.join(REPO, "suites", f"{suite}.py"), "--build", build,
                      "--models", os.path.join(ctx.workdir, "models"), "--db", db, *COMMON, *options])
        assert result.returncode == 0, f"{suite}: {result.stderr}"
        printed[suite] = result.stdout.splitlines()[1].split()
    report = os.path.join(ctx.workdir, "report.html")
    result = run([ctx.cpullm, "report", "--db", db, "-o", report])
    assert result.returncode == 0, result.stderr
    parser = SuiteTables()
    with open(report) as f:
        parser.feed(f.read())
    connection = sqlite3.connect(db)
    stored = {json.loads(metrics)["suite"]: (test, tpot_ms, avg_ts, json.loads(metrics))
              for test, tpot_ms, avg_ts, metrics in connection.execute("SELECT test, tpot_ms, avg_ts, metrics_json FROM results")}
    commands = [command for (command,) in connection.execute("SELECT command FROM runs")]
    connection.close()
    return types.SimpleNamespace(printed=printed, tables=parser.tables, stored=stored, commands=commands)


def test_each_suite_stored_one_run_through_bench(suites):
    assert sorted(suites.stored) == sorted(SUITES)
    assert len(suites.commands) == 2
    for command in suites.commands:
        assert command.startswith("cpullm bench "), command
        assert "--suite " in command
    decode, prefill = suites.stored["decode_bandwidth"], suites.stored["prefill_compute"]
    assert (decode[0], prefill[0]) == ("tg", "pp")
    assert decode[3]["reference_unit"] == "bytes"
    assert prefill[3]["reference_unit"] == "operations"
    # The decode reads the weights it says it reads: the script's count is bench's own.
    assert decode[3]["work_per_token"] == decode[3]["paired_step_bytes"]
    assert "peak/1/1/1" in prefill[3]["reference"]  # the int8 peak at AVX2 on one thread


def test_report_shows_each_run_as_the_script_printed_it(suites):
    assert sorted(suites.tables) == sorted(SUITES)
    for suite, options in SUITES.items():
        (case, fmt, isa, threads, tps, reference, per_token, share, paired, measured, command), = suites.tables[suite]
        test, tpot_ms, avg_ts, metrics = suites.stored[suite]
        assert "tiny-q8_0.gguf" in case
        assert (fmt, isa, threads) == ("q8_0", "avx2", "1")
        stored_tps = 1000 / tpot_ms if test == "tg" else avg_ts
        assert tps == f"{stored_tps:,.1f}"
        assert reference.startswith(f"{metrics['reference_rate'] / 1e9:,.1f} "), reference
        assert share == f"{stored_tps * metrics['work_per_token'] / metrics['reference_rate']:.0%}"
        # The share the script printed (its "of roof" or "of peak" column) is the one the report shows.
        assert share == suites.printed[suite][PRINTED_SHARE[suite]], suites.printed[suite]
        assert (paired == "\u2014") == (suite == "prefill_compute")
        assert re.match(r"^run \d+$", measured), measured
        assert command.startswith(f"suites/{suite}.py --build "), command
        for option in COMMON + options:
            assert option in command.split()


def test_bench_refuses_half_a_reference(ctx, suites):
    model = os.path.join(ctx.workdir, "models", "tiny-q8_0.gguf")  # written by the suites' runs
    for flags, message in ((["--reference-rate", "1e9"], "--reference-rate: describes a --suite's point"),
                           (["--suite", "mine"], "--suite: needs --suite-command")):
        result = run([ctx.cpullm, "bench", "-m", model, "-p", "0", "-n", "2", *flags])
        assert result.returncode == 1, result.stderr
        assert re.match("^cpullm: error: " + re.escape(message), result.stderr), result.stderr
        assert result.stderr.count("\n") == 1, result.stderr
