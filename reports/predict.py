"""Serving throughput (serving.py) of each option in the TCO and GPU comparison at the assumed
workload, and where it comes from, in this order: measured (the results database's pg results
of the workload on a host of the option's CPU, or imported GPU results), published (data/gpus.json
where a source ran the same workload and says what its tokens/s counts), else predicted by
tuning/roofline.py: the prefill of every prompt and every decode step, from a CPU profile or a
GPU's specs, scaled by the assumed efficiencies, with the interval its inputs' ranges give."""
import json
import os
import re

import tuning
from tuning import registry  # the formats, a shape's tensors and its parallel loops: the binary's own
from tuning import roofline

from . import inputs
from .serving import Serving, from_rate, generated_rate

PROFILES = os.path.join(os.path.dirname(os.path.abspath(tuning.__file__)), "profiles")


def llama_shape(name):
    """A roofline.Shape of a named LLaMA shape with F16 matrices (as gen-model writes them):
    its tensors from `cpullm info --costs --shape NAME`."""
    return roofline.named_shape(name)


def load_profile(name):
    path = os.path.join(PROFILES, f"{name}.json")
    with open(path) as f:
        return json.load(f)


def profile_layout(profile):
    """(sockets, cores per socket) from a profile's hwloc synthetic topology, e.g.
    "pack:4 [numa] l3:1 l2:10 l1d:1 core:1 pu:1" is 4 sockets of 1 x 10 x 1 x 1 cores."""
    levels = re.findall(r"(\w+):(\d+)", profile["topology"]["value"])
    if not levels or levels[0][0] != "pack":
        raise ValueError(f"profile {profile['name']}: topology is not a synthetic description starting with pack:N")
    cores = 1
    for level, count in levels[1:]:
        if level == "pu":
            break
        cores *= int(count)
    return int(levels[0][1]), cores


def parameters(model):
    """Parameters of a named shape, every tensor counted (what cpullm bench records as model_n_params)."""
    return sum(rows * cols for _, rows, cols, _, _ in llama_shape(model).tensors)


def predicted(workload, fmt, roofs, loops):
    """(prefill seconds, decode seconds, what bound each) of the workload on `roofs`: every
    prompt's prefill one after another (as cpullm bench -np runs them), then n_gen steps of all
    sequences, each at the mean position of the generation (its KV reads grow linearly) with
    `loops` parallel loops."""
    shape = llama_shape(workload["model"])
    n, p, g = workload["n_seq"], workload["n_prompt"], workload["n_gen"]
    tps, decode_bound = roofline.predict_decode(shape, fmt, roofs, n, p + g // 2, workload["kv_type"], loops=loops)
    prefill, prefill_bound = roofline.predict_prefill(shape, fmt, roofs, p) if p else (0.0, "no prompt")
    return prefill * n, g * n / tps, f"prefill {prefill_bound}-bound, decode {decode_bound}-bound"


def corners(workload, run, kind_source, profile_corner="mid"):
    """A predicted Serving: run(efficiency corner, profile corner) -> (prefill s, decode s,
    bounds) at the assumed efficiencies and the profile's ranges at `profile_corner` (their
    middle unless a sensitivity moves them), with the rates of the slow and fast corners of
    every range together as its interval."""
    at = {"mid": run("mid", profile_corner), "low": run("low", "low"), "high": run("high", "high")}
    rate = {corner: workload["n_seq"] * workload["n_gen"] / (at[corner][0] + at[corner][1]) for corner in at}
    prefill, decode, bounds = at["mid"]
    return Serving(workload["n_seq"], workload["n_prompt"], workload["n_gen"], prefill + decode, prefill, "predicted",
                   f"{kind_source}; {bounds}", low=rate["low"], high=rate["high"])


def range_text(low_high):
    low, high = low_high
    return f"{low:g}" if low == high else f"{low:g}-{high:g}"


def efficiency_at(efficiency, corner):
    """(bandwidth, compute) efficiency: the assumed values, or their ranges' ends."""
    def one(q):
        return inputs.value(q) if corner == "mid" else roofline.at(list(inputs.span(q)), corner)
    return one(efficiency["bandwidth"]), one(efficiency["compute"])


def predicted_cpu(profile_name, workload, fmt, efficiency, profile_corner="mid"):
    profile = load_profile(profile_name)
    sockets, cores = profile_layout(profile)
    strategy = "shard" if sockets > 1 else "first-touch"
    loops = registry.costs(shape=workload["model"], dtype=fmt, sequences=workload["n_seq"])["decode_step"]["parallel_loops"]

    def run(efficiency_corner, corner):
        bandwidth, compute = efficiency_at(efficiency, efficiency_corner)
        return predicted(workload, fmt, roofline.profile_roofs(profile, sockets, cores, strategy, bandwidth, compute, corner), loops)
    clock = roofline.clock_field(profile)
    return corners(workload, run, profile_corner=profile_corner, kind_source=(
        f"predicted by tuning/roofline.py from tuning/profiles/{profile_name}.json ({sockets} x {cores} cores, {strategy}, "
        f"{clock} {range_text(roofline.span(profile[clock]['value']))} GHz), {fmt} weights, {workload['kv_type']} KV cache, "
        f"efficiencies {range_text(inputs.span(efficiency['bandwidth']))} bandwidth / {range_text(inputs.span(efficiency['compute']))} "
        f"compute, {loops} parallel loops a decode step"))


def gpu_roofs(gpu, fmt, bandwidth, compute):
    return roofline.Roofs(bandwidth_gbs=gpu["memory_bandwidth_gbs"]["value"] * bandwidth,
                          gemm_gflops={fmt: gpu["fp16_tensor_tflops"]["value"] * 1e3 * compute},
                          source=f"{gpu['name']} (data/gpus.json)")


def predicted_gpu(gpu, workload, fmt, efficiency):
    def run(efficiency_corner, _):
        return predicted(workload, fmt, gpu_roofs(gpu, fmt, *efficiency_at(efficiency, efficiency_corner)), 0)
    return corners(workload, run, (
        f"predicted by tuning/roofline.py from {gpu['name']}'s bandwidth and FP16 tensor peak (data/gpus.json), {fmt} weights, "
        f"{workload['kv_type']} KV cache, efficiencies {range_text(inputs.span(efficiency['bandwidth']))} / "
        f"{range_text(inputs.span(efficiency['compute']))}; "
        "kernel launches not modelled"))


def same_workload(entry, workload):
    return all(entry.get(k) == workload[k] for k in ("model", "n_seq", "n_prompt", "n_gen"))


def workload_results(contents, option, workload):
    """The results of the workload as the TCO prices it: pg tests (prompt and generation) of the
    same n_seq, n_prompt and n_gen, model size, the option's format and the workload's KV type,
    with a generated tokens/s (gen_ts), on a host whose CPU model contains the option's
    cpu_model_match."""
    target = parameters(workload["model"])
    return [r for r in contents.results
            if r["test"] == "pg" and r.get("gen_ts") and r.get("n_seq") == workload["n_seq"]
            and r.get("n_prompt") == workload["n_prompt"] and r.get("n_gen") == workload["n_gen"]
            and r.get("format") == option["format"] and r.get("kv_type") == workload["kv_type"]
            and r.get("model_n_params") and abs(r["model_n_params"] - target) < 0.05 * target
            and option.get("cpu_model_match", "\0") in (contents.runs[r["run_id"]].get("cpu_model") or "")]


def measured_cpu(contents, option, workload):
    """The best measured generated tokens/s of the workload's results (workload_results), or None."""
    results = workload_results(contents, option, workload)
    if not results:
        return None
    r = max(results, key=lambda r: r["gen_ts"])
    run = contents.runs[r["run_id"]]
    prefill = r["ttft_ms"] / 1e3 if r.get("ttft_ms") else None
    return from_rate(workload["n_seq"], workload["n_prompt"], workload["n_gen"], r["gen_ts"], prefill, "measured",
                     f"measured (gen_ts), result {r['id']} ({r['case_name']}) of run {run['id']} on {run['host']} ({run['cpu_model']}), "
                     f"commit {run['git_commit']}, {run['started_at']}: {run['command']}")


def measured_gpu(gpu_results, gpu_id, workload):
    for m in gpu_results:
        if m["gpu"] == gpu_id and same_workload(m, workload):
            converted = generated_rate(m["tokens_per_s"], m.get("counts", "generated"), m["n_prompt"], m["n_gen"])
            if converted:
                return from_rate(m["n_seq"], m["n_prompt"], m["n_gen"], converted[0], None, "measured",
                                 f"measured on {m['host']} ({m['engine']}), {m['date']}: {m['command']}; {converted[1]}")
    return None


def published_gpu(published, gpu_id, workload, facts):
    """A published figure of this GPU (an entry naming its family, "a100", or the exact id) for
    the workload, converted to generated tokens/s, or None."""
    for p in published:
        if gpu_id.startswith(p["gpu"]) and same_workload(p, workload):
            converted = generated_rate(p["tokens_per_s"], p["counts"], p["n_prompt"], p["n_gen"])
            if converted:
                fact = facts[p["source"].removeprefix("fact:")]
                return from_rate(p["n_seq"], p["n_prompt"], p["n_gen"], converted[0], None, "published",
                                 f"published: {p['engine']}, {fact['url']} ({fact['date']}); {converted[1]}")
    return None


def option_serving(option, contents, context, assumptions, profile_corner="mid"):
    """The option's Serving at the assumed workload: measured, else published, else predicted
    (a CPU profile's ranges at `profile_corner`)."""
    workload, efficiency = assumptions["workload"], assumptions["prediction_efficiency"]
    if option["kind"] == "cpu":
        return (measured_cpu(contents, option, workload)
                or predicted_cpu(option["profile"], workload, option["format"], efficiency, profile_corner))
    return (measured_gpu(context.gpu_results, option["gpu"], workload)
            or published_gpu(context.published, option["gpu"], workload, context.facts)
            or predicted_gpu(context.gpus[option["gpu"]], workload, option["format"], efficiency))
