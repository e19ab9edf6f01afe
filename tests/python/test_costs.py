"""Issue 37: the cost report compares like with like. One test per finding, each against numbers
worked out here by hand or read from the sources the project cites: end-to-end throughput with
the prefill, full-load energy and a hand-computed day of cost, measured results counting
generated tokens of the matching test, the KV type, GPUs ranked on one kind of figure, sustained
clocks with intervals, the corrected profile facts, owning against renting, the per-step
overhead of small models, and the smaller errors; then the report built from an empty
database, its --json and bad assumptions."""
import json
import math
import os
import re
import subprocess

import pytest

from db_builder import Runs
from reports import gpu_data, inputs, predict, tco
from reports.serving import generated_rate
from tuning import measure, registry, roofline

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..")
ASSUMPTIONS = os.path.join(REPO, "reports", "assumptions.json")
SEED = {"model": "llama-7b", "n_seq": 32, "n_prompt": 512, "n_gen": 128, "kv_type": "f16"}
EFFICIENCY = {"bandwidth": 0.6, "compute": 0.5}
LLAMA_7B_PARAMS = 6_738_415_616
E5_HOST = dict(host="e5box", cpu_model="Intel(R) Xeon(R) CPU E5-4627 v4 @ 2.60GHz", cores=40, sockets=4, numa_nodes=4,
               memory_bytes=256 << 30, fingerprint="f-e5")


def report(ctx, name, *arguments):
    """(page text, --json) of `cpullm report ARGUMENTS` written to the work folder as NAME.*."""
    html, data = os.path.join(ctx.workdir, name + ".html"), os.path.join(ctx.workdir, name + ".json")
    proc = subprocess.run([ctx.cpullm, "report", *arguments, "-o", html, "--json", data], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(html) as f, open(data) as g:
        return f.read(), json.load(g)


@pytest.fixture(scope="module")
def empty(ctx):
    """The report of an empty database (no --db): every figure predicted, published or assumed."""
    return report(ctx, "empty")


def option(data, name_part, acquisition="own"):
    return next(o for o in data["tco"]["options"] if name_part in o["name"] and o["acquisition"] == acquisition)


def load(path):
    with open(path) as f:
        return json.load(f)


def test_cpu_throughput_counts_the_prefill(ctx):
    """Finding 1: generated tokens/s over prefill and decode, as TensorRT-LLM's gptSessionBenchmark
    times a whole generate call, from the project's own prefill model."""
    s = predict.predicted_cpu("e5-4627v4", SEED, "q8_0", EFFICIENCY)
    profile = predict.load_profile("e5-4627v4")
    roofs = roofline.profile_roofs(profile, 4, 10, "shard", 0.6, 0.5, "mid")
    shape = predict.llama_shape("llama-7b")
    prefill = 32 * roofline.predict_prefill(shape, "q8_0", roofs, 512)[0]
    loops = registry.costs(shape="llama-7b", dtype="q8_0", sequences=32)["decode_step"]["parallel_loops"]
    decode = 128 * 32 / roofline.predict_decode(shape, "q8_0", roofs, 32, 512 + 64, "f16", loops=loops)[0]
    assert s.prefill_s == pytest.approx(prefill) and s.decode_s == pytest.approx(decode)
    assert s.generated_tokens_per_s == pytest.approx(32 * 128 / (prefill + decode))
    assert s.ttft_s == s.prefill_s and s.tpot_s == pytest.approx(decode / 128)
    assert s.prompt_tokens_per_s == pytest.approx(32 * 512 / prefill)
    # On the E5 the 32 prompts take longer than the 128 steps: end to end is a small part of decode alone.
    assert prefill > 2 * decode and s.generated_tokens_per_s < 32 * 128 / decode / 3
    # The GPUs by the same definition: their prefill counts too.
    gpus, _ = gpu_data.load_gpus()
    a100 = predict.predicted_gpu(gpus["a100-80gb-sxm"], SEED, "f16", EFFICIENCY)
    assert a100.prefill_s > 0 and a100.generated_tokens_per_s == pytest.approx(32 * 128 / (a100.prefill_s + a100.decode_s))


def test_full_load_energy_and_a_hand_computed_day(ctx, empty):
    """Finding 2: kWh/day at full load is the load power all day (IT power, before PUE), whatever
    the fleet the cost model buys; and the cost of a day, worked out by hand."""
    _, data = empty
    a = load(ASSUMPTIONS)
    e5 = option(data, "E5-4627")
    assert e5["kwh_per_day_full_load"] == pytest.approx((4 * 135 + 180) * 24 / 1000) == pytest.approx(17.28)
    for name, gpu_id, option_index in (("A100", "a100-80gb-sxm", 2), ("H100", "h100-80gb-sxm", 3)):
        tdp = gpu_data.load_gpus()[0][gpu_id]["tdp_w"]["value"]
        platform = inputs.value(a["options"][option_index]["own"]["platform_load_w"])
        assert option(data, name)["kwh_per_day_full_load"] == pytest.approx((tdp + platform) * 24 / 1000)
    # One day of the E5 at 1e5 tokens/day and 123.1 tokens/s, idle 220 W, load 720 W, as the issue
    # worked it out: capital 1500 x 0.9 / (3 x 365) = 1.2329; busy 1e5 / (123.1 x 86400) = 0.0094018;
    # energy (220 + 500 x 0.0094018) W x 24 h x 1.5 x 0.15 USD/kWh = 1.2134; rack 2 x 25 x 12 / 365 = 1.6438.
    flat = {"max_utilisation": 0.7, "residual_value_fraction": 0.1, "amortisation_years": 3, "pue": 1.5,
            "rack_per_unit_per_month": 25, "electricity_per_kwh": 0.15}
    power = tco.Power(220, 720, "hand")
    assert tco.own_daily_cost({"price": 1500, "rack_units": 2}, 123.1, power, 1e5, flat) == pytest.approx(4.0901, abs=1e-4)
    # At the capacity of one server (70% busy) energy follows that busy share, not full load.
    capacity = 123.1 * 86400 * 0.7
    energy = (220 + 500 * 0.7) * 24 / 1000 * 1.5 * 0.15
    assert tco.own_daily_cost({"price": 1500, "rack_units": 2}, 123.1, power, capacity, flat) == \
        pytest.approx(1500 * 0.9 / 1095 + energy + 2 * 25 * 12 / 365)
    assert tco.full_load_kwh(power) == pytest.approx(720 * 24 / 1000)


def test_tco_prices_generated_tokens_of_the_matching_test(ctx):
    """Finding 3: a database with pp512, tg128 and pg512,128 rows of the seed workload on an E5
    box (and a pg512,64 and an F32 pg512,128): the TCO takes the pg512,128 row's generated
    tokens/s, never a prefill-only rate or prompt tokens."""
    db = Runs()
    run = db.add_run(kind="bench", command="cpullm bench --workload seed --db r.db", started_at="2026-11-30T10:00:00Z",
                     finished_at="2026-11-30T11:00:00Z", git_commit="abc1234", isa_level="avx2", **E5_HOST)
    base = dict(model_type="llama 7B q8_0", model_n_params=LLAMA_7B_PARAMS, format="q8_0", kv_type="f16", n_threads=40, n_seq=32,
                config_json="{}", metrics_json="{}")
    db.add_result(run, case_name="pp512/np32", test="pp", n_prompt=512, n_gen=0, avg_ts=2000.0, prompt_ts=2000.0, **base)
    db.add_result(run, case_name="tg128/np32", test="tg", n_prompt=0, n_gen=128, avg_ts=300.0, gen_ts=300.0, **base)
    db.add_result(run, case_name="pp512+tg128/np32", test="pg", n_prompt=512, n_gen=128, avg_ts=61.0, gen_ts=12.2,
                  prompt_ts=400.0, ttft_ms=41000.0, avg_ns=32 * 128 / 12.2 * 1e9, **base)
    db.add_result(run, case_name="pp512+tg64/np32", test="pg", n_prompt=512, n_gen=64, avg_ts=40.0, gen_ts=20.0, **base)
    db.add_result(run, case_name="pp512+tg128/np32/f32", test="pg", n_prompt=512, n_gen=128, avg_ts=90.0, gen_ts=50.0,
                  **dict(base, format="f32"))
    path = os.path.join(ctx.workdir, "seed-box.db")
    db.write(ctx.cpullm, path)
    _, data = report(ctx, "seed-box", "--db", path)
    e5 = option(data, "E5-4627")
    assert e5["figure_kind"] == "measured" and e5["generated_tokens_per_s"] == pytest.approx(12.2), e5
    assert e5["prefill_s"] == pytest.approx(41.0) and "(pp512+tg128/np32)" in e5["source"], e5["source"]
    c13 = next(c for c in data["claims"] if c["claim"].startswith("C13"))
    assert c13["verdict"] == "refuted" and c13["evidence"].startswith("12.2 generated tokens/s"), c13


def test_kv_type_is_an_input(ctx):
    """Finding 4: KV bytes at the workload's KV type (F16, as the seed suite runs), not a hidden
    F32: at 32 sequences and 576 positions, 9.7 GB instead of 19.3."""
    shape = predict.llama_shape("llama-7b")
    f16 = 32 * roofline.kv_bytes(shape, 576, "f16")
    assert f16 == 32 * 2 * 32 * 576 * 4096 * 2 and round(f16 / 1e9, 1) == 9.7
    assert 32 * roofline.kv_bytes(shape, 576, "f32") == 2 * f16
    # Memory-bound (no compute roof): the F16 cache decodes (weights + 19.3) / (weights + 9.7) faster.
    roofs = roofline.Roofs(bandwidth_gbs=184.32)
    f16_tps = roofline.predict_decode(shape, "q8_0", roofs, 32, 576, "f16")[0]
    f32_tps = roofline.predict_decode(shape, "q8_0", roofs, 32, 576, "f32")[0]
    weights = roofline.decode_bytes(shape, "q8_0")
    assert f16_tps / f32_tps == pytest.approx((weights + 2 * f16) / (weights + f16)) and f16_tps / f32_tps > 1.4
    # The report's prediction runs at the workload's KV type.
    as_f32 = predict.predicted_cpu("e5-4627v4", dict(SEED, kv_type="f32"), "q8_0", EFFICIENCY)
    assert "f32 KV cache" in as_f32.source and "f16 KV cache" in predict.predicted_cpu("e5-4627v4", SEED, "q8_0", EFFICIENCY).source


def test_gpus_are_ranked_on_one_kind_of_figure(ctx, empty):
    """Finding 5: no source ran the seed workload on a GPU, so both GPUs are predicted by the same
    model, and the H100 comes out cheaper per token than the A100 at volume; each published
    figure stands beside the model's prediction of its own workload; a figure counting prompt
    tokens is converted, a decode-only one refused; a ranking across kinds says so."""
    text, data = empty
    a100, h100 = option(data, "A100"), option(data, "H100")
    assert a100["figure_kind"] == h100["figure_kind"] == "predicted"
    assert h100["cost_per_mtok"]["1e9"] < a100["cost_per_mtok"]["1e9"]
    assert all(b["kinds"] == "both predicted" for b in data["tco"]["break_even"])
    row = re.search(r"<tr><td>a100</td><td>TensorRT-LLM 0\.5\.0</td>(?:(?!</tr>).)*?<td>2,048</td>.*?</tr>", text, re.S).group(0)
    assert "1,459" in row and "a100-80gb-sxm" in row and re.search(r"<td>\d\.\d\d</td>", row), row
    facts = inputs.load_facts()
    published = [{"gpu": "a100", "model": "llama-7b", "format": "f16", "engine": "vLLM 0.4.2", "n_seq": 32, "n_prompt": 512,
                  "n_gen": 128, "tokens_per_s": 6400.0, "counts": "prompt+generated", "source": "fact:vllm-benchmark-throughput"}]
    s = predict.published_gpu(published, "a100-80gb-sxm", SEED, facts)
    assert s.kind == "published" and s.generated_tokens_per_s == pytest.approx(6400 * 128 / 640)
    assert "6,400 x 128 / (512 + 128) = 1,280 generated tokens/s" in s.source, s.source
    assert predict.published_gpu([dict(published[0], counts="decode-only")], "a100-80gb-sxm", SEED, facts) is None
    # A measured H100 result of the workload against a predicted E5: the break-even says the kinds differ.
    results = os.path.join(ctx.workdir, "h100.json")
    with open(results, "w") as f:
        json.dump({"schema": "cpullm-gpu-results/1", "results": [dict(
            gpu="h100-80gb-sxm", model="llama-7b", format="f16", engine="vLLM 0.4.2", n_seq=32, n_prompt=512, n_gen=128,
            tokens_per_s=9000.0, counts="prompt+generated", host="gpubox", date="2026-11-01", command="benchmark_throughput.py")]}, f)
    _, mixed = report(ctx, "mixed", "--gpu-results", results)
    assert option(mixed, "H100")["figure_kind"] == "measured"
    assert option(mixed, "H100")["generated_tokens_per_s"] == pytest.approx(9000 * 128 / 640)
    b = next(b for b in mixed["tco"]["break_even"] if "E5" in b["cpu"] and "H100" in b["gpu"] and "owned" in b["gpu"])
    assert b["kinds"] == "ranks a predicted figure against a measured one: kinds differ", b


def test_predictions_use_sustained_clocks_with_intervals(ctx, empty):
    """Finding 6: compute roofs at the sustained all-core clock of the kernels' vector width, a
    range where no table is published, and predictions carry the interval it gives."""
    _, data = empty
    p6980 = predict.load_profile("xeon-6980p")
    assert roofline.clock_field(p6980) == "avx512_clock_ghz" and p6980["avx512_clock_ghz"]["value"] == [2.0, 3.2]
    for corner, clock in (("low", 2.0), ("high", 3.2)):
        roofs = roofline.profile_roofs(p6980, 2, 128, "shard", 1.0, 1.0, corner)
        assert roofs.gemm_gflops["q8_0"] == pytest.approx(256 * clock * 256), corner
    epyc = predict.load_profile("epyc-9355p")
    assert roofline.profile_roofs(epyc, 1, 32, "first-touch", 1.0, 1.0, "low").gemm_gflops["q8_0"] == pytest.approx(32 * 3.55 * 64)
    s = predict.predicted_cpu("e5-4627v4", SEED, "q8_0", {"bandwidth": {"value": 0.6, "range": [0.5, 0.8]},
                                                         "compute": {"value": 0.5, "range": [0.3, 0.7]}})
    low, high = s.interval()
    assert low < s.generated_tokens_per_s < high, (low, s.generated_tokens_per_s, high)
    e5 = option(data, "E5-4627")
    assert e5["generated_tokens_per_s_interval"][0] < e5["generated_tokens_per_s"] < e5["generated_tokens_per_s_interval"][1]
    # The engine reads a range and prints it; a range that runs backwards is refused in one line.
    topo = json.loads(subprocess.run([ctx.cpullm, "topo", "--hardware", "xeon-6980p", "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    assert topo["profile"]["avx512_clock_ghz"]["value"] == [2.0, 3.2]
    backwards = dict(predict.load_profile("e5-4627v4"), avx2_clock_ghz={"value": [2.6, 2.2], "source": "test"})
    path = os.path.join(ctx.workdir, "backwards.json")
    with open(path, "w") as f:
        json.dump(backwards, f)
    proc = subprocess.run([ctx.cpullm, "topo", "--hardware", path], capture_output=True, text=True)
    assert proc.returncode == 1 and 'field "avx2_clock_ghz": the range [2.6, 2.2] runs backwards' in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr


def test_profile_facts_are_fixed_or_marked(ctx, empty):
    """Finding 7: the profile facts the issue found wrong or undated, and the GPU prices and
    platform power, now sourced, dated or marked as assumptions with a range."""
    p8380, p6980, epyc, e5 = (predict.load_profile(n) for n in ("xeon-8380", "xeon-6980p", "epyc-9355p", "e5-4627v4"))
    assert p8380["idle_watts_per_package"]["value"] == 27 and "anandtech" in p8380["idle_watts_per_package"]["source"]
    assert p6980["price_usd_per_package"]["value"] == 12460 and "December 2024" in p6980["price_usd_per_package"]["source"]
    assert "assumption" in p6980["description"] and "SNC3" in p6980["description"]
    assert epyc["int8_ops_per_cycle_per_core"]["value"] == [64, 256] and "LLVM" in epyc["int8_ops_per_cycle_per_core"]["source"]
    assert e5["memory_bandwidth_gbs_per_package"]["value"] == 76.8 and "68 GB/s" in e5["memory_bandwidth_gbs_per_package"]["source"]
    a, facts = load(ASSUMPTIONS), inputs.load_facts()
    assert all(f["url"].startswith("https://") and f["date"] for f in facts.values())
    for o in a["options"]:
        for acquisition, key in (("own", "price"), ("rent", "price_per_hour")):
            if acquisition in o:
                assert inputs.dates(o[acquisition][key], facts), (o["name"], acquisition)
    h100 = a["options"][3]["own"]
    assert inputs.span(h100["price"]) == (33750, 38750)  # DGX H100 (2023) to an 8 x H100 node (2024), per GPU with its host share
    assert h100["platform_load_w"]["facts"] == ["dgx-h100-power"] and inputs.span(h100["platform_load_w"])[1] == 575
    assert a["options"][2]["own"]["platform_load_w"]["facts"] == ["dgx-a100-power"]
    text, _ = empty
    assert "2024-08-22, https://docs.google.com/spreadsheets" in text, "a price's date and address are on the page"


def test_owning_and_renting(ctx, empty):
    """Finding 8: each GPU is priced owned and rented; a rented hour covers energy and rack, billed
    by the hour or the second; C15's verdict says where it depends on the choice."""
    _, data = empty
    a = load(ASSUMPTIONS)
    rent = option(data, "A100", "rent")
    rate = rent["generated_tokens_per_s"]
    hourly = a["options"][2]["rent"]["price_per_hour"]["value"]
    assert rent["cost_per_mtok"]["1e5"] == pytest.approx(math.ceil(1e5 / rate / 3600) * hourly / 0.1)
    assert tco.rent_daily_cost({"price_per_hour": 2.0, "billing": "second"}, 1000.0, 1.8e6) == pytest.approx(1.0)
    assert tco.rent_daily_cost({"price_per_hour": 2.0, "billing": "hour"}, 1000.0, 1.8e6) == pytest.approx(2.0)
    assert tco.rent_daily_cost({"price_per_hour": 2.0, "billing": "hour"}, 1000.0, 3.61e6 * 3) == pytest.approx(8.0)
    c15 = next(c for c in data["claims"] if c["claim"].startswith("C15"))
    assert c15["verdict"] == "confirmed against owned GPUs, refuted against rented ones", c15
    assert "rented" in c15["evidence"] and "over the assumptions' ranges" in c15["evidence"]


def test_per_step_overhead_of_small_models(ctx):
    """Finding 9: a decode step pays a fork/join per parallel loop (the binary counts them); 40
    threads over 4 sockets make stories260K's steps cost microseconds, not nothing."""
    model = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.exists(model):
        pytest.skip(f"{model} is absent")
    costs = registry.costs(model=model, sequences=1)
    layers = costs["dims"]["n_layers"]
    assert costs["decode_step"]["parallel_loops"] == 5 * layers + 1  # q/k/v, attention, o, gate/up, down; the output layer
    # One loop on the E5: 9 transfers within a socket, 30 across, the publish and the last read across:
    # (9 x 60 + 30 x 210 + 2 x 210) ns at the middle of the profile's ranges.
    assert roofline.fork_join_seconds(10, 4, 60, 210) == pytest.approx((9 * 60 + 30 * 210 + 2 * 210) * 1e-9)
    e5 = predict.load_profile("e5-4627v4")
    roofs = roofline.profile_roofs(e5, 4, 10, "shard", 0.6, 0.5, "mid")
    assert roofs.fork_join_s == pytest.approx(roofline.fork_join_seconds(10, 4, 60, 210))
    shape = roofline.model_shape(measure.model_info(ctx.cpullm, model), ctx.cpullm)
    tps, bound = roofline.predict_decode(shape, "f32", roofs, 1, 256, "f16", loops=26)
    memory = (roofline.decode_bytes(shape, "f32") + roofline.kv_bytes(shape, 256, "f16")) / (roofs.bandwidth_gbs * 1e9)
    assert tps == pytest.approx(1 / (memory + 26 * roofs.fork_join_s)) and bound.startswith("fork/join")
    assert tps < 10_000, tps  # the plan once said 135,870
    out = subprocess.run([ctx.cpullm, "tune", "--hardware", "e5-4627v4", "-m", model], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("| f32 |") and "| 1 |" in line)
    assert float(row.split("|")[4].split()[0]) < 10_000 and "fork/join (26 parallel loops a step)" in row, row
    assert "KV cache in f16" in out and "avx2_clock_ghz = [2.2, 2.6]" in out


def test_smaller_errors(ctx, empty):
    """Finding 10: currencies not mixed in one row; the docs quote the figures the code computes;
    the vLLM import converts prompt + output tokens/s; the llama.cpp A100 figure is Q4_1."""
    text, data = empty
    row = re.search(r"<tr><td>hardware cost</td>.*?</tr>", text, re.S).group(0)
    assert "12,000 CNY" in row and "1,500 USD" in row, row
    _, published = gpu_data.load_gpus()
    q41 = next(p for p in published if p["source"] == "fact:llamacpp-2641")
    assert q41["format"] == "q4_1" and q41["counts"] == "decode-only" and q41["tokens_per_s"] == 75.91
    # docs/gpu-results.md's example imports as it stands and converts what vLLM prints.
    with open(os.path.join(REPO, "docs", "gpu-results.md")) as f:
        doc = f.read()
    example = json.loads(re.search(r"```json\n(.*?)```", doc, re.S).group(1))
    path = os.path.join(ctx.workdir, "doc-example.json")
    with open(path, "w") as f:
        json.dump(example, f)
    [entry] = gpu_data.load_results(path, gpu_data.load_gpus()[0])
    rate, how = generated_rate(entry["tokens_per_s"], entry["counts"], entry["n_prompt"], entry["n_gen"])
    assert entry["counts"] == "prompt+generated" and rate == pytest.approx(entry["tokens_per_s"] * 128 / 640), how
    # docs/report.md's headline table against the report of an empty database.
    with open(os.path.join(REPO, "docs", "report.md")) as f:
        headline = dict(re.findall(r"^\| `([a-z0-9_.]+)` \| ([^|]+?) \|", f.read(), re.M))
    e5 = option(data, "E5-4627")
    expected = {"e5.generated_tokens_per_s": f"{e5['generated_tokens_per_s']:.1f}",
                "e5.prefill_s": f"{e5['prefill_s']:.0f}", "e5.decode_s": f"{e5['decode_s']:.0f}",
                "e5.kwh_per_day_full_load": f"{e5['kwh_per_day_full_load']:.2f}"}
    for b in data["tco"]["break_even"]:
        if "E5" in b["cpu"]:
            key = f"break_even.{'a100' if 'A100' in b['gpu'] else 'h100'}.{'own' if 'owned' in b['gpu'] else 'rent'}"
            expected[key] = f"{b['volume']:.2g}" if b["volume"] else "none"
    assert {k: headline.get(k) for k in expected} == expected


def test_empty_report_and_its_json(ctx, empty):
    """What a reader decides on, from an empty database: the seed workload on the E5 end to end,
    owned and rented GPUs, the sensitivity figure, dated sources; report --json holds every
    option's fields."""
    text, data = empty
    assert 'data-title="Break-even sensitivity: 4 x Xeon E5-4627 v4 (used), owned against A100' in text
    assert "rented" in text and "2026-01-15" in text
    required = {"name", "kind", "acquisition", "figure_kind", "workload", "generated_tokens_per_s", "prefill_s", "decode_s",
                "idle_w", "load_w", "kwh_per_day_full_load", "cost_per_mtok"}
    assert len(data["tco"]["options"]) == 6  # 2 CPUs owned, 2 GPUs owned and rented
    for o in data["tco"]["options"]:
        assert required <= set(o), o
        assert o["kind"] in ("cpu", "gpu") and o["acquisition"] in ("own", "rent") and o["figure_kind"] in ("measured", "published", "predicted")
        assert o["workload"] == {"n_seq": 32, "n_prompt": 512, "n_gen": 128} and set(o["cost_per_mtok"]) == {"1e5", "1e7", "1e9"}
    e5 = option(data, "E5-4627")
    assert e5["generated_tokens_per_s"] == pytest.approx(32 * 128 / (e5["prefill_s"] + e5["decode_s"]))
    rows = data["tco"]["sensitivity"][0]["rows"]
    assert {"electricity per kwh", "pue", "max utilisation", "amortisation years", "compute efficiency",
            "CPU profiles' ranges (clock, fork/join latencies)"} <= {r[0] for r in rows}


@pytest.mark.parametrize("change, message", [
    (lambda a: a["workload"].pop("kv_type"), "workload.kv_type: expected text"),
    (lambda a: a["options"][0]["own"]["price"].pop("date"), "options[0].own.price: a price needs a date"),
    (lambda a: a["options"][2]["own"]["price"].update(range=[20000, 25000]), "options[2].own.price.range: expected [low, high] around"),
    (lambda a: a["options"][3]["rent"]["price_per_hour"].update(facts=["nosuch"]), "options[3].rent.price_per_hour.facts: no fact 'nosuch' in reports/data/facts.json"),
    (lambda a: a["options"][2]["rent"].update(billing="minute"), "options[2].rent.billing: expected \"hour\" or \"second\""),
    (lambda a: a["pue"].update(value="high"), "pue.value: expected a number"),
])
def test_bad_assumptions_fail_in_one_line(ctx, change, message):
    a = load(ASSUMPTIONS)
    change(a)
    path = os.path.join(ctx.workdir, "bad-assumptions.json")
    with open(path, "w") as f:
        json.dump(a, f)
    proc = subprocess.run([ctx.cpullm, "report", "--assumptions", path, "-o", os.path.join(ctx.workdir, "never.html")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and f"{path}: {message}" in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
