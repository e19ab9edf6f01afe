"""End-to-end checks of `cpullm profile` on a tiny synthetic model.

Every region's FLOPs and bytes equal the analytic count computed here from the model's shape
(independently of engine/instrument/op_costs.cpp); the regions' times add up to each phase's
measured time within a tolerance; counters are counted or explained (a machine without a PMU:
software events only, "no PMU"); energy is measured or "unavailable here"; roofs come from a measurement or from a
hardware profile; --prefetch maps the weights without changing a count; -np batches sequences;
--overhead reports the three modes; bad input ends in one 'cpullm: error:' line.
"""
import json
import os
import subprocess

import pytest

import tuning
from cli_checks import expect_error, run

SHAPE = dict(layers=2, dim=256, ffn=768, heads=8, kv_heads=4, vocab=1024)
PROMPT, GENERATED = 24, 12
PROFILES = os.path.join(os.path.dirname(os.path.abspath(tuning.__file__)), "profiles")


def profile_json(ctx, *args, env=None):
    proc = subprocess.run([ctx.cpullm, "profile", "-m", ctx.model, "-t", "2", "--json", *args], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def default_run(ctx):
    """One profile of PROMPT + GENERATED tokens with counters, shared by the checks that read it."""
    if not hasattr(ctx, "default_run"):
        ctx.default_run = profile_json(ctx, "-p", str(PROMPT), "-n", str(GENERATED))
    return ctx.default_run


def regions(phase):
    return {r["name"]: r for r in phase["regions"]}


def expected_costs(prompt, generated):
    """{phase: {region: (calls, flops, bytes)}} from the shape alone. F16 weights (2 bytes per
    value), FP32 activations, the default KV cache (F16: 2 bytes a value), greedy sampling."""
    s = SHAPE
    L, d, f, v = s["layers"], s["dim"], s["ffn"], s["vocab"]
    head = d // s["heads"]
    kv = s["kv_heads"] * head

    def proj(rows, cols, tokens, calls):  # weights once per call, x in, y out per token
        return (calls, 2.0 * rows * cols * tokens * calls, calls * (rows * cols * 2 + tokens * (rows + cols) * 4))

    def attention(first, queries):  # one call per layer
        pairs = s["heads"] * (queries * first + queries * (queries + 1) / 2)
        return pairs * (4 * head + 5), (first + queries) * 2 * kv * 2 + 2 * queries * d * 4

    def per_token_ops(tokens, calls, positions):
        att = [attention(first, n) for first, n in positions]
        return {
            "attn_norm": (calls, 4.0 * d * tokens * calls, calls * (2 * tokens + 1) * d * 4),
            "ffn_norm": (calls, 4.0 * d * tokens * calls, calls * (2 * tokens + 1) * d * 4),
            "q_proj": proj(d, d, tokens, calls),
            "k_proj": proj(kv, d, tokens, calls),
            "v_proj": proj(kv, d, tokens, calls),
            "o_proj": proj(d, d, tokens, calls),
            "ffn_gate": proj(f, d, tokens, calls),
            "ffn_up": proj(f, d, tokens, calls),
            "ffn_down": proj(d, f, tokens, calls),
            "rope": (calls, 3.0 * (d + kv) * tokens * calls, calls * 2 * (d + kv) * tokens * 4),
            "ffn_act": (calls, 4.0 * f * tokens * calls, calls * 3 * f * tokens * 4),
            "attention": (calls, L * sum(a[0] for a in att), L * sum(a[1] for a in att)),
        }

    prefill = per_token_ops(prompt, L, [(0, prompt)])
    prefill.update({
        "embedding": (1, 0.0, prompt * (d * 2 + d * 4)),
        "final_norm": (1, 4.0 * d, 3 * d * 4),  # only the last token's logits are wanted
        "lm_head": proj(v, d, 1, 1),
    })
    decode = per_token_ops(1, L * generated, [(prompt + i, 1) for i in range(generated)])
    decode.update({
        "embedding": (generated, 0.0, generated * (d * 2 + d * 4)),
        "final_norm": (generated, 4.0 * d * generated, generated * 3 * d * 4),
        "lm_head": proj(v, d, 1, generated),
        "sampling": (generated, 1.0 * v * generated, generated * v * 4),
    })
    return {"prefill": prefill, "decode": decode}


def test_costs_match_the_analytic_count(ctx):
    data = default_run(ctx)
    expected = expected_costs(PROMPT, GENERATED)
    assert [p["name"] for p in data["phases"]] == ["prefill", "decode"]
    for phase in data["phases"]:
        got = regions(phase)
        assert set(got) == set(expected[phase["name"]]), (phase["name"], sorted(got))
        for name, (calls, flops, nbytes) in expected[phase["name"]].items():
            r = got[name]
            assert r["calls"] == calls, (phase["name"], name, r["calls"], calls)
            # Decode's q/k/v and gate/up run fused (one matvec_group): their calls are shared.
            fused = phase["name"] == "decode" and name in ("q_proj", "k_proj", "v_proj", "ffn_gate", "ffn_up")
            assert r["shared_calls"] == (calls if fused else 0), (phase["name"], name, r["shared_calls"])
            assert abs(r["flops"] - flops) <= 1e-9 * max(flops, 1), (phase["name"], name, r["flops"], flops)
            assert abs(r["bytes"] - nbytes) <= 1e-9 * nbytes, (phase["name"], name, r["bytes"], nbytes)
    print(f"{sum(len(p['regions']) for p in data['phases'])} region rows")


def test_region_times_add_up_to_the_phase(ctx):
    # Without counters: their reads lie between the regions' clock reads, outside every region.
    # Each op an OpenMP region of its own (OMP_WAIT_POLICY=passive): with a thread team, each
    # pass's start and join also lie outside the regions, microseconds on a quiet host but up to
    # milliseconds while other processes hold the cores (CTest runs two tests at once).
    data = profile_json(ctx, "-p", str(PROMPT), "-n", str(GENERATED), "--no-counters",
                        env=dict(os.environ, OMP_WAIT_POLICY="passive"))
    teamed = profile_json(ctx, "-p", str(PROMPT), "-n", str(GENERATED), "--no-counters")
    for phase in teamed["phases"]:
        inside = sum(r["seconds"] for r in phase["regions"])
        assert inside <= phase["seconds"] and abs(phase["outside_seconds"] - (phase["seconds"] - inside)) < 1e-9
    notes = []
    for phase in data["phases"]:
        inside = sum(r["seconds"] for r in phase["regions"])
        assert inside <= phase["seconds"], (phase["name"], inside, phase["seconds"])
        assert abs(phase["outside_seconds"] - (phase["seconds"] - inside)) < 1e-9
        # What lies outside regions (residual adds, loop bookkeeping, the clock reads) is small.
        assert inside >= 0.8 * phase["seconds"], (phase["name"], inside, phase["seconds"])
        assert phase["tokens"] == (PROMPT if phase["name"] == "prefill" else GENERATED)
        notes.append(f"{phase['name']} {100 * inside / phase['seconds']:.1f}% in regions")
        for r in phase["regions"]:
            assert r["gflops"] >= 0 and r["gbs"] > 0 and 0 <= r["roof_fraction"], r
            assert r["bound"] in ("memory", "compute"), r
    print(", ".join(notes))


def test_counters_counted_or_explained(ctx):
    data = default_run(ctx)
    counters = data["counters"]
    unavailable = {u["name"]: u["reason"] for u in counters["unavailable"]}
    for name in ["cycles", "instructions", "cache-references", "cache-misses", "LLC-load-misses", "task-clock",
                 "page-faults"]:
        assert (name in counters["available"]) != (name in unavailable), name
        if name in unavailable:
            assert unavailable[name], name
    if not os.path.exists("/sys/bus/event_source/devices/cpu"):
        assert "no PMU" in unavailable["cycles"], unavailable["cycles"]
    if "task-clock" not in counters["available"]:
        pytest.skip(f"task-clock unavailable: {unavailable['task-clock']}")
    decode = data["phases"][1]
    cpu_ns = sum(r["counters"]["task-clock"] for r in decode["regions"])
    # CPU time of the threads in the regions: more than nothing, at most threads x the phase's
    # wall time. Not x the regions' own wall time: other threads' counters are read from the main
    # thread, and a read can charge a short region with a worker's spinning just before it (seen
    # here: ~0.1 ms of CPU time per call of a 1 us region; docs/instrumentation.md).
    assert 0 < cpu_ns * 1e-9 <= data["threads"] * decode["seconds"] * 1.1 + 1e-3, (cpu_ns, decode["seconds"])
    print(f"available {counters['available']}; unavailable {sorted(unavailable)}")


def test_energy_measured_or_unavailable(ctx):
    data = default_run(ctx)
    energy = data["energy"]
    if energy["available"]:
        assert all(p["energy"]["package_j"] > 0 for p in data["phases"])
        print("RAPL present")
        return
    assert energy["reason"].startswith("unavailable here: "), energy
    assert all(p["energy"] is None for p in data["phases"])
    if not os.path.exists("/sys/class/powercap"):
        assert "/sys/class/powercap does not exist" in energy["reason"], energy
    print(energy["reason"])


def test_page_sizes_reported(ctx):
    """How much of the model the run had in 2 MiB pages: a share of the file, or null where unknown."""
    pages = default_run(ctx)["pages"]
    assert pages["model_bytes"] == os.path.getsize(ctx.model), pages
    huge = pages["huge_page_bytes"]
    if huge is None:
        assert not os.path.exists("/proc/self/smaps"), pages
        print("unknown: no /proc/self/smaps")
        return
    assert 0 <= huge <= pages["model_bytes"] and huge % (2 << 20) == 0, pages
    print(f"{huge / pages['model_bytes']:.0%} of the model in 2 MiB pages")


def test_prefetch_maps_weights_and_changes_no_count(ctx):
    """--prefetch (as generate's): its thread maps the weights, and every region's analytic
    FLOPs and bytes stay those of the run without it."""
    plain, prefetched = default_run(ctx), profile_json(ctx, "-p", str(PROMPT), "-n", str(GENERATED), "--prefetch")
    assert not plain["prefetch"] and plain["prefetched_bytes"] == 0, plain
    assert prefetched["prefetch"] and 0 < prefetched["prefetched_bytes"] <= os.path.getsize(ctx.model), prefetched
    for a, b in zip(plain["phases"], prefetched["phases"]):
        costs = lambda phase: {r["name"]: (r["calls"], r["flops"], r["bytes"]) for r in phase["regions"]}
        assert costs(a) == costs(b), (a["name"], costs(a), costs(b))
    print(f"{prefetched['prefetched_bytes'] / 2**20:.1f} MiB mapped by the prefetch thread")


def test_sequences_batch_the_same_work(ctx):
    """-np 3 (spelled as llama.cpp does): the prompt prefilled in three copies in one batch, each
    decode step one token of each sequence. Every projection is called as often as for one
    sequence, its weights charged once a call, while its FLOPs and the output layer's triple;
    prompt attention runs once per sequence, decode attention once a layer for all of them
    (one parallel loop), sampling once per sequence and step."""
    one = default_run(ctx)
    three = json.loads(run([ctx.cpullm, "profile", "-m", ctx.model, "-t", "2", "--json", "--no-counters",
                            "-p", str(PROMPT), "-n", str(GENERATED), "-np", "3"]).stdout)
    assert three["sequences"] == 3 and one["sequences"] == 1, (three["sequences"], one["sequences"])
    for a, b in zip(one["phases"], three["phases"]):
        assert b["tokens"] == 3 * a["tokens"], (b["name"], b["tokens"], a["tokens"])
        single, batched = regions(a), regions(b)
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "ffn_gate", "ffn_up", "ffn_down", "lm_head", "attention"):
            x, y = single[name], batched[name]
            calls = 3 * x["calls"] if name == "attention" and b["name"] == "prefill" else x["calls"]
            assert y["calls"] == calls, (b["name"], name, y["calls"], x["calls"])
            assert abs(y["flops"] - 3 * x["flops"]) <= 1e-9 * y["flops"], (b["name"], name, y["flops"], x["flops"])
            if name.endswith("_proj") or name.startswith("ffn_"):
                assert x["bytes"] < y["bytes"] < 3 * x["bytes"], (b["name"], name, y["bytes"], x["bytes"])
    assert regions(three["phases"][1])["sampling"]["calls"] == 3 * GENERATED
    bad = run([ctx.cpullm, "profile", "-m", ctx.model, "-np", "0"], expect_ok=False)  # CLI11's range check
    assert bad.returncode not in (0, -6, -11) and "--np" in bad.stderr, (bad.returncode, bad.stderr)
    print(f"decode {three['phases'][1]['tokens_per_s']:.0f} tokens/s at 3 sequences, {one['phases'][1]['tokens_per_s']:.0f} at 1")


def test_dispatch_says_how_threads_meet(ctx):
    assert default_run(ctx)["dispatch"] == "one thread team per forward pass, each parallel op a job"
    passive = profile_json(ctx, "-p", "4", "-n", "2", "--no-counters", env=dict(os.environ, OMP_WAIT_POLICY="passive"))
    assert "OMP_WAIT_POLICY=passive: no thread team" in passive["dispatch"]
    one = run([ctx.cpullm, "profile", "-m", ctx.model, "-t", "1", "--json", "-p", "4", "-n", "2", "--no-counters"])
    assert json.loads(one.stdout)["dispatch"] == "one thread, no parallel regions"


def test_text_table(ctx):
    out = run([ctx.cpullm, "profile", "-m", ctx.model, "-p", "8", "-n", "4", "-t", "2"]).stdout
    for fragment in ["dispatch: one thread team", "roofs: memory", "GB/s (measured: read of 256 MiB", "compute", "ridge", "counters:", "likwid:",
                     "energy:", "pages: model mapped ", "% in 2 MiB pages", "prefill: 8 tokens", "decode: 4 tokens", "region", "q_proj", "lm_head", "sampling",
                     "(outside)"]:
        assert fragment in out, f"{fragment!r} not in:\n{out}"


def test_roofs_from_a_hardware_profile(ctx):
    with open(os.path.join(PROFILES, "e5-4627v4.json")) as f:
        profile = json.load(f)
    measured = profile.get("memory_bandwidth_measured_gbs_per_package", {}).get("value")
    per_package = measured if measured is not None else profile["memory_bandwidth_gbs_per_package"]["value"]
    e5 = profile_json(ctx, "-p", "4", "-n", "2", "--hardware", "e5-4627v4")
    roofs = e5["roofs"]
    # The GEMM blocks for the emulated box's caches: the E5 v4's 32 KiB L1d and 256 KiB L2, not this machine's.
    assert e5["gemm_blocking"].startswith(
        "GEMM blocked for an L1d of 32 KiB and an L2 of 256 KiB per core (hardware profile e5-4627v4"), e5
    assert roofs["memory_source"].startswith("profile e5-4627v4"), roofs
    assert abs(roofs["memory_bytes_per_s"] - 4 * per_package * 1e9) < 1e3, roofs
    # The compute roof at the sustained AVX2 all-core clock (the E5's kernels' width), the top of
    # its range: a roof is a bound; never the base clock.
    per_cycle = profile["fp32_flops_per_cycle_per_core"]["value"]
    clock = profile["avx2_clock_ghz"]["value"]
    expected = 40 * max(clock if isinstance(clock, list) else [clock]) * 1e9 * per_cycle
    assert abs(roofs["flops_per_s"] - expected) < 1e3, roofs
    assert "all-core AVX2 clock" in roofs["compute_source"], roofs
    # host.json leaves the figures unknown: measured here instead, and said so.
    host = profile_json(ctx, "-p", "4", "-n", "2", "--hardware", "host")["roofs"]
    assert "profile host has no memory bandwidth" in host["memory_source"], host
    assert "measured" in host["memory_source"] and host["memory_bytes_per_s"] > 0, host


def test_overhead_modes(ctx):
    data = profile_json(ctx, "-p", "8", "-n", "4", "--overhead", "-r", "1")
    modes = [m["mode"] for m in data["overhead"]]
    assert modes[:2] == ["off", "regions"], modes
    off = data["overhead"][0]
    assert off["prefill_ratio"] == 1 and off["decode_ratio"] == 1, off
    assert all(m["decode_tokens_per_s"] > 0 and len(m["decode_samples"]) == 1 for m in data["overhead"])


def test_bad_input(ctx):
    expect_error([ctx.cpullm, "profile", "-m", ctx.model, "-p", "200", "-n", "100", "-c", "256"],
                 "exceeds the context of 256 positions")
    expect_error([ctx.cpullm, "profile", "-m", ctx.model, "--kv-type", "f8"], "f8")
    expect_error([ctx.cpullm, "profile", "-m", ctx.model, "--hardware", "no-such-box"], "no-such-box")
    expect_error([ctx.cpullm, "profile", "-m", ctx.bad_model], ctx.bad_model)


@pytest.fixture(scope="module")
def ctx(ctx):
    ctx.model = os.path.join(ctx.workdir, "tiny.gguf")
    s = SHAPE
    run([ctx.cpullm, "gen-model", "--shape", "custom", "--layers", str(s["layers"]), "--dim", str(s["dim"]),
         "--ffn", str(s["ffn"]), "--heads", str(s["heads"]), "--kv-heads", str(s["kv_heads"]), "--vocab",
         str(s["vocab"]), "--ctx", "256", "--dtype", "f16", "-o", ctx.model])
    ctx.bad_model = os.path.join(ctx.workdir, "truncated.gguf")
    with open(ctx.model, "rb") as src, open(ctx.bad_model, "wb") as dst:
        dst.write(src.read(1000))
    return ctx
