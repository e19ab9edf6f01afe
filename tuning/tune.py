#!/usr/bin/python3
"""cpullm tune: tune a model for a box.

    cpullm tune --hardware PROFILE -m MODEL [--budget 10m] [--space SPACE] [sweep flags]

On the box itself (`--hardware host`, or a profile whose topology and ISA match this machine):
the OS checklist against the profile's recommendations, roofs measured now (read bandwidth,
the matvec and GEMM rates per format: build/suites/kernels/bench_kernels), roofline predictions
for every point of the space, then a sweep within the budget that measures them, and the
prediction error per point. On any other box: planning only — its emulated topology, the
thread and NUMA plan, the kernel command line and sysctl settings, and roofline predictions of
time to first token and tokens/s per format, batch and NUMA strategy, with their inputs. The
model is read through its header only, so a model of any size can be planned for.
"""
import argparse
import json
import math
import os
import sys

import measure
import oscheck
import roofline
import space as sp
import sweep as sw
from results import OBJECTIVES

HERE = os.path.dirname(os.path.abspath(__file__))
FORMATS = ["f32", "f16", "bf16", "q8_0", "int8-channel", "q4_0"]
GGML_TYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "bf16": 30, "int8-channel": 4097}  # bench_kernels' arguments
ISA_NUMBER = {"scalar": 0, "avx2": 1, "avx512": 2}


def topo(cpullm, hardware, *flags):
    return json.loads(measure.run_checked([cpullm, "topo", "--hardware", hardware, "--json", *flags]).stdout)


def shape_of(topology):
    """(packages, cores, PUs per core): what decides whether a profile describes this machine."""
    cores = topology["cores"]
    return topology["packages"], len(cores), max(len(c["pus"]) for c in cores)


def matches_this_machine(cpullm, plan):
    """host ("detect"), or a profile whose packages, cores, SMT and ISA are this machine's."""
    if not plan["topology"]["emulated"]:
        return True
    here = json.loads(measure.run_checked([cpullm, "topo", "--json"]).stdout)
    isa = plan["profile"]["isa"]["value"]
    return shape_of(here["topology"]) == shape_of(plan["topology"]) and isa == best_isa(cpullm)


def best_isa(cpullm):
    """The kernel level this CPU runs: `cpullm topo --hardware host` prints it."""
    text = measure.run_checked([cpullm, "topo", "--hardware", "host"]).stdout
    line = next(l for l in text.splitlines() if l.strip().startswith("isa "))
    return line.split("detect:")[1].split()[0]


def gib(n):
    return f"{n / (1 << 30):.2f} GiB"


# ---------------------------------------------------------------------------------------------
# Another box: plans and predictions only.
# ---------------------------------------------------------------------------------------------

def print_plan(args, plan, profile):
    t = plan["topology"]
    sockets = t["packages"]
    print(f"topology (emulated): {profile['topology']['value']}")
    print(f"  {sockets} package(s), {len(t['nodes'])} NUMA node(s), {len(t['cores'])} cores, "
          f"{sum(len(c['pus']) for c in t['cores'])} PUs")
    print(f"threads and NUMA plan (cpullm topo --hardware {args.hardware} --bind numa --numa shard -m {args.model}):")
    th = plan["threads"]
    print(f"  {th['count']} threads, bind {th['policy']}, per node {th['per_node']}")
    pl = plan["placement"]
    print(f"  placement {pl['strategy']}: weights {gib(pl['weight_bytes'])}, per node "
          + ", ".join(gib(b) for b in pl["bytes_per_node"]))
    for note in plan["notes"]:
        print(f"  note: {note}")


def os_settings(profile, topology):
    """The kernel command line and sysctl settings the profile recommends for its box."""
    rec = {r["setting"]: r["value"] for r in profile["recommendations"]}
    housekeeping = int(rec.get("isolation", "1")) if rec.get("isolation", "1").isdigit() else 1
    cmdline = oscheck.kernel_cmdline(topology, housekeeping, rec.get("smt") == "off",
                                     rec.get("transparent_hugepage", "madvise"))
    sysctl = [f"vm.swappiness = {rec['vm.swappiness']}"] if "vm.swappiness" in rec else []
    if rec.get("numa_balancing", "any") not in ("any", "n/a"):
        sysctl.append(f"kernel.numa_balancing = {rec['numa_balancing']}")
    return cmdline, sysctl, rec


def print_os_settings(profile, topology):
    cmdline, sysctl, rec = os_settings(profile, topology)
    print("kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub):")
    print("  " + " ".join(cmdline))
    print("sysctl (/etc/sysctl.d/90-cpullm.conf):")
    for line in sysctl:
        print("  " + line)
    for setting in ("governor", "boost", "smt"):
        if setting in rec:
            print(f"{setting}: {rec[setting]}")


def print_predictions(args, shape, profile, topology, model_bytes):
    """The table of predictions per format, batch and NUMA strategy, with every input."""
    sockets = topology["packages"]
    cores_per_socket = len(topology["cores"]) // sockets
    mem_per_socket = (profile["memory_gib_per_package"]["value"] or math.inf) * (1 << 30)
    print(f"PREDICTIONS (roofline model, not measurements) for {args.model}:")
    print("  inputs:")
    for field in ("memory_bandwidth_gbs_per_package", "memory_bandwidth_measured_gbs_per_package", "base_clock_ghz",
                  "fp32_flops_per_cycle_per_core", "int8_ops_per_cycle_per_core", "socket_link_gbs_per_package",
                  "memory_gib_per_package"):
        f = profile[field]
        print(f"    {field} = {f['value']}  ({f['source']})")
    print(f"    packages = {sockets}, cores per package = {cores_per_socket}")
    print(f"    bandwidth efficiency = {args.bandwidth_efficiency} (attainable share of theoretical bandwidth where no "
          f"measured figure exists; an assumption)")
    print(f"    compute efficiency = {args.compute_efficiency} (share of the FMA/int8 peak the GEMM reaches; "
          f"docs/kernels.md measured ~0.42 for this project's F32 GEMM on the host)")
    print(f"    model: {shape.layers} layers, dim {shape.dim}, kv dim {shape.kv_dim}, vocab {shape.vocab}; "
          f"prompt {args.prompt} tokens, decode at position {args.prompt} with an F32 KV cache")
    strategies = list(roofline.numa_strategies(sockets)) if sockets > 1 else ["first-touch"]
    header = "| format | weights | batch | " + " | ".join(f"decode tok/s {s}" for s in strategies) + " | TTFT ms |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for fmt in args.formats:
        weights = sum(size for _, size in roofline.tensor_bytes(shape, fmt))
        for batch in args.batches:
            cells = []
            for strategy in strategies:
                s = roofline.numa_strategies(sockets)[strategy]
                need = weights * s["copies"] / sockets + batch * roofline.kv_bytes(shape, args.prompt + 1) / sockets
                if need > mem_per_socket:
                    cells.append("does not fit")
                    continue
                roofs = roofline.profile_roofs(profile, sockets, cores_per_socket, strategy,
                                               args.bandwidth_efficiency, args.compute_efficiency)
                tps, bound = roofline.predict_decode(shape, fmt, roofs, batch, args.prompt)
                cells.append(f"{tps:.1f} ({bound})")
            roofs = roofline.profile_roofs(profile, sockets, cores_per_socket, strategies[0],
                                           args.bandwidth_efficiency, args.compute_efficiency)
            ttft, bound = roofline.predict_prefill(shape, fmt, roofs, args.prompt)
            print(f"| {fmt} | {gib(weights)} | {batch} | " + " | ".join(cells) + f" | {ttft * 1e3:.0f} ({bound}) |")
    print(f"  NUMA strategies: " + "; ".join(f"{k}: {v['why']}" for k, v in roofline.numa_strategies(sockets).items()
                                            if k in strategies))


def plan_other_box(args, plan, profile):
    info = measure.model_info(args.cpullm, args.model)
    shape = roofline.model_shape(info)
    print_plan(args, plan, profile)
    print()
    print_os_settings(profile, plan["topology"])
    print()
    print_predictions(args, shape, profile, plan["topology"], info["totals"]["bytes"])


# ---------------------------------------------------------------------------------------------
# This box: checklist, roofs measured now, predictions, then the sweep that checks them.
# ---------------------------------------------------------------------------------------------

def bench_kernels_path(cpullm):
    return os.path.join(os.path.dirname(os.path.abspath(cpullm)), "suites", "kernels", "bench_kernels")


GEMM_TOKENS = (32, 512)  # the prompt lengths bench_kernels times the GEMM at


def measure_roofs(cpullm, formats, thread_counts, isa):
    """Roofs of this machine, measured now by bench_kernels: the read bandwidth for each thread
    count, and per format the matvec rate (GB/s of weights) and the GEMM rate (GFLOP/s) for 32-
    and 512-token prompts, at LLaMA-7B's feed-forward shape (11008 x 4096), with every thread.
    Returns (bandwidth by threads, matvec by format, GEMM by (format, tokens))."""
    binary = bench_kernels_path(cpullm)
    if not os.path.exists(binary):
        raise measure.MeasureError(f"{binary}: missing (build the suites: cmake --build BUILD --target bench_kernels)")
    isa_n = ISA_NUMBER[isa]
    names = [f"memory_read/{t}/" for t in thread_counts]
    names += [f"matvec/{GGML_TYPE[f]}/11008/4096/{isa_n}/" for f in formats]
    names += [f"matmul/{GGML_TYPE[f]}/11008/4096/{n}/{isa_n}/0/" for f in formats for n in GEMM_TOKENS]
    out = measure.run_checked([binary, "--benchmark_filter=^(" + "|".join(names) + ")", "--benchmark_format=json",
                               "--benchmark_min_time=0.2"]).stdout
    rows = json.loads(out)["benchmarks"]
    bandwidth = {int(r["name"].split("/")[1]): r["bytes_per_second"] / 1e9 for r in rows if r["name"].startswith("memory_read/")}
    by_type = {v: k for k, v in GGML_TYPE.items()}
    matvec = {by_type[int(r["name"].split("/")[1])]: r["bytes_per_second"] / 1e9
              for r in rows if r["name"].startswith("matvec/") and "error_occurred" not in r}
    gemm = {(by_type[int(r["name"].split("/")[1])], int(r["name"].split("/")[4])): r["FLOP/s"] / 1e9
            for r in rows if r["name"].startswith("matmul/") and "error_occurred" not in r}
    return bandwidth, matvec, gemm


def host_roofs(bandwidth, matvec, gemm, threads, max_threads, prompt):
    """Roofs for a point's thread count and prompt: its own measured bandwidth; kernel rates
    scaled from all threads in proportion (they are compute rates); the GEMM rate measured at
    the prompt length nearest this one (short prompts fill the GEMM's tiles less)."""
    scale = threads / max_threads
    tokens = min(GEMM_TOKENS, key=lambda n: abs(math.log(n / prompt)))
    return roofline.Roofs(bandwidth_gbs=bandwidth[threads], matvec_gbs={f: v * scale for f, v in matvec.items()},
                          gemm_gflops={f: v * scale for (f, n), v in gemm.items() if n == tokens},
                          source=f"measured now by bench_kernels (GEMM at {tokens} tokens)")


def tune_this_box(args, plan, profile):
    info = measure.model_info(args.cpullm, args.model)
    shape = roofline.model_shape(info)
    topology = plan["topology"]
    print("OS checklist (current, recommended, why, fix):")
    checks = oscheck.checklist(args.root, topology, profile["recommendations"], args.model, info["totals"]["bytes"])
    oscheck.print_checklist(checks, sys.stdout)
    print(f"  {sum(c.status == 'change' for c in checks)} to change, {sum(c.status == 'unavailable' for c in checks)} "
          f"not exposed here, {sum(c.status == 'ok' for c in checks)} as recommended")

    space = sp.load_space(args.space)
    sweep = sw.Sweep(args, space["workload"])
    points, dropped = sp.constrain(sp.expand(space), sweep.topology, sweep.source_format, sweep.features)
    for point, reason in dropped:
        print(f"skipped {sp.describe(point)}: {reason}", file=sys.stderr)
    if not points:
        sw.fail(f"{args.space}: no point of the space can run here")
    max_threads = len(sp.usable_cores(sweep.topology, "", 0))
    thread_counts = sorted({p.get("threads", 0) or max_threads for p in points} | {max_threads})
    formats = sorted({p.get("format", sweep.source_format) for p in points})
    isa = best_isa(args.cpullm)
    print(f"\nroofs measured now (bench_kernels, ISA {isa}, LLaMA-7B feed-forward shape 11008x4096):")
    bandwidth, matvec, gemm = measure_roofs(args.cpullm, formats, thread_counts, isa)
    for t, bw in sorted(bandwidth.items()):
        print(f"  read bandwidth, {t} thread(s): {bw:.1f} GB/s")
    for f in formats:
        print(f"  {f}: matvec {matvec.get(f, math.nan):.1f} GB/s of weights, GEMM "
              + ", ".join(f"{gemm.get((f, n), math.nan):.1f} GFLOP/s at {n} tokens" for n in GEMM_TOKENS)
              + f" ({max_threads} threads)")

    predictions = {}
    for p in points:
        fmt = p.get("format", sweep.source_format)
        roofs = host_roofs(bandwidth, matvec, gemm, p.get("threads", 0) or max_threads, max_threads,
                           space["workload"]["prompt"])
        decode, dbound = roofline.predict_decode(shape, fmt, roofs, 1, space["workload"]["prompt"], p.get("keep", ""))
        ttft, pbound = roofline.predict_prefill(shape, fmt, roofs, space["workload"]["prompt"], p.get("keep", ""))
        predictions[sp.point_key(p)] = {"decode_tps": decode, "ttft_ms": ttft * 1e3, "bounds": (dbound, pbound)}
    print(f"\nPREDICTIONS before measuring (prompt {space['workload']['prompt']}, decode at that position):")
    for p in points:
        pr = predictions[sp.point_key(p)]
        print(f"  {sp.describe(p)}: decode {pr['decode_tps']:.2f} tokens/s ({pr['bounds'][0]}), "
              f"TTFT {pr['ttft_ms']:.0f} ms ({pr['bounds'][1]})")

    print(f"\nsweep (budget {args.budget}):")
    sweep_obj, results, winner = sw.run_sweep(args, space)
    sw.report(args, sweep_obj, results, winner)
    print_errors(args, results, predictions)


def print_errors(args, results, predictions):
    """Prediction error per measured point: (predicted - measured) / measured."""
    print("\nprediction error per point (predicted vs measured; target within ±15%):")
    lines, worst = [], []
    for r in results:
        pr = predictions.get(r["key"])
        if not pr or r["error"] or "decode_tps" not in r["metrics"]:
            continue
        d = pr["decode_tps"] / r["metrics"]["decode_tps"]["mean"] - 1
        t = pr["ttft_ms"] / r["metrics"]["ttft_ms"]["mean"] - 1
        line = (f"  level {r['level']}: {sp.describe(r['point'])}: decode {pr['decode_tps']:.2f} vs "
                f"{r['metrics']['decode_tps']['mean']:.2f} tokens/s ({d:+.0%}), TTFT {pr['ttft_ms']:.0f} vs "
                f"{r['metrics']['ttft_ms']['mean']:.0f} ms ({t:+.0%})")
        lines.append(line)
        if abs(d) > 0.15 or abs(t) > 0.15:
            worst.append(line.strip())
    print("\n".join(lines) or "  nothing measured")
    if worst:
        print("outside ±15%:")
        for w in worst:
            print(f"  {w}")
    summary = os.path.join(args.out, "tune-summary.md")
    with open(summary, "w") as f:
        f.write("# cpullm tune summary\n\n" + "\n".join(l.strip() for l in lines) + "\n")
    print(f"summary: {summary}")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="cpullm tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", required=True, help="profile name (tuning/profiles) or path")
    sw.add_measure_arguments(parser)
    parser.add_argument("--space", default=os.path.join(HERE, "spaces", "host.toml"),
                        help="the space the sweep covers on this box (default tuning/spaces/host.toml)")
    parser.add_argument("--formats", default=",".join(FORMATS), help="other box: formats to predict")
    parser.add_argument("--batches", default="1,8,32", help="other box: batch sizes (concurrent sequences) to predict")
    parser.add_argument("--prompt", type=int, default=512, help="other box: prompt tokens of the TTFT prediction")
    parser.add_argument("--bandwidth-efficiency", type=float, default=0.75,
                        help="other box: attainable share of theoretical bandwidth where the profile has no measured figure")
    parser.add_argument("--compute-efficiency", type=float, default=0.4, help="other box: share of peak the GEMM reaches")
    parser.add_argument("--root", default="/", help="where /proc and /sys are read from (tests point it at a fake tree)")
    args = parser.parse_args(argv)
    args.formats = [f for f in args.formats.split(",") if f]
    args.batches = [int(b) for b in args.batches.split(",") if b]
    for f in args.formats:
        if f not in roofline.BYTES_PER_WEIGHT:
            sw.fail(f"--formats: unknown format {f!r} (known: {', '.join(FORMATS)})")
    if not os.path.exists(args.cpullm):
        sw.fail(f"{args.cpullm}: no cpullm binary (build it, or pass --cpullm / set CPULLM_BIN)")
    try:
        plan = topo(args.cpullm, args.hardware, "--bind", "numa", "--numa", "shard", "-m", args.model)
        with open(plan["profile"]["path"]) as f:
            profile = json.load(f)
        if matches_this_machine(args.cpullm, plan):
            print(f"cpullm tune: {profile['name']} is this machine: checking the OS, measuring roofs, predicting, then sweeping")
            tune_this_box(args, plan, profile)
        else:
            print(f"cpullm tune: {profile['name']} is not this machine: planning only "
                  "(emulated topology; nothing below is measured or applied)")
            plan_other_box(args, plan, profile)
    except (measure.MeasureError, sp.SpaceError, FileExistsError, ValueError) as e:
        sw.fail(str(e))


if __name__ == "__main__":
    main()
