"""Throughput of each option in the TCO and GPU comparison, and where the figure comes from:
measured (the results database, or imported GPU results), published (data/gpus.json or the
assumptions file), or predicted by tuning/roofline.py's decode model from a CPU profile or a GPU's
specs, scaled by the assumed efficiencies."""
import json
import os
import re
from dataclasses import dataclass

import tuning
from tuning import registry  # the formats and a shape's tensors: the binary's own (roofline reads them too)
from tuning import roofline as tuning_roofline

PROFILES = os.path.join(os.path.dirname(os.path.abspath(tuning.__file__)), "profiles")


@dataclass
class Figure:
    value: float   # tokens/s (or ms)
    kind: str      # measured | published | predicted | claimed
    source: str    # host, run and command; the publication; or the model and its inputs


def llama_shape(name):
    """A tuning_roofline.Shape of a named LLaMA shape with F16 matrices (as gen-model writes them):
    its tensors from `cpullm info --costs --shape NAME`."""
    return tuning_roofline.named_shape(name)


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


def predicted_cpu(profile_name, workload, fmt, efficiency):
    profile = load_profile(profile_name)
    sockets, cores = profile_layout(profile)
    strategy = "shard" if sockets > 1 else "first-touch"
    roofs = tuning_roofline.profile_roofs(profile, sockets, cores, strategy, efficiency["bandwidth"], efficiency["compute"])
    shape = llama_shape(workload["model"])
    tps, bound = tuning_roofline.predict_decode(shape, fmt, roofs, workload["n_seq"], workload["n_prompt"] + workload["n_gen"] // 2)
    ttft, ttft_bound = tuning_roofline.predict_prefill(shape, fmt, roofs, workload["n_prompt"])
    why = (f"predicted by tuning/roofline.py from tuning/profiles/{profile_name}.json ({sockets} x {cores} cores, {strategy}), "
           f"{fmt}, efficiencies {efficiency['bandwidth']} bandwidth / {efficiency['compute']} compute")
    return Figure(tps, "predicted", f"{why}; {bound}-bound"), Figure(ttft * 1e3 * workload["n_seq"], "predicted",
                                                                     f"{why}; {ttft_bound}-bound, {workload['n_seq']} prompts one after another")


def predicted_gpu(gpu, workload, fmt, efficiency):
    roofs = tuning_roofline.Roofs(bandwidth_gbs=gpu["memory_bandwidth_gbs"]["value"] * efficiency["bandwidth"],
                                  gemm_gflops={fmt: gpu["fp16_tensor_tflops"]["value"] * 1e3 * efficiency["compute"]})
    shape = llama_shape(workload["model"])
    tps, bound = tuning_roofline.predict_decode(shape, fmt, roofs, workload["n_seq"], workload["n_prompt"] + workload["n_gen"] // 2)
    return Figure(tps, "predicted", f"predicted by tuning/roofline.py's decode model from {gpu['name']}'s bandwidth and FP16 tensor peak "
                                    f"(data/gpus.json), efficiencies {efficiency['bandwidth']} / {efficiency['compute']}; {bound}-bound")


def parameters(model):
    """Parameters of a named shape, every tensor counted (what cpullm bench records as model_n_params)."""
    return sum(rows * cols for _, rows, cols, _, _ in llama_shape(model).tensors)


def workload_results(contents, option, workload):
    """The results of the workload (sequences, prompt, model size) on hosts whose CPU model
    matches the option."""
    target = parameters(workload["model"])
    return [r for r in contents.results
            if r.get("avg_ts") and r.get("n_seq") == workload["n_seq"] and r.get("n_prompt") == workload["n_prompt"]
            and r.get("model_n_params") and abs(r["model_n_params"] - target) < 0.05 * target
            and option.get("cpu_model_match", "\0") in (contents.runs[r["run_id"]].get("cpu_model") or "")]


def measured_cpu(contents, option, workload):
    """The best measured generation tokens/s of the workload on a host whose CPU model matches
    the option, or None."""
    results = workload_results(contents, option, workload)
    if not results:
        return None
    r = max(results, key=lambda r: r["avg_ts"])
    run = contents.runs[r["run_id"]]
    return Figure(r["avg_ts"], "measured", f"measured, run {run['id']} on {run['host']} ({run['cpu_model']}), commit {run['git_commit']}, "
                                           f"{run['started_at']}: {run['command']}")


def measured_gpu(gpu_results, gpu_id, workload):
    for m in gpu_results:
        if m["gpu"] == gpu_id and m["model"] == workload["model"] and m["n_seq"] == workload["n_seq"] and m["n_prompt"] == workload["n_prompt"]:
            return Figure(m["tokens_per_s"], "measured", f"measured on {m['host']} ({m['engine']}), {m['date']}: {m['command']}")
    return None


def option_throughput(option, contents, gpu_results, gpus, assumptions):
    """tokens/s of a TCO option at the assumed workload: measured first, then the figure the
    assumptions file gives (published or claimed), then predicted."""
    workload, efficiency = assumptions["workload"], assumptions["prediction_efficiency"]
    if option["kind"] == "cpu":
        measured = measured_cpu(contents, option, workload)
    else:
        measured = measured_gpu(gpu_results, option["gpu"], workload)
    if measured:
        return measured
    given = option.get("throughput_tokens_per_s")
    if given:
        return Figure(given["value"], given["kind"], given["source"])
    if option["kind"] == "cpu":
        return predicted_cpu(option["profile"], workload, option["format"], efficiency)[0]
    return predicted_gpu(gpus[option["gpu"]], workload, option["format"], efficiency)
