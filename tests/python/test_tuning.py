"""Checks of tuning/ (the binary only for its format registry, $CPULLM_BIN): the space file and its constraints, the three
strategies on a fake measurement function (halving keeps the best, the budget is respected, an
interrupted sweep resumes without repeating an evaluation), the statistics, the OS checklist
against a fake /proc and /sys tree, and the roofline predictions against numbers worked out by
hand.
"""
import json
import math
import os
import shutil

import pytest
from cli_checks import run

from tuning import measure, oscheck, roofline, stats, tune
from tuning import results as res
from tuning import space as sp
from tuning.strategies import STRATEGIES, halving_plan, parse_duration

# Two NUMA nodes of two single-PU cores: enough for cpusets, housekeeping and isolation.
TOPOLOGY = {"packages": 2, "nodes": [{}, {}],
            "cores": [{"node": 0, "pus": [0]}, {"node": 0, "pus": [1]}, {"node": 1, "pus": [2]}, {"node": 1, "pus": [3]}]}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_space_parses_toml_and_json(ctx):
    toml = write(os.path.join(ctx.workdir, "s.toml"), '[values]\nthreads = [1, 2]\nformat = ["q8_0", "q4_0"]\n'
                                                        'sparsity = [0, 0.5]\n[workload]\nprompt = 16\n')
    space = sp.load_space(toml)
    assert space["values"] == {"threads": [1, 2], "format": ["q8_0", "q4_0"], "sparsity": [0.0, 0.5]}, space
    assert space["workload"] == {"prompt": 16, "gen": 32, "depth": 0}
    assert len(sp.expand(space)) == 8
    js = write(os.path.join(ctx.workdir, "s.json"), json.dumps({"values": {"bind": ["compact"], "attn_tile": ["8x8"]}}))
    assert sp.expand(sp.load_space(js)) == [{"bind": "compact", "attn_tile": "8x8"}]


def test_space_errors_name_the_file_and_key(ctx):
    cases = {
        '[values]\nthreds = [1]\n': "values.threds: unknown option",
        '[values]\nbind = ["everywhere"]\n': "values.bind: 'everywhere' is not one of",
        '[values]\nthreads = []\n': "values.threads: must be a non-empty list",
        '[values]\nthreads = ["two"]\n': "values.threads: 'two' is not a int",
        '[values]\nthreads = [1]\n[workload]\nprompt = 0\n': "workload.prompt",
        '[values]\nthreads = [1]\n[workload]\ndepth = -1\n': "workload.depth",
        'threads = [1]\n': "needs a \"values\" table",
        '[values\n': "cannot read the space",
    }
    for text, fragment in cases.items():
        path = write(os.path.join(ctx.workdir, "bad.toml"), text)
        try:
            sp.load_space(path)
        except sp.SpaceError as e:
            assert str(e).startswith(path) and fragment in str(e), (text, str(e))
        else:
            raise AssertionError(f"{text!r} was accepted")


def test_constraints_drop_what_cannot_run(ctx):
    points = [{"threads": 3, "cpuset": "0-2"},            # 3 cores usable: fits
              {"threads": 3, "cpuset": "0-2", "housekeeping": 1},  # node 0 keeps core 1, node 1 none: 1 core
              {"threads": 1, "cpuset": "7"},              # no CPU 7
              {"format": "f16"},                           # the model is q8_0: no precision to add
              {"format": "q8_0", "keep": "first,last"},    # keep with the model's own format changes nothing
              {"format": "q4_0", "keep": "first,last"},
              {"sparsity": 0.5},
              {"placement": "interleave"},                 # two nodes: a real strategy
              {"prefetch": 1}]                              # generate cannot set it
    kept, dropped = sp.constrain(points, TOPOLOGY, "q8_0", {"threads", "cpuset", "housekeeping", "placement"})
    reasons = [r for _, r in dropped]
    assert kept == [points[0], points[5], points[7]], (kept, reasons)
    for fragment in ["3 threads do not fit 1 usable cores", "names CPUs this machine lacks", "cannot add precision",
                     "--keep changes nothing", "has no --sparsity", "cannot set prefetch"]:
        assert any(fragment in r for r in reasons), (fragment, reasons)
    kept, _ = sp.constrain([{"sparsity": 0.5}], TOPOLOGY, "q8_0", {"sparsity"})
    assert kept == [{"sparsity": 0.5}]  # a quantize that prunes
    one_node = {"packages": 1, "nodes": [{}], "cores": [{"node": 0, "pus": [0]}, {"node": 0, "pus": [1]}]}
    kept, dropped = sp.constrain([{"placement": "first-touch"}, {"placement": "shard"}], one_node, "f16", {"placement"})
    assert kept == [{"placement": "first-touch"}] and "every placement is first-touch" in dropped[0][1], (kept, dropped)


def fake_space():
    """27 points; the objective (lower is better) is smallest at threads=2, tile=64, fmt=q4_0."""
    return [{"threads": t, "attn_tile": a, "format": f} for t in (1, 2, 4) for a in ("8x8", "32x32", "64x64")
            for f in ("f16", "q8_0", "q4_0")]


def fake_value(point):
    return (abs(point["threads"] - 2) + {"8x8": 2, "32x32": 1, "64x64": 0}[point["attn_tile"]]
            + {"f16": 3, "q8_0": 1.5, "q4_0": 0}[point["format"]] + 10)


class FakeBudget:
    """A budget counted in evaluations instead of seconds: deterministic."""

    def __init__(self, evaluations):
        self.left_count = evaluations

    def spent(self):
        return self.left_count <= 0

    def left(self):
        return self.left_count

    def elapsed(self):
        return 0


def fake_evaluator(budget, calls, noise=0.0):
    """Measures with a known objective plus a level-dependent error that shrinks as the level
    rises (short measurements are noisy, longer ones less)."""
    def evaluate(point, level):
        calls.append((sp.point_key(point), level))
        budget.left_count -= 1
        wobble = noise / (level + 1) * math.sin(len(calls))
        return res.summarize(point, level, [{"ttft_ms": fake_value(point) + wobble}], "ttft")
    return evaluate


def test_grid_and_random_cover_the_space_within_budget(ctx):
    better = res.better_for("ttft")
    calls = []
    out = STRATEGIES["grid"](fake_space(), fake_evaluator(FakeBudget(100), calls), FakeBudget(100), better=better)
    assert len(out) == 27 and len(set(calls)) == 27
    calls, budget = [], FakeBudget(10)
    out = STRATEGIES["random"](fake_space(), fake_evaluator(budget, calls), budget, better=better, seed=1)
    assert len(out) == 10, len(out)  # stopped by the budget
    calls, budget = [], FakeBudget(100)
    out = STRATEGIES["random"](fake_space(), fake_evaluator(budget, calls), budget, better=better, seed=1, count=5)
    assert len(out) == 5 and len(set(k for k, _ in calls)) == 5


def test_halving_keeps_the_best_and_respects_the_budget(ctx):
    better = res.better_for("ttft")
    assert halving_plan(27, 3) == [27, 9, 3] and halving_plan(2, 3) == [2] and halving_plan(1, 3) == [1]
    calls, budget = [], FakeBudget(1000)
    out = STRATEGIES["halving"](fake_space(), fake_evaluator(budget, calls, noise=0.4), budget, better=better, eta=3)
    assert len(calls) == 27 + 9 + 3, len(calls)
    top = max(r["level"] for r in out)
    final = sorted((r for r in out if r["level"] == top), key=lambda r: r["value"])
    assert top == 2 and final[0]["point"] == {"threads": 2, "attn_tile": "64x64", "format": "q4_0"}, final[0]
    calls, budget = [], FakeBudget(30)
    out = STRATEGIES["halving"](fake_space(), fake_evaluator(budget, calls), budget, better=better, eta=3)
    assert len(calls) == 30 and max(r["level"] for r in out) == 1, (len(calls), max(r["level"] for r in out))


def test_interrupted_sweep_resumes_repeating_nothing(ctx):
    path = os.path.join(ctx.workdir, "state.jsonl")
    if os.path.exists(path):
        os.remove(path)
    better = res.better_for("ttft")
    measured = []

    def measure(point, level):
        if len(measured) == 14:
            raise KeyboardInterrupt  # the user's ^C in the middle of level 0
        measured.append((sp.point_key(point), level))
        return res.summarize(point, level, [{"ttft_ms": fake_value(point)}], "ttft")

    def run(resume):
        state = res.State(path, resume)
        evaluate = lambda p, level: res.evaluate_stored(state, p, level, measure)[0]  # noqa: E731
        return STRATEGIES["halving"](fake_space(), evaluate, FakeBudget(1000), better=better, eta=3, seed=4)

    try:
        run(False)
        raise AssertionError("the interruption did not happen")
    except KeyboardInterrupt:
        pass
    assert len(measured) == 14
    try:
        res.State(path, False)
        raise AssertionError("a second sweep into the same state file without --resume was accepted")
    except FileExistsError as e:
        assert "--resume" in str(e)
    measured.append(None)  # past the interruption point: measure freely from now on
    out = run(True)
    again = [m for m in measured if m is not None]
    assert len(again) == len(set(again)) == 27 + 9 + 3, (len(again), len(set(again)))
    assert len(out) == 39


def test_statistics(ctx):
    # The 95% t quantiles of the printed tables (3 decimals), between their rows too, and the normal's
    # 1.960 far out: scipy's, where a hand-written table gave the row below for 11, 13, 31, ...
    for dof, quantile in [(1, 12.706), (3, 3.182), (10, 2.228), (11, 2.201), (30, 2.042), (31, 2.040), (10000, 1.960)]:
        assert round(stats.t95(dof), 3) == quantile, (dof, stats.t95(dof))
    mean, half = stats.mean_ci([10.0, 12.0, 11.0, 13.0])
    assert mean == 11.5 and abs(half - stats.t95(3) * math.sqrt(5 / 3) / 2) < 1e-9, half
    assert stats.mean_ci([5.0]) == (5.0, math.inf)
    values = iter([10.0, 10.1, 9.9, 10.0, 30.0])
    samples = stats.repeat_until_tight(lambda: {"x": next(values)}, "x", 0.05, 2, 10, 1e9)
    # Two samples: 12.7 x 0.071 / 1.41 = 0.64 > 5% of 10.05; three: 4.30 x 0.1 / 1.73 = 0.25, within.
    assert len(samples) == 3, samples
    rising = iter(range(1, 100))
    samples = stats.repeat_until_tight(lambda: {"x": float(next(rising))}, "x", 0.0001, 2, 4, 1e9)
    assert len(samples) == 4  # never tight: stops at max_reps
    assert parse_duration("90s") == 90 and parse_duration("10m") == 600 and parse_duration("2") == 2
    assert stats.median([3.0, 1.0, 2.0]) == 2.0 and stats.median([4.0, 1.0, 2.0, 3.0]) == 2.5


def test_prediction_error_pairs_each_run_with_its_rates(ctx):
    # Three runs, each predicted from the rates measured around it. Decode is held to each run's
    # median step (decode_step_tps): the second run's median step met a slowdown its rates did
    # not see (predicted 100, ran 60): alone +67%, but the median of the per-run errors (+10%,
    # +67%, -5%) is +10%. The third run's mean (50) fell to stalls; its median step did not.
    predictions = [{"decode_tps": 110.0, "ttft_ms": 50.0}, {"decode_tps": 100.0, "ttft_ms": 40.0},
                   {"decode_tps": 95.0, "ttft_ms": 45.0}]
    samples = [{"decode_tps": 100.0, "decode_step_tps": 100.0, "ttft_ms": 40.0},
               {"decode_tps": 60.0, "decode_step_tps": 60.0, "ttft_ms": 40.0},
               {"decode_tps": 50.0, "decode_step_tps": 100.0, "ttft_ms": 60.0}]
    errors = tune.run_errors(predictions, samples)
    # Each run's rates: the better of those measured before it and after it (before the next run).
    measured = [roofline.KernelRates(1, bw, {("q8_0", 1): v}) for bw, v in ((10.0, 1.0), (8.0, 3.0), (12.0, 2.0))]
    bracketing = tune.bracketing_rates(measured)
    assert [(r.bandwidth_gbs, r.layer_gbs[("q8_0", 1)]) for r in bracketing] == [(10.0, 3.0), (12.0, 3.0), (12.0, 2.0)]
    assert [round(e, 4) for e in errors["decode_tps"]["each"]] == [0.1, 0.6667, -0.05], errors
    assert abs(errors["decode_tps"]["median"] - 0.1) < 1e-12
    # TTFT: one call per run, no steps: the median of the runs' errors.
    assert [round(e, 4) for e in errors["ttft_ms"]["each"]] == [0.25, 0.0, -0.25]
    assert errors["ttft_ms"]["median"] == 0.0
    assert tune.stall_share(samples) == (0.0, 0.5)
    # A build whose bench has no step percentiles: decode falls back to the mean.
    assert abs(tune.run_errors([{"decode_tps": 110.0, "ttft_ms": 1.0}], [{"decode_tps": 100.0, "ttft_ms": 1.0}])
               ["decode_tps"]["median"] - 0.1) < 1e-12
    assert tune.stall_share([{"decode_tps": 100.0, "ttft_ms": 1.0}]) is None


def test_page_check_flags_a_file_whose_reads_stall(ctx):
    # Windows in GB/s: a stall of 10-200 ms takes a fifth or more of a 0.2 s window. The file's
    # slowest window against fresh memory's slowest, not the medians (equal when one window of
    # eight stalls).
    even = {"file": [30.0, 31.0, 29.5, 30.5], "fresh": [31.0, 30.0, 29.0, 32.0]}
    stalled = {"file": [31.0, 14.8, 30.5, 31.2], "fresh": [31.9, 30.0, 29.0, 32.0]}
    noisy_host = {"file": [20.0, 19.0, 21.0, 20.5], "fresh": [30.0, 21.0, 29.0, 31.0]}  # both slow once: no stall
    assert tune.stalled_pages({1: even, 2: noisy_host}) == []
    assert tune.stalled_pages({1: stalled, 2: even}) == [1]


def test_config_file_uses_long_option_names(ctx):
    path = os.path.join(ctx.workdir, "best.toml")
    res.write_config(path, "/m/model-q8_0.gguf", {"threads": 2, "bind": "compact", "attn_tile": "8x8", "format": "q8_0",
                                                  "placement": "interleave", "sequences": 4}, ["a comment"])
    with open(path) as f:
        text = f.read()
    assert text == ('# a comment\nmodel = "/m/model-q8_0.gguf"\nthreads = 2\nbind = "compact"\nattn-tile = "8x8"\n'
                    'np = 4\n\n[bench]\nplacement = "interleave"\n'), text
    import tomllib
    with open(path, "rb") as f:
        assert tomllib.load(f)["attn-tile"] == "8x8"


def fake_root(workdir):
    """/proc and /sys of a 2-node, 4-CPU box far from the recommendations."""
    root = os.path.join(workdir, "fakeroot")
    shutil.rmtree(root, ignore_errors=True)
    write(f"{root}/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=domain,managed_irq,1,3 nohz_full=1,3\n")
    write(f"{root}/proc/sys/vm/swappiness", "60\n")
    write(f"{root}/proc/sys/kernel/numa_balancing", "1\n")
    write(f"{root}/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    write(f"{root}/sys/devices/system/cpu/smt/control", "notsupported\n")
    for cpu, governor in enumerate(["performance", "powersave", "powersave", "powersave"]):
        write(f"{root}/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor", governor + "\n")
    write(f"{root}/sys/devices/system/cpu/intel_pstate/no_turbo", "1\n")
    write(f"{root}/sys/devices/system/node/node0/meminfo", "Node 0 MemTotal:  8388608 kB\nNode 0 MemFree:  4194304 kB\n")
    write(f"{root}/sys/devices/system/node/node1/meminfo", "Node 1 MemTotal:  4194304 kB\nNode 1 MemFree:  1048576 kB\n")
    return root


RECOMMENDATIONS = [{"setting": s, "value": v, "why": f"because {s}"} for s, v in
                   [("isolation", "1"), ("vm.swappiness", "1"), ("transparent_hugepage", "always"), ("smt", "n/a"),
                    ("governor", "performance"), ("boost", "on"), ("numa_balancing", "0")]]


def test_os_checklist_against_a_fake_tree(ctx):
    root = fake_root(ctx.workdir)
    model = write(os.path.join(ctx.workdir, "model.bin"), "x" * 8192)
    checks = {c.name: c for c in oscheck.checklist(root, TOPOLOGY, RECOMMENDATIONS, model, 6 << 30)}
    iso = checks["isolation"]
    assert iso.status == "change" and "isolcpus=1,3; nohz_full=1,3; rcu_nocbs=(unset)" == iso.current, iso
    assert "isolcpus=1,3 nohz_full=1,3 rcu_nocbs=1,3" in iso.fix and iso.why == "because isolation", iso
    assert checks["vm.swappiness"].current == "60" and "sysctl -w vm.swappiness=1" in checks["vm.swappiness"].fix
    assert checks["transparent hugepages"].current == "madvise" and checks["transparent hugepages"].status == "change"
    assert checks["SMT"].status == "ok" and "no SMT" in checks["SMT"].why  # notsupported: nothing to switch off
    write(f"{root}/sys/devices/system/cpu/smt/control", "on\n")
    smt = next(c for c in oscheck.checklist(root, TOPOLOGY, [dict(RECOMMENDATIONS[3], value="off")], model, 0) if c.name == "SMT")
    assert smt.status == "change" and smt.fix.startswith("echo off > /sys/devices/system/cpu/smt/control"), smt
    assert checks["CPU frequency governor"].current == "performance x1, powersave x3"
    assert "cpupower frequency-set -g performance" in checks["CPU frequency governor"].fix
    assert checks["boost (turbo)"].current == "off" and "no_turbo" in checks["boost (turbo)"].fix
    assert checks["NUMA balancing"].current == "1" and "kernel.numa_balancing=0" in checks["NUMA balancing"].fix
    mem = checks["memory per node"]
    assert mem.current == "node 0: 8.0 GiB, 4.0 GiB free, node 1: 4.0 GiB, 1.0 GiB free", mem.current
    assert "DIMMs per node" in mem.fix and "smaller format" in mem.fix, mem.fix  # unbalanced, and 6 GiB > 5 GiB free
    # Now the same box set as recommended.
    write(f"{root}/proc/cmdline", "ro isolcpus=1,3 nohz_full=1,3 rcu_nocbs=1,3\n")
    write(f"{root}/proc/sys/vm/swappiness", "1\n")
    write(f"{root}/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n")
    shutil.rmtree(f"{root}/sys/devices/system/cpu/intel_pstate")
    shutil.rmtree(f"{root}/sys/devices/system/cpu/cpu1")
    checks = {c.name: c for c in oscheck.checklist(root, TOPOLOGY, RECOMMENDATIONS, model, 1 << 30)}
    for name in ("isolation", "vm.swappiness", "transparent hugepages"):
        assert checks[name].status == "ok" and not checks[name].fix, checks[name]
    assert checks["boost (turbo)"].status == "unavailable", checks["boost (turbo)"]  # a VM: no cpufreq driver
    assert oscheck.kernel_cmdline(TOPOLOGY, 1, True, "always") == [
        "isolcpus=1,3", "nohz_full=1,3", "rcu_nocbs=1,3", "transparent_hugepage=always", "nosmt"]


def test_page_cache_residency_by_mincore(ctx):
    path = os.path.join(ctx.workdir, "resident.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(4 << 20))
        f.flush()
        os.fsync(f.fileno())
    with open(path, "rb") as f:
        f.read()
    assert oscheck.resident_fraction(path) == 1.0
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    after = oscheck.resident_fraction(path)
    if after == 1.0:
        pytest.skip("this filesystem keeps the pages (tmpfs?); the resident case passed")
    assert after < 0.5, after


def tiny_shape():
    """2 layers, dim 64, vocab 100, its own output matrix, as `quantize --type q8_0` writes it:
    64x64 matrices at 34/32 bytes per weight, ffn_down (48 columns) in F16. Built by hand, so
    every byte is countable; roofline reads it as it is."""
    tensors = [("token_embd.weight", 100, 64, "q8_0", 100 * 68)]
    for layer in range(2):
        tensors += [(f"blk.{layer}.attn_norm.weight", 1, 64, "f32", 256),
                    (f"blk.{layer}.attn_q.weight", 64, 64, "q8_0", 64 * 64 * 34 // 32),
                    (f"blk.{layer}.ffn_down.weight", 64, 48, "f16", 64 * 48 * 2)]  # 48 columns: not whole blocks
    tensors += [("output.weight", 100, 64, "q8_0", 100 * 68)]
    return roofline.Shape(layers=2, dim=64, kv_dim=64, vocab=100, tensors=tensors)


def test_roofline_sizes_come_from_quantizes_plan(ctx):
    """A real file's sizes under a format are the binary's plan (`info --costs --dtype`), checked
    here by hand; test_registry checks the plan against what quantize writes for every format."""
    path = os.path.join(ctx.workdir, "plan-f32.gguf")
    run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", "2", "--dim", "64", "--ffn", "80", "--heads", "4",
         "--kv-heads", "2", "--vocab", "1000", "--ctx", "256", "--dtype", "f32", "-o", path])
    shape = roofline.model_shape(measure.model_info(ctx.cpullm, path), ctx.cpullm)
    sizes = dict(roofline.tensor_bytes(shape, "q8_0"))
    assert sizes["blk.0.attn_q.weight"] == 64 * 64 * 34 // 32 and sizes["blk.0.attn_norm.weight"] == 256
    assert sizes["blk.0.ffn_down.weight"] == 64 * 80 * 2  # 80 columns: not whole blocks, F16
    # Under q4_0 the output layer is Q6_K, which 64 columns cannot hold: Q8_0, as llama.cpp falls back.
    assert dict(roofline.tensor_bytes(shape, "q4_0"))["output.weight"] == 1000 * 64 * 34 // 32
    assert dict(roofline.tensor_bytes(shape, "q8_0", keep="first"))["blk.0.attn_q.weight"] == 64 * 64 * 4
    assert dict(roofline.tensor_bytes(shape, None)) == {name: size for name, *_, size in shape.tensors}


def test_roofline_against_hand_computed_numbers(ctx):
    shape = tiny_shape()
    # One decode step at q8_0 reads: one embedding row 68 B, per layer 256 + 4352 + 6144, output 6800.
    weights = 68 + 2 * (256 + 4352 + 6144) + 6800
    assert roofline.decode_bytes(shape, "q8_0") == weights == 28372
    kv = 2 * 2 * 64 * 100 * 4  # K and V, 2 layers, kv dim 64, 100 positions, F32
    roofs = roofline.Roofs(bandwidth_gbs=1.0)
    tps, bound = roofline.predict_decode(shape, "q8_0", roofs, batch=1, position=100, kv_type="f32")
    assert abs(tps - 1e9 / (weights + kv)) < 1e-6 and bound == "memory bandwidth", (tps, bound)
    # An F16 cache reads half the KV bytes (the KV type is an input, never a hidden F32).
    tps, _ = roofline.predict_decode(shape, "q8_0", roofs, batch=1, position=100, kv_type="f16")
    assert abs(tps - 1e9 / (weights + kv // 2)) < 1e-6, tps
    # Each parallel loop of the step adds a fork/join: 100 loops of 10 us on top of the memory time.
    slow_sync = roofline.Roofs(bandwidth_gbs=1.0, fork_join_s=10e-6)
    tps, bound = roofline.predict_decode(shape, "q8_0", slow_sync, 1, 100, "f16", loops=100)
    assert abs(tps - 1 / ((weights + kv // 2) / 1e9 + 100 * 10e-6)) < 1e-6 and bound == "fork/join (100 parallel loops a step)", bound
    # Prefill of 10 tokens at 1 GFLOP/s: 2 x (2 x (64x64 + 64x48) + 100x64) x 10 matrix FLOPs
    # + 2 x layers x dim x 10^2 attention FLOPs; memory: the file's bytes once at 1 GB/s.
    flops = 2 * (2 * (64 * 64 + 64 * 48) + 100 * 64) * 10 + 2 * 2 * 64 * 100
    seconds, bound = roofline.predict_prefill(shape, "f32", roofline.Roofs(bandwidth_gbs=1.0, gemm_gflops={"f32": 1.0}), 10)
    assert abs(seconds - flops / 1e9) < 1e-12 and bound == "compute", (seconds, flops)


def test_host_model_against_hand_computed_numbers(ctx):
    shape = tiny_shape()
    # Q8_0 matrices: attn_q 4352 B (q8_0) and ffn_down 6144 B (F16 fallback) per layer, output 6800 B (q8_0).
    # Layer rates at 1 and 2 tokens a step (two sequences decoded together), and at the prompt
    # chunks' 4, 16 and 20 tokens.
    layer_gbs = {("q8_0", 1): 1.0, ("f16", 1): 2.0, ("q8_0", 2): 1.5, ("f16", 2): 3.0, ("q8_0", 4): 2.0,
                 ("f16", 4): 4.0, ("q8_0", 16): 4.0, ("f16", 16): 8.0, ("q8_0", 20): 5.0, ("f16", 20): 10.0}
    rates = roofline.KernelRates(threads=1, bandwidth_gbs=10.0, layer_gbs=layer_gbs)
    profile = {"phases": [
        {"name": "prefill", "tokens": 10, "seconds": 0.010,
         "regions": [{"name": "q_proj", "seconds": 0.004}, {"name": "attention", "seconds": 0.002},
                     {"name": "lm_head", "seconds": 0.001}, {"name": "rope", "seconds": 0.0005}]},
        {"name": "decode", "tokens": 4, "seconds": 0.008,
         "regions": [{"name": "ffn_down", "seconds": 0.004}, {"name": "attention", "seconds": 0.002},
                     {"name": "attn_norm", "seconds": 0.0004}]}]}
    overhead = roofline.overhead_from_profile(profile)
    # Overhead: the phase less its matrix regions; decode per step, at mean position 10 + 1.5; of
    # it, the regions (attn_norm) per token, the rest (outside every region) the step's.
    assert abs(overhead.decode_s - 0.002 / 4) < 1e-12 and abs(overhead.decode_attention_s - 0.002 / 4) < 1e-12
    assert abs(overhead.decode_per_token_s - 0.0004 / 4) < 1e-12
    assert overhead.decode_position == 11.5 and overhead.prompt == 10
    assert abs(overhead.prefill_s - 0.003) < 1e-12 and abs(overhead.prefill_attention_s - 0.002) < 1e-12
    # Calibration runs: each part's least time (a slow minute spoils one part of one run).
    slow = roofline.Overhead(0.004, 0.001, 0.0004, 11.5, 0.002, 0.003, 10)
    least = roofline.least_overhead([slow, overhead])
    assert (least.decode_s, least.decode_per_token_s, least.decode_attention_s) == \
        (overhead.decode_s, overhead.decode_per_token_s, 0.0004), least
    assert (least.prefill_s, least.prefill_attention_s, least.decode_position, least.prompt) == (0.002, 0.002, 11.5, 10)
    # Decode at position 22.5 (twice the calibration's positions + 1, less 1): the attention part doubles.
    tps, parts = roofline.predict_decode_host(shape, "q8_0", rates, overhead, 22.0)
    matrices = 2 * 4352 / 1e9 + 2 * 6144 / 2e9 + 6800 / 1e9
    assert abs(parts["matrices"] - matrices) < 1e-15, parts
    assert abs(parts["attention"] - 0.0005 * 23 / 12.5) < 1e-15 and parts["other"] == overhead.decode_s
    assert abs(tps - 1 / (matrices + 0.0005 * 23 / 12.5 + 0.0005)) < 1e-9
    # A decode rate above the read bandwidth is used as it is: matvec_decode's set, like the
    # model's step, can be partly cache-resident.
    # Two sequences a step: the matrices at the 2-token rates, attention per sequence, the
    # per-token overhead once more; tokens/s counts both sequences' tokens.
    tps, parts = roofline.predict_decode_host(shape, "q8_0", rates, overhead, 22.0, sequences=2)
    matrices2 = 2 * 4352 / 1.5e9 + 2 * 6144 / 3e9 + 6800 / 1.5e9
    assert abs(parts["matrices"] - matrices2) < 1e-15 and abs(parts["attention"] - 2 * 0.0005 * 23 / 12.5) < 1e-15
    assert abs(parts["other"] - 0.0006) < 1e-15 and abs(tps - 2 / sum(parts.values())) < 1e-9, parts
    above_roof = roofline.KernelRates(threads=1, bandwidth_gbs=1.5, layer_gbs=layer_gbs)
    _, parts = roofline.predict_decode_host(shape, "q8_0", above_roof, overhead, 22.0)
    assert abs(parts["matrices"] - matrices) < 1e-15, parts
    # Prefill of 20 tokens in chunks of 16 and 4, each through the matrices but the output layer
    # at the rate of its length, then the output layer once as a matvec; overhead scaled from
    # the 10-token calibration: attention x 4, the rest x 2.
    assert roofline.prefill_chunks(20, 1, 16) == [16, 4] and roofline.prefill_chunks(10, 2, 16) == [16, 4]
    assert roofline.prefill_chunks(64, 4) == [256] and roofline.prefill_chunks(600, 1) == [512, 88]
    seconds, parts = roofline.predict_prefill_host(shape, "q8_0", rates, overhead, 20, chunk=16)
    gemm = 2 * 4352 / 4e9 + 2 * 6144 / 8e9 + 2 * 4352 / 2e9 + 2 * 6144 / 4e9
    assert abs(parts["matrices"] - gemm) < 1e-15 and abs(parts["output layer"] - 6800 / 1e9) < 1e-15, parts
    assert abs(parts["attention"] - 0.008) < 1e-12 and abs(parts["other"] - 0.006) < 1e-12
    assert abs(seconds - sum(parts.values())) < 1e-15
    # Two prompts of 10 tokens, one after the other, in chunks of 16: the same 20 tokens of GEMM,
    # one prompt ending in each chunk (the output layer twice at the 1-token rate), attention and
    # the rest per prompt; in one 512-token chunk both end together (the 2-token rate, once).
    seconds, parts = roofline.predict_prefill_host(shape, "q8_0", rates, overhead, 10, chunk=16, sequences=2)
    assert abs(parts["matrices"] - gemm) < 1e-15 and abs(parts["output layer"] - 2 * 6800 / 1e9) < 1e-15, parts
    assert abs(parts["attention"] - 0.004) < 1e-12 and abs(parts["other"] - 0.006) < 1e-12
    # After 20 cached positions (bench -d 20) each of the 10 tokens also meets those 20: 50 + 200
    # query-key pairs against the calibration's 50, attention x 5; the rest as without.
    _, deep = roofline.predict_prefill_host(shape, "q8_0", rates, overhead, 10, chunk=16, sequences=2, depth=20)
    assert abs(deep["attention"] - 5 * parts["attention"]) < 1e-12 and deep["other"] == parts["other"], deep
    _, parts = roofline.predict_prefill_host(shape, "q8_0", rates, overhead, 10, sequences=2)
    assert abs(parts["output layer"] - 6800 / 1.5e9) < 1e-15, parts
    assert abs(parts["matrices"] - (2 * 4352 / 5e9 + 2 * 6144 / 10e9)) < 1e-15, parts
    # What tune measures for a space: the decode steps' tokens, the prompt chunks' and 1.
    assert tune.step_tokens([{"sequences": 4}, {"sequences": 1}], {"prompt": 64}) == [1, 4, 64, 256]
    assert tune.step_tokens([{"batch": 32}], {"prompt": 600}) == [1, 24, 32]


def layer_shape(dim, ffn, kv_dim, fmt="f16"):
    """One decode layer of a LLaMA at a real shape, with its embedding table and output layer."""
    matrices = {"attn_q": (dim, dim), "attn_k": (kv_dim, dim), "attn_v": (kv_dim, dim), "attn_output": (dim, dim),
                "ffn_gate": (ffn, dim), "ffn_up": (ffn, dim), "ffn_down": (dim, ffn)}
    tensors = [("token_embd.weight", 32000, dim, fmt, 32000 * roofline.registry.row_bytes(fmt, dim)),
               ("blk.0.attn_norm.weight", 1, dim, "f32", 4 * dim)]
    tensors += [(f"blk.0.{name}.weight", rows, cols, fmt, rows * roofline.registry.row_bytes(fmt, cols))
                for name, (rows, cols) in matrices.items()]
    tensors += [("output.weight", 32000, dim, fmt, 32000 * roofline.registry.row_bytes(fmt, dim))]
    return roofline.Shape(layers=1, dim=dim, kv_dim=kv_dim, vocab=32000, tensors=tensors)


def test_host_model_picks_the_benchmarked_shapes(ctx):
    llama7b = layer_shape(4096, 11008, 4096)
    tinyllama = roofline.named_shape("tinyllama-1.1b", ctx.cpullm)
    # The benchmarked layer by the size of the model's first layer; stories-sized models get the smaller.
    assert roofline.nearest_decode_shape(tinyllama) == (2048, 5632, 256)
    assert roofline.nearest_decode_shape(llama7b) == (4096, 11008, 4096)
    assert roofline.nearest_decode_shape(layer_shape(5120, 13824, 5120)) == (4096, 11008, 4096)  # LLaMA-13B
    assert roofline.nearest_decode_shape(tiny_shape()) == (2048, 5632, 256)
    # The set: the decode step's MiB in the format (rounded up), at most DECODE_SET_MAX_MIB.
    assert roofline.decode_set_mib(tiny_shape(), "q8_0") == 1  # 28,372 bytes
    # An embedding row and 22 layers in Q4_0 (two F32 norms each), the final norm, the output layer in Q6_K.
    step = roofline.decode_bytes(tinyllama, "q4_0")
    assert step == 2048 * 18 // 32 + 22 * (2 * 4 * 2048 + (2 * 2048 * 2048 + 2 * 256 * 2048 + 3 * 5632 * 2048) * 18 // 32) \
        + 4 * 2048 + 32000 * 2048 * 210 // 256, step
    assert roofline.decode_set_mib(tinyllama, "q4_0") == math.ceil(step / (1 << 20)) < roofline.DECODE_SET_MAX_MIB
    assert roofline.decode_set_mib(layer_shape(8192, 22016, 8192), "f32") == roofline.DECODE_SET_MAX_MIB == 1024


def test_numa_strategies_on_the_e5(ctx):
    profile_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tuning", "profiles", "e5-4627v4.json")
    with open(profile_path) as f:
        e5 = json.load(f)
    # A 1 GB model (one 1e9-byte matrix) on 4 sockets of 76.8 GB/s at 0.75 efficiency, 32 GB/s links.
    shape = roofline.Shape(layers=1, dim=1, kv_dim=1, vocab=1,
                           tensors=[("token_embd.weight", 1, 1, "f32", 4), ("output.weight", 250_000, 1000, "f32", 10 ** 9)])
    expected = {"shard": 4 * 76.8 * 0.75, "replicate": 4 * 76.8 * 0.75,
                "interleave": 32 * 4 / 0.75,  # link-bound: 3/4 of the bytes over 4 x 32 GB/s
                "first-touch": 32 / 0.75}     # link-bound: 3/4 of the bytes through node 0's 32 GB/s
    for strategy, gbs in expected.items():
        roofs = roofline.profile_roofs(e5, 4, 10, strategy, 0.75, 0.4)
        tps, bound = roofline.predict_decode(shape, "f32", roofs, 1, 0, "f16")
        assert abs(tps - gbs) / gbs < 1e-3, (strategy, tps, gbs, bound)
    # Compute roofs: 40 cores x the sustained AVX2 all-core clock, a range for the E5 v4 (2.2-2.6 GHz:
    # base less Haswell-EP's AVX offset, to base; never the base alone) x 0.4 x 32 FLOP/cycle (FP32),
    # 32 ops/cycle (the signed int8 path of Q8_0: maddubs and madd share port 0) and 64 (Q4_0's
    # nibbles skip the madd).
    assert roofline.clock_field(e5) == "avx2_clock_ghz" and e5["avx2_clock_ghz"]["value"] == [2.2, 2.6]
    for corner, clock in (("low", 2.2), ("mid", 2.4), ("high", 2.6)):
        gemm = roofline.profile_roofs(e5, 4, 10, "shard", 0.75, 0.4, corner).gemm_gflops
        for fmt, per_cycle in {"f32": 32, "q8_0": 32, "int8-channel": 32, "q4_0": 64, "q4_0-r8": 64}.items():
            assert abs(gemm[fmt] - 40 * clock * per_cycle * 0.4) < 1e-9, (corner, fmt, gemm[fmt])
