"""suites/audit.py, scripts/run-default's audit step, on a tiny F16 model within a short budget:
every claim one host can test gets its pairs of points in the database (C5, C6 with Q8_0 and
eval-quant's accuracy, C7, C9, C10, C11), and the report then gives each a measured verdict with
its interval instead of "not measured yet"; C8 on a one-node host says why it is not testable.
The verdicts' values are the host's; what is checked is that they are measured, from pairs that
differ in one thing only."""
import json
import os
import re
import subprocess

import pytest

from cli_checks import run, write_tiny_model

SUITES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "suites")


@pytest.fixture(scope="module")
def audited(ctx):
    model = os.path.join(ctx.workdir, "tiny-f16.gguf")
    write_tiny_model(ctx.cpullm, model, dtype="f16")
    database = os.path.join(ctx.workdir, "audit.db")
    out = run(["/usr/bin/python3", os.path.join(SUITES, "audit.py"), "--model", model, "--db", database, "--cpullm", ctx.cpullm,
               "--budget", "40s", "--gen", "8"], timeout=600).stdout
    html, data = os.path.join(ctx.workdir, "audit.html"), os.path.join(ctx.workdir, "audit.json")
    run([ctx.cpullm, "report", "--db", database, "-o", html, "--json", data])
    return out, {c["claim"].split(":")[0]: c for c in json.load(open(data))["claims"]}, database


def test_every_claim_this_host_can_test_gets_a_measured_verdict(audited):
    out, verdicts, _ = audited
    for claim in ("C5", "C6", "C7", "C9", "C10"):
        v = verdicts[claim]
        assert v["basis"] == "measured" and v["verdict"] in ("holds", "does not hold", "inconclusive"), v
        assert re.search(r"factor \d+\.\d\dx, 95% interval \d+\.\d\d-\d+\.\d\d \(\d+ repetitions", v["evidence"]), v
    assert verdicts["C11"]["basis"] == "measured" and "2 processes sharing the mapped model" in verdicts["C11"]["evidence"]
    assert "Q8_0 against FP32: tokens/s factor" in verdicts["C6"]["evidence"]
    assert re.search(r"int8-channel mean KL \d\.\d\de[-+]\d\d, top-1 agreement \d\.\d{4}", verdicts["C6"]["evidence"])
    assert re.search(r"audit: round 1 C6: \d+\.\d\dx", out), out
    if len([n for n in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", n)]) <= 1:
        assert verdicts["C8"]["verdict"] == "not testable here" and "one NUMA node" in verdicts["C8"]["evidence"]
        assert "C8 (binding) not measured: this host has one NUMA node" in out


def test_pairs_differ_in_the_claimed_option_only(ctx, audited):
    """C7's sparse file pairs with the dense one: same format (f16), sparsity 0.2 against 0."""
    _, _, database = audited
    runs = json.loads(run([ctx.cpullm, "db", "--db", database, "runs", "--export-json"]).stdout)
    tg = [r for run_row in runs for r in json.loads(run([ctx.cpullm, "db", "--db", database, "results", str(run_row["id"]),
                                                         "--export-json"]).stdout)["results"] if r["test"] == "tg"]
    sparsities = {json.loads(r["config_json"]).get("sparsity") for r in tg if r["format"] == "f16"}
    assert {0, 0.2} <= sparsities, sparsities


def test_bad_budget_is_one_line(ctx):
    proc = subprocess.run(["/usr/bin/python3", os.path.join(SUITES, "audit.py"), "--model", "m.gguf", "--db", "x.db",
                           "--budget", "soon"], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.strip().startswith("audit: --budget 'soon'"), proc.stderr
