"""Roofline: this host's memory and compute roofs, measured by the kernel benchmarks
(memory_read, peak), with every profiled region as a point (FLOPs / bytes against FLOP/s); then
a hardware profile's theoretical roofs with the same regions where that machine would put them."""
import glob
import json
import os

import numpy as np

import predict
from page import Section, esc, figure, new_figure, no_data, number, runs_source, table



def roofline_host(contents):
    """The fingerprint of the newest run with kernel results: the host whose roofs are drawn
    (roofs and points of different machines never share a figure)."""
    kernel_runs = [r["run_id"] for r in contents.results if r.get("test") == "kernel"]
    return contents.runs[max(kernel_runs)]["fingerprint"] if kernel_runs else None


def on_host(contents, result, host):
    return contents.runs[result["run_id"]]["fingerprint"] == host


def best_counter(contents, host, case_prefix, counter):
    """(the highest value of a kernel benchmark counter over the cases named case_prefix* on
    the host, the result it came from), or (None, None)."""
    best = (None, None)
    for r in contents.results:
        value = r["metrics"].get(counter)
        if r.get("test") == "kernel" and r["case_name"].startswith(case_prefix) and value and on_host(contents, r, host):
            if best[0] is None or value > best[0]:
                best = (value, r)
    return best


def region_points(contents):
    """(name, arithmetic intensity FLOP/byte, FLOP/s, result) of every profiled region."""
    points = []
    for r in contents.results:
        for region in contents.regions.get(r["id"], []):
            if region["seconds"] > 0 and region["bytes"] > 0 and region["flops"] > 0:
                points.append((region["name"], region["flops"] / region["bytes"], region["flops"] / region["seconds"], r))
    return points


def profile_roofs(profile):
    """(bytes/s, FLOP/s, layout) theoretical for a profile (tuning/roofline.py at full
    efficiency, weights sharded over the nodes); None where a figure is unknown (the host)."""
    values = {k: v["value"] for k, v in profile.items() if isinstance(v, dict) and "value" in v}
    needed = ("memory_bandwidth_gbs_per_package", "base_clock_ghz", "fp32_flops_per_cycle_per_core", "int8_ops_per_cycle_per_core")
    if values.get("topology") == "detect" or any(values.get(k) is None for k in needed):
        return None
    sockets, cores = predict.profile_layout(profile)
    roofs = predict.tuning_roofline.profile_roofs(profile, sockets, cores, "shard", 1.0, 1.0)
    return roofs.bandwidth_gbs * 1e9, roofs.gemm_gflops["f32"] * 1e9, f"{sockets} x {cores} cores"


def host_figure(contents, points):
    host = roofline_host(contents)
    bandwidth, bw_result = best_counter(contents, host, "kernel/memory_read", "bytes_per_second")
    peak, peak_result = best_counter(contents, host, "kernel/peak", "FLOP/s")
    points = [p for p in points if on_host(contents, p[3], host)]
    if not bandwidth or not peak:
        return None, no_data("this host's roofs (memory read bandwidth and FP32 peak)",
                             "scripts/nightly --db results.db (runs bench_kernels memory_read and peak)")
    fig, ax = new_figure()
    intensity = np.logspace(-2, 3, 200)
    ax.loglog(intensity, np.minimum(bandwidth * intensity, peak), "k-",
              label=f"roofs: {bandwidth / 1e9:.1f} GB/s, {peak / 1e9:.0f} GFLOP/s")
    for name in sorted({p[0] for p in points}):
        mine = [p for p in points if p[0] == name]
        ax.scatter([p[1] for p in mine], [p[2] for p in mine], s=18, label=name)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.legend(fontsize=6, ncol=3)
    source = runs_source(contents.runs, [bw_result, peak_result] + [p[3] for p in points])
    return (bandwidth, peak), figure(fig, "This host's roofline with measured regions", source)


def profile_figure(profile_name, roofs, points):
    bandwidth, peak, shape = roofs
    fig, ax = new_figure()
    intensity = np.logspace(-2, 3, 200)
    ax.loglog(intensity, np.minimum(bandwidth * intensity, peak), "k--",
              label=f"theoretical: {bandwidth / 1e9:.0f} GB/s, {peak / 1e9:.0f} GFLOP/s ({shape})")
    if points:
        ais = np.array([p[1] for p in points])
        ax.scatter(ais, np.minimum(bandwidth * ais, peak), s=18, marker="x", label="regions, attainable there")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.legend(fontsize=7)
    source = (f"predicted by the roofline model (min(bandwidth x intensity, peak)) from tuning/profiles/{profile_name}.json: "
              "channels x speed x 8 bytes per package, cores x base clock x FP32 FLOP/cycle; intensities from the measured regions")
    return figure(fig, f"Predicted roofline of profile {profile_name}", source)


def build(contents, context):
    points = region_points(contents)
    host_roofs, body = host_figure(contents, points)
    if points:
        def share_of_roof(ai, rate):
            return f"{rate / min(host_roofs[0] * ai, host_roofs[1]):.0%}" if host_roofs else "\u2014"
        rows = [[esc(name), number(ai), number(rate / 1e9), share_of_roof(ai, rate), esc(r["case_name"])]
                for name, ai, rate, r in points[:60]]
        body += table(["region", "FLOP/byte", "GFLOP/s", "share of this host's roof", "case"], rows)
    else:
        body += no_data("per-region FLOPs, bytes and time", "cpullm bench -m MODEL --profile --db results.db")
    for path in sorted(glob.glob(os.path.join(predict.PROFILES, "*.json"))):
        with open(path) as f:
            profile = json.load(f)
        roofs = profile_roofs(profile)
        if roofs and profile["name"] == context.profile:
            body += profile_figure(profile["name"], roofs, points)
    return Section("roofline", "Roofline", body)
