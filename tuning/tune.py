"""cpullm tune: tune a model for a box.

    cpullm tune --hardware PROFILE -m MODEL [--budget 10m] [--space SPACE] [sweep flags]

On the box itself (`--hardware host`, or a profile whose topology and ISA match this machine):
the OS checklist against the profile's recommendations, kernel rates measured now per thread
count and format (read bandwidth, matvec and GEMM: build/suites/kernels/bench_kernels) and the
time of everything that is not a matrix product (a calibration run of `cpullm profile`),
predictions for every point of the space, then a sweep within the budget that measures them,
each point's kernel rates measured again just before it, and the prediction error per point.
A model larger than this machine's memory gets the rates and predictions only. On any other
box: planning only — its emulated topology, the
thread and NUMA plan, the kernel command line and sysctl settings, and roofline predictions of
time to first token and tokens/s per format, batch and NUMA strategy, with their inputs. The
model is read through its header only, so a model of any size can be planned for.
"""
import json
import math
import os
import sys

from . import measure
from . import files
from . import oscheck
from . import registry
from . import roofline
from . import space as sp
from . import stats
from . import sweep as sw

HERE = os.path.dirname(os.path.abspath(__file__))
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
    print("  inputs (a range [low, high] gives the interval: each prediction at its ranges' middle, [slow end - fast end]):")
    for field in ("memory_bandwidth_gbs_per_package", "memory_bandwidth_measured_gbs_per_package", roofline.clock_field(profile),
                  "fp32_flops_per_cycle_per_core", "int8_ops_per_cycle_per_core", "q4_0_ops_per_cycle_per_core",
                  "socket_link_gbs_per_package", "core_to_core_ns", "socket_to_socket_ns",
                  "memory_gib_per_package"):
        f = profile[field]
        print(f"    {field} = {f['value']}  ({f['source']})")
    print(f"    packages = {sockets}, cores per package = {cores_per_socket}")
    print(f"    bandwidth efficiency = {args.bandwidth_efficiency} (attainable share of theoretical bandwidth where no "
          f"measured figure exists; an assumption)")
    print(f"    compute efficiency = {args.compute_efficiency} (share of the FMA/int8 peak the GEMM reaches; "
          f"an assumption; suites/prefill_compute.py measures it)")
    print(f"    model: {shape.layers} layers, dim {shape.dim}, kv dim {shape.kv_dim}, vocab {shape.vocab}; "
          f"prompt {args.prompt} tokens, decode at position {args.prompt}, KV cache in {args.kv_type}; each decode step "
          f"pays its parallel loops (cpullm info --costs --sequences N) a fork/join each")
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
                need = weights * s["copies"] / sockets + batch * roofline.kv_bytes(shape, args.prompt + 1, args.kv_type) / sockets
                if need > mem_per_socket:
                    cells.append("does not fit")
                    continue
                loops = registry.costs(model=args.model, sequences=batch, cpullm=args.cpullm)["decode_step"]["parallel_loops"]
                tps = {corner: roofline.predict_decode(shape, fmt, roofline.profile_roofs(
                    profile, sockets, cores_per_socket, strategy, args.bandwidth_efficiency, args.compute_efficiency, corner),
                    batch, args.prompt, args.kv_type, loops=loops) for corner in roofline.CORNERS}
                cells.append(f"{tps['mid'][0]:.1f} [{tps['low'][0]:.1f}-{tps['high'][0]:.1f}] ({tps['mid'][1]})")
            ttft = {corner: roofline.predict_prefill(shape, fmt, roofline.profile_roofs(
                profile, sockets, cores_per_socket, strategies[0], args.bandwidth_efficiency, args.compute_efficiency, corner),
                args.prompt) for corner in roofline.CORNERS}
            print(f"| {fmt} | {gib(weights)} | {batch} | " + " | ".join(cells) +
                  f" | {ttft['mid'][0] * 1e3:.4g} [{ttft['high'][0] * 1e3:.4g}-{ttft['low'][0] * 1e3:.4g}] ({ttft['mid'][1]}) |")
    print("  NUMA strategies: " + "; ".join(f"{k}: {v['why']}" for k, v in roofline.numa_strategies(sockets).items()
                                            if k in strategies))


def plan_other_box(args, plan, profile):
    info = measure.model_info(args.cpullm, args.model)
    shape = roofline.model_shape(info, args.cpullm)
    print_plan(args, plan, profile)
    print()
    print_os_settings(profile, plan["topology"])
    print()
    try:
        print_predictions(args, shape, profile, plan["topology"], info["totals"]["bytes"])
    except registry.RegistryError as e:  # the model's decode-step loops come from `cpullm info --costs`
        sw.fail(str(e))


# ---------------------------------------------------------------------------------------------
# This box: checklist, roofs measured now, predictions, then the sweep that checks them.
# ---------------------------------------------------------------------------------------------

def bench_kernels_path(cpullm):
    """Beside the binary: in the build tree (suites/kernels/), else in an installed copy (../libexec/cpullm/)."""
    here = os.path.dirname(os.path.abspath(cpullm))
    build_tree = os.path.join(here, "suites", "kernels", "bench_kernels")
    return build_tree if os.path.exists(build_tree) else os.path.join(here, "..", "libexec", "cpullm", "bench_kernels")


def measure_rates(cpullm, formats, thread_counts, isa, decode_shape, set_mib, step_tokens=(1,), repetitions=3):
    """Kernel rates of this machine, measured now by bench_kernels, once per thread count
    (OMP_NUM_THREADS: a matvec on one core is not half of one on two): the read bandwidth, and
    per format the rate of a step of each of `step_tokens` tokens (GB/s of weights:
    matvec_decode, the layers of `decode_shape`, (dim, ffn, kv dim), in turn from a file mapping
    over a set of set_mib[format] MiB; decode steps and prompt chunks alike); each the best of
    `repetitions` (other jobs on the machine only ever slow a run down, so the best is the
    closest to the machine's own speed). Returns {threads: roofline.KernelRates}."""
    binary = bench_kernels_path(cpullm)
    if not os.path.exists(binary):
        raise measure.MeasureError(f"{binary}: missing (build the suites: cmake --build BUILD --target bench_kernels)")
    isa_n = ISA_NUMBER[isa]
    by_type = {registry.ggml_type(f): f for f in formats}  # bench_kernels' arguments: the ggml type numbers
    dim, ffn, kv_dim = decode_shape
    rates = {}
    for t in thread_counts:
        names = [f"memory_read/{t}/"]
        names += [f"matvec_decode/{registry.ggml_type(f)}/{dim}/{ffn}/{kv_dim}/{isa_n}/1/{set_mib[f]}/{n}/"
                  for f in formats for n in step_tokens]
        out = measure.run_checked([binary, "--benchmark_filter=^(" + "|".join(names) + ")", "--benchmark_format=json",
                                   "--benchmark_min_time=0.1", f"--benchmark_repetitions={repetitions}",
                                   "--decode_set_mib=" + ",".join(str(set_mib[f]) for f in formats),
                                   "--decode_tokens=" + ",".join(str(n) for n in step_tokens)],
                                  env=dict(os.environ, OMP_NUM_THREADS=str(t))).stdout
        best = {}
        for r in json.loads(out)["benchmarks"]:
            if r.get("run_type") == "iteration" and "error_occurred" not in r:
                key = tuple(r["run_name"].split("/"))
                best[key] = max(best.get(key, 0.0), r["bytes_per_second"] / 1e9)
        rates[t] = roofline.KernelRates(
            threads=t,
            bandwidth_gbs=next(v for f, v in best.items() if f[0] == "memory_read"),
            layer_gbs={(by_type[int(f[1])], int(f[8])): v for f, v in best.items() if f[0] == "matvec_decode"})
    return rates


PAGE_CHECK_WINDOWS = 8


def page_check(cpullm, model, thread_counts):
    """The read rate of the model file's own pages, mapped as the engine maps them, against the
    read roof's freshly allocated memory, PAGE_CHECK_WINDOWS windows of each, interleaved: per
    thread count {"file": [GB/s per window], "fresh": [...]}. The kernel rates come from freshly
    written files; on some hosts a model whose page-cache pages have been resident for hours
    stalls reads for 10-200 ms at a time, which shows as a slow window
    (docs/tuning.md, "Page-cache stalls")."""
    result = {}
    for t in thread_counts:
        out = measure.run_checked([bench_kernels_path(cpullm), f"--read_file={model}",
                                   f"--benchmark_filter=^memory_read(_file)?/{t}/", "--benchmark_format=json",
                                   "--benchmark_min_time=0.2", f"--benchmark_repetitions={PAGE_CHECK_WINDOWS}",
                                   "--benchmark_enable_random_interleaving=true"]).stdout
        windows = {"memory_read_file": [], "memory_read": []}
        for r in json.loads(out)["benchmarks"]:
            if r.get("run_type") == "iteration" and "error_occurred" not in r:
                windows[r["run_name"].split("/")[0]].append(r["bytes_per_second"] / 1e9)
        if all(windows.values()):
            result[t] = {"file": windows["memory_read_file"], "fresh": windows["memory_read"]}
    return result


STALLED_WINDOW = 0.8  # the file's slowest window below this share of fresh memory's slowest: stalls


def stalled_pages(check):
    """The thread counts at which the model's pages stalled: their slowest window well below
    fresh memory's slowest (a stall of 10-200 ms takes a fifth or more of a 0.2 s window)."""
    return [t for t, w in sorted(check.items()) if min(w["file"]) < STALLED_WINDOW * min(w["fresh"])]


def print_page_checks(checks):
    """checks: {model file: page_check(...)}."""
    print(f"\nthe points' model files' pages (bench_kernels memory_read_file --read_file=FILE: the file's mapping "
          f"against fresh memory, {PAGE_CHECK_WINDOWS} windows of 0.2 s each, interleaved; median, slowest):")
    for path, check in checks.items():
        for t, w in sorted(check.items()):
            verdict = "STALLED" if t in stalled_pages(check) else "as fresh memory"
            print(f"  {path}, {t} thread(s): file {stats.median(w['file']):.1f}, {min(w['file']):.1f} GB/s; fresh "
                  f"memory {stats.median(w['fresh']):.1f}, {min(w['fresh']):.1f} GB/s: {verdict}")
    if any(stalled_pages(c) for c in checks.values()):
        print("  STALLED: reads of this file's page-cache pages stalled; on some hosts pages that have been resident "
              "for hours stall for 10-200 ms at a time, now and then (docs/tuning.md, \"Page-cache stalls\"). The "
              "kernel rates are measured on freshly written pages, so runs from a stalled file take stalls the "
              "predictions leave out: their points are marked below. A fresh copy of the file (cp) has fresh pages.")


def measure_overheads(cpullm, model, thread_counts, workload):
    """The calibration: `cpullm profile` of the model at each thread count, the workload's prompt
    and generation, three times (the first run also touches the scratch and KV pages, which
    bench's untimed warm-up does before its timed runs); per thread count each part's least time
    over the runs (roofline.least_overhead): a slow minute during one run then spoils none of
    them. Returns {threads: roofline.Overhead}."""
    overheads = {}
    for t in thread_counts:
        runs = [roofline.overhead_from_profile(json.loads(measure.run_checked(
            [cpullm, "profile", "-m", model, "-p", str(workload["prompt"]), "-n", str(workload["gen"]), "-t", str(t),
             "--no-counters", "--json"]).stdout)) for _ in range(3)]
        overheads[t] = roofline.least_overhead(runs)
    return overheads


def print_inputs(label, rates, overheads, formats, decode_shape, set_mib):
    """The kernel rates per thread count, and the overhead calibration where there is one."""
    print(f"{label}:")
    for t, r in sorted(rates.items()):
        print(f"  {t} thread(s): read bandwidth {r.bandwidth_gbs:.1f} GB/s; layers "
              f"{'x'.join(map(str, decode_shape))} (dim x ffn x kv dim) in turn from a file mapping, GB/s of weights "
              "at N token(s) a step:")
        for f in sorted({f for f, _ in r.layer_gbs}):
            print(f"    {f} ({set_mib[f]} MiB): " + ", ".join(f"{n}: {v:.1f}" for (g, n), v in sorted(r.layer_gbs.items())
                                                           if g == f))
        if not overheads:
            continue
        o = overheads[t]
        print(f"    overhead (cpullm profile): decode {o.decode_s * 1e3:.3f} ms/step ({o.decode_per_token_s * 1e3:.3f} "
              f"of it per token) + attention "
              f"{o.decode_attention_s * 1e3:.3f} ms/token at position {o.decode_position:.0f}; prefill of {o.prompt} "
              f"tokens {o.prefill_s * 1e3:.1f} ms + attention {o.prefill_attention_s * 1e3:.1f} ms")


def step_tokens(points, workload):
    """The tokens of the steps the points take: a decode step's (one per sequence), a prompt
    chunk's, and 1 (a prompt's logits)."""
    decode = {p.get("sequences", 1) for p in points}
    prefill = {n for p in points for n in roofline.prefill_chunks(workload["prompt"], p.get("sequences", 1),
                                                                  p.get("batch", roofline.CHUNK))}
    return sorted({1} | decode | prefill)


def predict_points(points, shape, workload, rates, overheads, max_threads):
    """Per point key: predicted decode tokens/s (all sequences) and TTFT ms (all prompts) with
    their parts."""
    predictions = {}
    for p in points:
        t = p.get("threads", 0) or max_threads
        fmt, keep, sequences = p.get("format"), p.get("keep", ""), p.get("sequences", 1)  # no format: the file as it is
        # bench's generation test decodes after its depth: positions depth .. depth + gen - 1.
        depth = workload.get("depth", 0)
        tps, dparts = roofline.predict_decode_host(shape, fmt, rates[t], overheads[t], depth + (workload["gen"] - 1) / 2, keep,
                                                   sequences)
        ttft, pparts = roofline.predict_prefill_host(shape, fmt, rates[t], overheads[t], workload["prompt"], keep,
                                                     p.get("batch", roofline.CHUNK), sequences, depth)
        predictions[sp.point_key(p)] = {"decode_tps": tps, "ttft_ms": ttft * 1e3, "decode_parts": dparts,
                                        "prefill_parts": pparts}
    return predictions


def parts_text(parts, scale=1e3):
    return ", ".join(f"{k} {v * scale:.2f}" for k, v in parts.items())


def point_formats(shape, point):
    """The formats a point's matrices end up in (under q4_0 the output layer is Q6_K)."""
    return sorted({f for *_, f, _ in roofline.matrices(shape, point.get("format"), point.get("keep", ""))})


def tune_this_box(args, plan, profile):
    info = measure.model_info(args.cpullm, args.model)
    shape = roofline.model_shape(info, args.cpullm)
    topology = plan["topology"]
    print("OS checklist (current, recommended, why, fix):")
    checks = oscheck.checklist(args.root, topology, profile["recommendations"], args.model, info["totals"]["bytes"])
    oscheck.print_checklist(checks, sys.stdout)
    print(f"  {sum(c.status == 'change' for c in checks)} to change, {sum(c.status == 'unavailable' for c in checks)} "
          f"not exposed here, {sum(c.status == 'ok' for c in checks)} as recommended")

    space = sp.load_space(args.space)
    workload = space["workload"]
    sweep = sw.Sweep(args, workload)
    points, dropped = sp.constrain(sp.expand(space), sweep.topology, sweep.source_format, sweep.features)
    for point, reason in dropped:
        print(f"skipped {sp.describe(point)}: {reason}", file=sys.stderr)
    if not points:
        sw.fail(f"{args.space}: no point of the space can run here")
    max_threads = len(sp.usable_cores(sweep.topology, "", 0))
    thread_counts = sorted({p.get("threads", 0) or max_threads for p in points})
    formats = sorted({f for p in points for f in point_formats(shape, p)})
    decode_shape = roofline.nearest_decode_shape(shape)
    set_mib = {f: roofline.decode_set_mib(shape, f) for f in formats}
    isa = best_isa(args.cpullm)

    memory = sum(total for total, _ in oscheck.node_memory(args.root).values())
    fits = not memory or info["totals"]["bytes"] < memory
    rates = measure_rates(args.cpullm, formats, thread_counts, isa, decode_shape, set_mib, step_tokens(points, workload))
    if fits:
        overheads = measure_overheads(args.cpullm, args.model, thread_counts, workload)
        calibration = (f"overhead calibration: cpullm profile -m {args.model} -p {workload['prompt']} "
                       f"-n {workload['gen']}, the better of 2 runs")
    else:
        print(f"\n{args.model}: {gib(info['totals']['bytes'])} does not fit this machine's {gib(memory)} of memory: "
              "planning only (kernel rates measured; the model is not run, so what is not a matrix product is not "
              "calibrated and left out: the predictions below are bounds, decode from above and TTFT from below)")
        overheads = {t: roofline.Overhead(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, workload["prompt"]) for t in thread_counts}
        calibration = "no overhead calibration"
    print_inputs(f"\nroofs measured now (bench_kernels, ISA {isa}; {calibration})", rates, overheads if fits else None,
                 formats, decode_shape, set_mib)
    before = predict_points(points, shape, workload, rates, overheads, max_threads)
    print(f"\nPREDICTIONS before measuring (prompt {workload['prompt']}, decode of {workload['gen']} tokens from "
          f"position {workload.get('depth', 0)}, as bench's tests, per sequence; tokens/s and TTFT of all sequences; parts in ms):")
    for p in points:
        pr = before[sp.point_key(p)]
        print(f"  {sp.describe(p)}: decode {pr['decode_tps']:.2f} tokens/s ({parts_text(pr['decode_parts'])} per step), "
              f"TTFT {pr['ttft_ms']:.0f} ms ({parts_text(pr['prefill_parts'])})")
    if not fits:
        return

    # The machine's speed moves while the sweep runs (other jobs share it): before each run of a
    # point its kernel rates are measured again (once each); each run is predicted from the
    # better of the rates measured just before and just after it (bracketing_rates). The overhead
    # calibration is kept from above.
    paired_rates = {}  # (point key, level): the rates measured before each of its runs, in order

    def threads_of(point):
        return point.get("threads", 0) or max_threads

    def remeasure(point, level):
        t = threads_of(point)
        fresh = measure_rates(args.cpullm, point_formats(shape, point), [t], isa, decode_shape,
                              set_mib, step_tokens([point], workload), 1)[t]
        paired_rates.setdefault((sp.point_key(point), level), []).append(fresh)

    print(f"\nsweep (budget {args.budget}; before each run of a point its kernel rates are measured again):")
    sweep_obj, results, winner = sw.run_sweep(args, space, before_run=remeasure)
    sw.report(args, sweep_obj, results, winner)
    per_run = {}
    for r in results:
        runs = paired_rates.get((r["key"], r["level"]), [])
        if r["error"] or len(runs) != len(r["samples"]):  # replayed by --resume, or a run failed: no pairs
            continue
        per_run[(r["key"], r["level"])] = [
            (predict_points([r["point"]], shape, workload, {fresh.threads: fresh}, overheads,
                            max_threads)[r["key"]], fresh) for fresh in bracketing_rates(runs)]
    # The files the measured points ran from, and their thread counts: their pages checked now.
    files = {}
    for r in results:
        if (r["key"], r["level"]) in per_run:
            files.setdefault(sweep_obj.model_path(r["point"]), set()).add(threads_of(r["point"]))
    checks = {path: page_check(args.cpullm, path, sorted(ts)) for path, ts in sorted(files.items())}
    print_page_checks(checks)
    stalled = {(path, t) for path, check in checks.items() for t in stalled_pages(check)}
    print_errors(args, results, before, per_run, rates,
                 lambda point: (sweep_obj.model_path(point), threads_of(point)) in stalled)


def bracketing_rates(before_each_run):
    """The rates each run is predicted from: the better of those measured just before it and
    just after it (before the point's next run; the last run has only the former). A rate
    measurement takes a fraction of a second and a run several: a slowdown that hits one window
    but not the run (or not the other window) once put a point at -52% (docs/tuning.md); other
    jobs only ever slow a kernel down, so the better window is the one closer to the run's
    machine."""
    after = before_each_run[1:] + [None]
    return [best_rates(a, b) if b else a for a, b in zip(before_each_run, after)]


def best_rates(a, b):
    """Each rate the better of two measurements of the same kernels."""
    return roofline.KernelRates(threads=a.threads, bandwidth_gbs=max(a.bandwidth_gbs, b.bandwidth_gbs),
                                layer_gbs={k: max(v, b.layer_gbs[k]) for k, v in a.layer_gbs.items()})


METRICS = (("decode_tps", "decode", "tokens/s", 1), ("ttft_ms", "TTFT", "ms", 0))
TARGET = 0.15  # the prediction's target: within ±15% of what is measured


def run_errors(predictions, samples):
    """Per metric: the errors (predicted - measured) / measured of each run against the prediction
    from the rates measured around it, and the point's error. predictions and samples: one per
    run, in the order the runs were made.

    Some hosts stall a process's memory reads for 10-200 ms at a time, now and then, when they
    touch page-cache pages that have been resident for long: the model file's,
    not the rate windows' freshly written ones (docs/tuning.md, "Page-cache stalls"). A stall is not the
    machine's speed and no roofline predicts it, so decode is held to the run's median step
    (decode_step_tps; a build without it gives the mean). A prefill is one call with no steps
    to take a median of: its stalls stay in (and a file whose pages stall is marked, page_check).
    A point's error is the median of its runs' errors, which sets aside one run that a slowdown
    hit between its rates and itself. What the stalls cost decode is reported beside it
    (stall_share)."""
    errors = {}
    for key, *_ in METRICS:
        each = [p[key] / measured(s, key) - 1 for p, s in zip(predictions, samples)]
        errors[key] = {"each": each, "median": stats.median(each)}
    return errors


def measured(sample, key):
    """A run's value of the metric the prediction is held to: decode's median step where the
    build's bench gives it, else the metric as measured."""
    return sample.get("decode_step_tps", sample[key]) if key == "decode_tps" else sample[key]


def stall_share(samples):
    """The share of each run's decode time beyond its median step's, as (least, most): what
    stalls and slower steps took from the mean that bench reports."""
    shares = [1 - s["decode_tps"] / s["decode_step_tps"] for s in samples if s.get("decode_step_tps")]
    return (min(shares), max(shares)) if shares else None


def print_errors(args, results, before, per_run, rates, pages_stalled=lambda point: False):
    """Prediction error per measured point, (predicted - measured) / measured. Each run is held
    against the prediction from the kernel rates measured in the seconds around it (a slow
    minute moves both and cancels), and the point's error (run_errors: the median of its runs',
    decode from each run's median step) is what the ±15% target is checked on. Also given: the
    range of the runs' errors, the prediction from the rates measured before the sweep (in
    brackets), the point's mean ± 95% interval as bench reports it, the share of decode time
    the stalls took, how far the point's rates had moved since the sweep began, and whether
    its model file's pages stalled (pages_stalled(point))."""
    print(f"\nprediction error per point: each run against the prediction from the kernel rates measured on "
          f"either side of it (the better), decode against the run's median step; the median of the runs' errors "
          f"[their range] (target within ±{TARGET:.0%}); before the sweep's prediction in brackets, the point's "
          f"mean ± 95% interval (stalls included):")
    lines, worst = [], []
    for r in results:
        pairs = per_run.get((r["key"], r["level"]))
        if not pairs:
            continue
        m, samples, b = r["metrics"], r["samples"], before[r["key"]]
        errors = run_errors([pr for pr, _ in pairs], samples)
        text = []
        for k, name, unit, digits in METRICS:
            e = errors[k]
            ci = f" ± {m[k]['ci95']:.{digits}f}" if m[k]["ci95"] is not None else ""
            predicted = stats.median([pr[k] for pr, _ in pairs])
            text.append(f"{name} {e['median']:+.0%} [{min(e['each']):+.0%}..{max(e['each']):+.0%}] (predicted "
                        f"{predicted:.{digits}f} ({b[k]:.{digits}f}), mean {m[k]['mean']:.{digits}f}{ci} {unit})")
            if abs(e["median"]) > TARGET:
                worst.append(f"{sp.describe(r['point'])} {name} {e['median']:+.0%}"
                             + (" (its model file's pages stalled)" if pages_stalled(r["point"]) else ""))
        stalls = stall_share(samples)
        if stalls:
            text.append(f"stalls took {stalls[0]:.0%}..{stalls[1]:.0%} of decode time"
                        + (" (the model file's pages STALLED)" if pages_stalled(r["point"]) else ""))
        old = rates[pairs[0][1].threads]
        drift = [fresh.layer_gbs[k] / old.layer_gbs[k] - 1 for _, fresh in pairs for k in fresh.layer_gbs]
        lines.append(f"  level {r['level']}: {sp.describe(r['point'])}, {len(samples)} runs: " + "; ".join(text)
                     + f"; kernel rates moved {min(drift):+.0%}..{max(drift):+.0%} since the sweep began")
    print("\n".join(lines) or "  nothing measured")
    print(f"outside ±{TARGET:.0%}: " + (", ".join(worst) if worst else "none"))
    summary = os.path.join(args.out, "tune-summary.md")
    files.write_output(summary, "# cpullm tune summary\n\n" + "\n".join(l.strip() for l in lines) + "\n")
    print(f"summary: {summary}")


def main(argv=None):
    parser = sw.ArgumentParser(prog="cpullm tune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", required=True, help="profile name (tuning/profiles) or path")
    sw.add_measure_arguments(parser)
    # A point's prediction error is the median of its runs' errors: three runs let it set aside
    # the one a slowdown hit (two would only average it in).
    parser.set_defaults(min_reps=3)
    parser.add_argument("--space", default=os.path.join(HERE, "spaces", "host.toml"),
                        help="the space the sweep covers on this box (default tuning/spaces/host.toml)")
    parser.add_argument("--formats", help="other box: formats to predict (default: every format `cpullm info --formats` lists)")
    parser.add_argument("--batches", default="1,8,32", help="other box: batch sizes (concurrent sequences) to predict")
    parser.add_argument("--prompt", type=int, default=512, help="other box: prompt tokens of the TTFT prediction")
    parser.add_argument("--kv-type", default="f16",
                        help="other box: the KV cache's type in the decode predictions, one of `cpullm info --formats`' "
                             "KV types (default f16, as the seed suite runs)")
    parser.add_argument("--bandwidth-efficiency", type=float, default=0.75,
                        help="other box: attainable share of theoretical bandwidth where the profile has no measured figure")
    parser.add_argument("--compute-efficiency", type=float, default=0.4, help="other box: share of peak the GEMM reaches")
    parser.add_argument("--root", default="/", help="where /proc and /sys are read from (tests point it at a fake tree)")
    args = parser.parse_args(argv)
    os.environ["CPULLM_BIN"] = os.path.abspath(args.cpullm)  # the formats are this binary's
    try:
        known = registry.format_names()
        kv_types = registry.kv_type_names()
    except registry.RegistryError as e:
        sw.fail(str(e))
    if args.kv_type not in kv_types:
        sw.fail(f"--kv-type: {args.kv_type!r} is none of {', '.join(kv_types)}")
    args.formats = [f for f in (args.formats or ",".join(known)).split(",") if f]
    try:
        args.batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        args.batches = []
    if not args.batches or min(args.batches) < 1:
        sw.fail("--batches: a comma-separated list of batch sizes, each at least 1")
    for f in args.formats:
        if f not in known:
            sw.fail(f"--formats: unknown format {f!r} (known: {', '.join(known)})")
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
    except OSError as e:
        sw.fail(sw.os_error(e))


if __name__ == "__main__":
    main()
