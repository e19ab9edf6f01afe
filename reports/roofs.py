"""Roofline: this host's memory and compute roofs, with every profiled region (the `regions`
table cpullm bench --db fills from an instrumented repetition) as a point (FLOPs / bytes against
FLOP/s); then a hardware profile's theoretical roofs with the same regions where that machine
would put them. The roofs are those stored by the kernel benchmarks (scripts/nightly:
memory_read, peak) where the database has them for the host, else those cpullm bench measured
next to its regions; the figure says which."""
import glob
import json
import os

import numpy as np

from tuning import roofline

from . import predict
from .page import Section, esc, figure, new_figure, no_data, number, paragraph, runs_source, table



def roofline_host(contents):
    """The fingerprint of the newest run with kernel results, else of the newest run with profiled
    regions: the host whose roofs are drawn (roofs and points of different machines never share
    a figure)."""
    kernel_runs = [r["run_id"] for r in contents.results if r.get("test") == "kernel"]
    region_runs = [r["run_id"] for r in contents.results if contents.regions.get(r["id"])]
    runs = kernel_runs or region_runs
    return contents.runs[max(runs)]["fingerprint"] if runs else None


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
    """(name, arithmetic intensity FLOP/byte, FLOP/s, result) of every profiled region with
    arithmetic; (name, result) of those without (a table lookup: no place on a FLOP/s axis)."""
    points, no_flops = [], []
    for r in contents.results:
        for region in contents.regions.get(r["id"], []):
            if region["seconds"] > 0 and region["bytes"] > 0 and region["flops"] > 0:
                points.append((region["name"], region["flops"] / region["bytes"], region["flops"] / region["seconds"], r))
            else:
                no_flops.append((region["name"], r))
    return points, no_flops


def host_roofs(contents, host):
    """(bytes/s, FLOP/s, where they come from, the results they come from) of the host, or None:
    the kernel benchmarks' stored roofs, else the best roofs cpullm bench measured with its regions."""
    bandwidth, bw_result = best_counter(contents, host, "kernel/memory_read", "bytes_per_second")
    peak, peak_result = best_counter(contents, host, "kernel/peak", "FLOP/s")
    if bandwidth and peak:
        return (bandwidth, peak, "roofs stored by scripts/nightly's kernel benchmarks (bench_kernels memory_read and peak)",
                [bw_result, peak_result])
    measured = [r for r in contents.results if on_host(contents, r, host)
                and r["metrics"].get("roof_memory_bytes_per_s") and r["metrics"].get("roof_flops_per_s")]
    if not measured:
        return None
    bw = max(measured, key=lambda r: r["metrics"]["roof_memory_bytes_per_s"])
    pk = max(measured, key=lambda r: r["metrics"]["roof_flops_per_s"])
    return (bw["metrics"]["roof_memory_bytes_per_s"], pk["metrics"]["roof_flops_per_s"],
            f"roofs measured by cpullm bench next to its regions (no kernel benchmarks stored for this host): "
            f"memory {bw['metrics'].get('roof_memory_source', '')}; compute {pk['metrics'].get('roof_compute_source', '')}",
            [bw, pk])


def profile_roofs(profile):
    """(bytes/s, FLOP/s, layout) theoretical for a profile (tuning/roofline.py at full
    efficiency, weights sharded over the nodes, the fast end of its ranges: a roof is a bound);
    None where a figure is unknown (the host)."""
    values = {k: v["value"] for k, v in profile.items() if isinstance(v, dict) and "value" in v}
    needed = ("memory_bandwidth_gbs_per_package", roofline.clock_field(profile), "fp32_flops_per_cycle_per_core",
              "int8_ops_per_cycle_per_core", "q4_0_ops_per_cycle_per_core")
    if values.get("topology") == "detect" or any(values.get(k) is None for k in needed):
        return None
    sockets, cores = predict.profile_layout(profile)
    roofs = roofline.profile_roofs(profile, sockets, cores, "shard", 1.0, 1.0, "high")
    return roofs.bandwidth_gbs * 1e9, roofs.gemm_gflops["f32"] * 1e9, f"{sockets} x {cores} cores"


def host_figure(contents, roofs, points):
    bandwidth, peak, roofs_source, roof_results = roofs
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
    source = f"{runs_source(contents.runs, roof_results + [p[3] for p in points])}; {roofs_source}"
    return figure(fig, "This host's roofline with measured regions", source)


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
              "theoretical bandwidth per package, cores x the sustained all-core clock at the profile's vector width (its range's "
              "high end) x FP32 FLOP/cycle; intensities from the measured regions")
    return figure(fig, f"Predicted roofline of profile {profile_name}", source)


def build(contents, context):
    all_points, no_flops = region_points(contents)
    host = roofline_host(contents)
    points = [p for p in all_points if on_host(contents, p[3], host)]
    roofs = host_roofs(contents, host) if host else None
    body = ""
    if not all_points:
        body += no_data("per-region FLOPs, bytes and time", "cpullm bench -m MODEL -pg 64,16 --db results.db "
                        "(each point gets one instrumented repetition after its timed ones)")
    elif not roofs:
        body += no_data("this host's roofs (memory read bandwidth and FP32 peak)",
                        "cpullm bench -m MODEL --db results.db (measures them with the regions) or scripts/nightly --db results.db")
    else:
        body += host_figure(contents, roofs, points)
        body += paragraph(f"Roofs: {roofs[2]}. Every region with arithmetic of every profiled point on this host is a point "
                          f"({len(points)}); {len(all_points) - len(points)} of other hosts are left out.")
    if no_flops:
        names = sorted({name for name, _ in no_flops})
        body += paragraph(f"Without FLOPs, so not on a FLOP/s axis: {', '.join(names)} (a table lookup moves bytes only).")
    if points:
        def share_of_roof(ai, rate):
            return f"{rate / min(roofs[0] * ai, roofs[1]):.0%}" if roofs else "\u2014"
        rows = [[esc(name), number(ai), number(rate / 1e9), share_of_roof(ai, rate), esc(r["case_name"])]
                for name, ai, rate, r in points[:60]]
        shown = "" if len(points) <= 60 else f" (the first 60 of {len(points)})"
        body += table(["region", "FLOP/byte", "GFLOP/s", "share of this host's roof", "case" + shown], rows)
    for path in sorted(glob.glob(os.path.join(predict.PROFILES, "*.json"))):
        with open(path) as f:
            profile = json.load(f)
        profile_roof = profile_roofs(profile)
        if profile_roof and profile["name"] == context.profile:
            body += profile_figure(profile["name"], profile_roof, all_points)
    return Section("roofline", "Roofline", body)
