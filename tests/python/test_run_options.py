"""Every command that runs the model goes through one Session (engine/run/session.hpp), which
applies the run options the same way for each: this runs generate, logits, profile, eval-quant,
bench (its points and the load scenario) with a value other than the default for every run
option the command takes, and checks from each command's own output (the 'cpullm: run:' line,
profile's and eval-quant's JSON, bench's records) that the run applied it. bench --placement
interleave,replicate,shard runs a point per strategy and reports it; on one NUMA node each
reduces to first-touch, and the output says so.
"""
import json
import os
import re

import pytest

from cli_checks import expect_error, run, write_tiny_model


@pytest.fixture(scope="module")
def ctx(ctx):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("the checks bind a thread to CPU 1")
    ctx.tiny = os.path.join(ctx.workdir, "tiny.gguf")
    write_tiny_model(ctx.cpullm, ctx.tiny)
    return ctx


def numa_nodes():
    return len([d for d in os.listdir("/sys/devices/system/node") if re.fullmatch(r"node\d+", d)])


# Values other than every default (scalar kernels always run; with --housekeeping 1 the one
# compact-bound thread lands on CPU 1).
def run_flags(ctx, *, sequences=True, context=True):
    flags = ["-t", "1", "--bind", "compact", "--housekeeping", "1", "--isa", "scalar", "--placement", "replicate",
             "--attn-tile", "16x8", "--kv-type", "f16", "--prefetch", "--mlock"]
    if sequences:
        flags += ["--np", "2"]
    if context:
        flags += ["-c", "96"]
    return flags


def run_line(stderr):
    line = next((l for l in stderr.splitlines() if l.startswith("cpullm: run: ")), None)
    assert line, f"no 'cpullm: run:' line in:\n{stderr}"
    return dict(field.split("=", 1) for field in line[len("cpullm: run: "):].split())


def placement_applied(fields, notes_text):
    """replicate is in effect, or on one NUMA node first-touch with a note saying so (where the
    command prints notes: None where it has none to print)."""
    if numa_nodes() == 1:
        assert fields == "first-touch", fields
        assert notes_text is None or "one NUMA node: replicate is first-touch" in notes_text, notes_text
    else:
        assert fields == "replicate", fields


def check_common(fields, stderr_or_notes):
    assert fields["threads"] == "1" and fields["bind"] == "compact" and fields["housekeeping"] == "1", fields
    assert fields["isa"] == "scalar" and fields["attn_tile"] == "16x8" and fields["kv_type"] == "f16", fields
    assert fields["prefetch"] == "1" and fields["mlock"] == "1", fields
    placement_applied(fields["placement"], stderr_or_notes)


def test_generate_applies_every_option(ctx):
    proc = run([ctx.cpullm, "generate", "-m", ctx.tiny, "-p", "the ball", "-n", "4", "--ignore-eos", *run_flags(ctx),
                "--temp", "0.5", "--top-k", "5", "--top-p", "0.9", "--seed", "7"])
    fields = run_line(proc.stderr)
    check_common(fields, proc.stderr)
    assert fields["sequences"] == "2" and fields["context"] == "96", fields
    assert (fields["temp"], fields["top_k"], fields["top_p"], fields["seed"]) == ("0.5", "5", "0.9", "7"), fields
    assert f"cpullm: threads (bind compact): thread 0 on CPU 1" in proc.stderr, proc.stderr
    summary = proc.stderr.strip().splitlines()[-1]
    assert "1 threads, kernels scalar" in summary and "2 sequences" in summary and "prefetched" in summary, summary
    assert "KV cache (f16)" in proc.stderr and "(weights locked)" in proc.stderr, proc.stderr
    assert len(re.findall(r"--- sequence \d ---", proc.stdout)) == 2, proc.stdout


def test_logits_applies_every_option(ctx):
    out = os.path.join(ctx.workdir, "l.npy")
    proc = run([ctx.cpullm, "logits", "-m", ctx.tiny, "-p", "the ball", "-o", out,
                *run_flags(ctx, sequences=False, context=False)])
    fields = run_line(proc.stderr)
    check_common(fields, proc.stderr)
    assert fields["context"] == "3", fields  # the prompt's tokens, BOS first
    # The same logits at f32 and f16 KV would be a KV type not applied: a prompt of 3 tokens
    # attends over cached keys, so the cache's precision shows in the last position.
    f32 = os.path.join(ctx.workdir, "l32.npy")
    run([ctx.cpullm, "logits", "-m", ctx.tiny, "-p", "the ball", "-o", f32, "-t", "1"])
    assert open(out, "rb").read() != open(f32, "rb").read(), "--kv-type f16 changed nothing"


def test_profile_applies_every_option(ctx):
    proc = run([ctx.cpullm, "profile", "-m", ctx.tiny, "-p", "8", "-n", "4", "--json", "--no-counters",
                *run_flags(ctx)])
    data = json.loads(proc.stdout)
    assert data["threads"] == 1 and data["isa"] == "scalar" and data["kv_type"] == "f16", data
    assert data["attn_tile"] == "16x8" and data["binding"] == "compact" and data["sequences"] == 2, data
    assert data["context"] == 96 and data["prefetch"] is True and data["mlock"] is True, data
    placement_applied(data["placement"], proc.stderr)
    check_common(run_line(proc.stderr), proc.stderr)


def test_eval_quant_applies_every_option(ctx):
    proc = run([ctx.cpullm, "eval-quant", "-m", ctx.tiny, "--formats", "q8_0", "--window", "16", "--json",
                *run_flags(ctx, sequences=False, context=False)])
    for result in json.loads(proc.stdout):
        fields = dict(f.split("=", 1) for f in result["run"].split())
        check_common(fields, None)  # one run line per model: the placement field says what is in effect
        assert fields["context"] == "16", fields  # one window


def bench_records(ctx, *flags):
    proc = run([ctx.cpullm, "bench", "-m", ctx.tiny, "-r", "1", "-o", "json", *flags])
    return json.loads(proc.stdout), proc.stderr


def check_bench_record(r, stderr=None):
    assert r["n_threads"] == 1 and r["isa"] == "scalar" and r["binding"] == "compact", r
    assert r["housekeeping"] == 1 and r["attn_tile"] == "16x8" and r["kv_type"] == "f16", r
    assert r["n_seq"] == 2 and r["prefetch"] is True and r["placement_requested"] == "replicate", r
    placement_applied(r["placement"], r["notes"])
    if numa_nodes() == 1 and stderr is not None:
        assert "cpullm: note: one NUMA node: replicate is first-touch" in stderr, stderr


BENCH_FLAGS = ["-t", "1", "--bind", "compact", "--housekeeping", "1", "--isa", "scalar", "--placement", "replicate",
               "--attn-tile", "16x8", "--kv-type", "f16", "--prefetch", "1", "--np", "2"]


def test_bench_points_apply_every_option(ctx):
    records, stderr = bench_records(ctx, "-p", "8", "-n", "2", *BENCH_FLAGS)
    assert len(records) == 2, records
    for r in records:
        check_bench_record(r, stderr)


def test_bench_load_scenario_applies_every_option(ctx):
    records, stderr = bench_records(ctx, "--load", "-pg", "8,2", "--requests", "3", "--rate", "50", *BENCH_FLAGS)
    assert [r["test"] for r in records] == ["load"], records
    check_bench_record(records[0])  # the scenario's notes are its record's


def test_bench_runs_every_placement(ctx):
    """What generate --placement applies, bench measures: a point per strategy, each reported."""
    strategies = ["first-touch", "interleave", "replicate", "shard"]
    records, stderr = bench_records(ctx, "-p", "8", "-n", "2", "--bind", "compact", "-t", "1",
                                    "--placement", ",".join(strategies))
    records = [r for r in records if r["test"] == "pp8"]
    assert [r["placement_requested"] for r in records] == strategies, records
    for r in records:
        assert r["avg_ts"] > 0, r
        if numa_nodes() == 1:  # every strategy reduces to first-touch on one node, and says so
            assert r["placement"] == "first-touch", r
            if r["placement_requested"] != "first-touch":
                assert f"one NUMA node: {r['placement_requested']} is first-touch" in r["notes"], r
        else:
            assert r["placement"] == r["placement_requested"], r
    placed = [l for l in stderr.splitlines() if l.startswith("cpullm: note: one NUMA node")]
    print(f"{numa_nodes()} NUMA node(s): " + ("; ".join(placed) if placed else "every strategy applied"))


def test_bad_run_options_give_one_clear_error(ctx):
    for command in (["generate", "-n", "1"], ["profile"], ["bench", "-r", "1", "-p", "8", "-n", "0"]):
        base = [ctx.cpullm, command[0], "-m", ctx.tiny, *command[1:]]
        expect_error(base + ["--placement", "everywhere"], "everywhere")
        expect_error(base + ["--attn-tile", "0x8"], "0x8")
        expect_error(base + ["--kv-type", "q4"], "q4")

