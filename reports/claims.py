"""Seed-claims audit: each claim C1-C16 of the seed article (listed in ../shared/seed), what cpullm measured (the
database), read from a sourced profile, or predicted, and a verdict computed from those numbers.
Where the database has no data for a claim, the verdict says so and names the command that would
measure it; nothing here is a stored answer."""
from dataclasses import asdict, dataclass, replace
from typing import Callable
from statistics import median

import numpy as np

from . import predict
from . import tco
from . import throughput
from .page import Section, esc, table

# Options that identify a configuration; two results equal in all but one form a pair.
CONFIG_OPTIONS = ["model_n_params", "format", "test", "n_threads", "isa", "binding", "cpuset", "numa", "placement",
                  "attn_tile", "kv_type", "n_batch", "n_seq", "n_prompt", "n_gen", "prefetch", "sparsity"]
SEED_HOST = "E5-4627 v4"
# A claim of "better" without a number is counted as a 5% gain: smaller is within a shared host's noise.
QUALITATIVE = 1.05


@dataclass
class Verdict:
    claim: str
    evidence: str  # what was measured, read or predicted, with numbers
    verdict: str   # measured pairs: holds | does not hold | inconclusive; else confirmed | refuted | not testable here | not measured yet
    basis: str     # measured | spec | arithmetic | predicted | none
    next_step: str = ""  # what it would take, where the verdict is not final


def option_value(result, option):
    if option == "sparsity":
        return result["config"].get("sparsity") or 0
    return result.get(option)


def paired_results(contents, option, is_a, is_b, test):
    """Pairs (a results, b results) on the same host, equal in every option but `option`, where
    is_a / is_b pick the two values; a side may hold several results (the audit's rounds)."""
    groups = {}
    for r in contents.results:
        if r.get("avg_ts") is None or (test and r.get("test") != test):
            continue
        key = (contents.runs[r["run_id"]]["fingerprint"],) + tuple(option_value(r, o) for o in CONFIG_OPTIONS if o != option)
        side = "a" if is_a(option_value(r, option)) else "b" if is_b(option_value(r, option)) else None
        if side:
            groups.setdefault(key, {}).setdefault(side, []).append(r)
    return [(sides["a"], sides["b"]) for sides in groups.values() if "a" in sides and "b" in sides]


def repetition_rates(contents, results):
    """Every stored repetition's tokens/s of these results."""
    return [s["ts"] for r in results for s in contents.samples.get(r["id"], []) if s.get("ts")]


def speed_effect(contents, pairs, resamples=2000):
    """a's tokens/s over b's: the geometric mean over the pairs of the ratio of their repetitions'
    medians, with a 95% bootstrap interval (each side's repetitions resampled, fixed seed). Pairs
    with fewer than two repetitions a side take no part; (None, None, None, 0) where none has."""
    sides = [(np.array(repetition_rates(contents, a)), np.array(repetition_rates(contents, b))) for a, b in pairs]
    sides = [(x, y) for x, y in sides if len(x) >= 2 and len(y) >= 2]
    if not sides:
        return None, None, None, 0
    effect = float(np.exp(np.mean([np.log(np.median(x) / np.median(y)) for x, y in sides])))
    rng = np.random.default_rng(0)
    logs = np.zeros(resamples)
    for x, y in sides:
        logs += np.log(np.median(rng.choice(x, (resamples, len(x))), axis=1) / np.median(rng.choice(y, (resamples, len(y))), axis=1))
    low, high = np.exp(np.percentile(logs / len(sides), [2.5, 97.5]))
    return effect, float(low), float(high), sum(len(x) + len(y) for x, y in sides)


def runs_named(contents, used):
    return ", ".join(f"run {i}" for i in sorted({r["run_id"] for r in used}))


@dataclass(frozen=True)
class SpeedClaim:
    """A claim that option value a makes tokens/s (or its inverse, the time per token) better
    than value b by the factor `claimed`, judged on `test` (tg: decode, pp: prefill)."""
    title: str
    option: str
    is_a: Callable
    is_b: Callable
    test: str
    claimed: float
    how: str  # the command that measures it


# The claims one host can test as pairs; suites/audit.py measures them, speedup_claim judges them.
SPEED_CLAIMS = {
    "C5": SpeedClaim("C5: isolcpus=2-31 reserves cores for inference (lower latency)", "cpuset", lambda v: bool(v),
                     lambda v: not v, "tg", QUALITATIVE,
                     "cpullm bench -m MODEL -n 32 -t 1 --cpuset 1 --db results.db, and the same without --cpuset "
                     "(scripts/run-default's audit runs both)"),
    "C6": SpeedClaim("C6: INT8 weights 3.2x faster than FP32 (13 GB -> 3.25 GB), accuracy loss under 2%", "format",
                     lambda v: v == "int8-channel", lambda v: v == "f32", "tg", 3.2,
                     "cpullm bench -m MODEL_f32.gguf,MODEL_int8.gguf -n 32 --db results.db"),
    "C7": SpeedClaim("C7: Top-K sparsity (20% zeros) gives 1.8x throughput", "sparsity",
                     lambda v: bool(v) and abs(float(v) - 0.2) < 0.01, lambda v: not v, "tg", 1.8,
                     "cpullm quantize --sparsity 0.2 then cpullm bench with both files --db results.db"),
    "C8": SpeedClaim("C8: threads bound (taskset) avoid cross-NUMA scheduling", "binding", lambda v: v in ("compact", "numa"),
                     lambda v: v == "none", "tg", QUALITATIVE,
                     "cpullm bench -m MODEL -n 32 --bind none,compact,numa --db results.db (on a multi-node host)"),
    "C9": SpeedClaim("C9: double buffering (prefetch) gives 22% lower latency", "prefetch", lambda v: v == 1, lambda v: v == 0,
                     "tg", 1 / 0.78, "cpullm bench -m MODEL -n 32 --prefetch 0,1 --db results.db"),
    "C10": SpeedClaim("C10: 8x8 tiling of QK^T reduces cache misses (faster attention)", "attn_tile", lambda v: v == "8x8",
                      lambda v: v not in (None, "", "8x8"), "pp", QUALITATIVE,
                      "cpullm bench -m MODEL -p 512 -n 0 --attn-tile 8x8,128x128 --db results.db"),
}


def bar(claimed):
    """The factor a measured effect must reach for a claimed one: 80% of the claimed gain."""
    return 1 + 0.8 * (claimed - 1)


def judge(low, high, claimed):
    """holds, does not hold or inconclusive: where the interval [low, high] lies against bar()."""
    return "holds" if low >= bar(claimed) else "does not hold" if high < bar(claimed) else "inconclusive"


def speedup_claim(contents, spec):
    """The verdict on a SpeedClaim. It holds where the interval of the measured factor lies at or
    above 80% of the claimed gain, does not hold where it lies below, and is inconclusive where it
    reaches across."""
    claim, claimed, how = spec.title, spec.claimed, spec.how
    pairs = paired_results(contents, spec.option, spec.is_a, spec.is_b, spec.test)
    if not pairs:
        return Verdict(claim, "no pair of results differing only in " + spec.option, "not measured yet", "none", how)
    used = [r for a, b in pairs for r in a + b]
    effect, low, high, count = speed_effect(contents, pairs)
    if effect is None:
        ratio = median(median(r["avg_ts"] for r in a) / median(r["avg_ts"] for r in b) for a, b in pairs)
        return Verdict(claim, f"measured tokens/s factor {ratio:.2f}x ({len(pairs)} pairs; {runs_named(contents, used)}) against the "
                              f"claimed {claimed:.2f}x, with no repetitions stored to give it an interval", "inconclusive",
                       "measured", how)
    verdict = judge(low, high, claimed)
    note = {"holds": "", "does not hold": "on this host; the claim was made on the 4-socket E5 box",
            "inconclusive": "more repetitions (CPULLM_AUDIT_BUDGET) or a quieter host"}[verdict]
    return Verdict(claim, f"measured tokens/s factor {effect:.2f}x, 95% interval {low:.2f}-{high:.2f} ({count} repetitions of "
                          f"{len(pairs)} pair(s); {runs_named(contents, used)}) against the claimed {claimed:.2f}x "
                          f"(holds from {bar(claimed):.2f}x)", verdict, "measured", note)


def single_node(contents):
    """Whether every host in the database has one NUMA node (a binding claim cannot be tested there)."""
    return bool(contents.runs) and all((run.get("numa_nodes") or 1) <= 1 for run in contents.runs.values())


def seed_host_runs(contents):
    return [run for run in contents.runs.values() if SEED_HOST in (run.get("cpu_model") or "")]


def audit(contents, context):
    a = context.assumptions
    e5 = predict.load_profile("e5-4627v4")
    sockets, cores = predict.profile_layout(e5)
    tdp = e5["tdp_watts_per_package"]["value"]
    bandwidth = sockets * e5["memory_bandwidth_gbs_per_package"]["value"]
    box = seed_host_runs(contents)
    on_box = "run on the 4-socket E5-4627 v4 box: scripts/nightly or cpullm bench --db there, then cpullm report"
    out = []

    measured_cores = f"; measured on the box: {box[0]['cores']} cores, {box[0]['sockets']} sockets" if box else ""
    out.append(Verdict("C1: 4 x E5-4627 v4 with 8 cores / 16 threads each, 32 cores",
                       f"profile e5-4627v4 (Intel ARK via reports/data/sources.md): {sockets} x {cores} = {sockets * cores} cores, no SMT{measured_cores}",
                       "refuted" if (box[0]["cores"] if box else sockets * cores) != 32 else "confirmed", "measured" if box else "spec"))
    read = [r for r in contents.results if r.get("test") == "kernel" and r["case_name"].startswith("kernel/memory_read")
            and contents.runs[r["run_id"]] in box and r["metrics"].get("bytes_per_second")]
    if read:
        best = max(r["metrics"]["bytes_per_second"] for r in read) / 1e9
        out.append(Verdict("C2: memory bandwidth about 200 GB/s", f"measured memory_read {best:.0f} GB/s on the box; theoretical {bandwidth:.1f}",
                           "confirmed" if abs(best - 200) <= 0.2 * 200 else "refuted", "measured"))
    else:
        out.append(Verdict("C2: memory bandwidth about 200 GB/s", f"theoretical {sockets} x 4 channels x DDR4-2400 = {bandwidth:.1f} GB/s "
                           "(profile); achievable bandwidth is not known without the box", "not testable here", "spec", on_box))
    memory = f"measured {box[0]['memory_bytes'] / 2**30:.0f} GiB on the box" if box and box[0].get("memory_bytes") else "no run on the box"
    out.append(Verdict("C3: 256 GB DDR4-2400, 64 GB per socket; SATA/NVMe disks; 2 x 1 GbE", memory,
                       "confirmed" if box and abs(box[0]["memory_bytes"] / 2**30 - 256) < 16 else "not testable here",
                       "measured" if box else "none", "" if box else on_box))
    threads_per_core = int(e5["topology"]["value"].rsplit("pu:", 1)[1].split()[0])
    out.append(Verdict("C4: Hyper-Threading off cuts single-core latency 15%; NUMA optimisation on; 135 W cap",
                       f"profile e5-4627v4: {threads_per_core} hardware thread per core (topology pu:{threads_per_core}); TDP {tdp} W",
                       "refuted" if threads_per_core == 1 else "not testable here", "spec",
                       "the part has no Hyper-Threading to switch off, so the 15% cannot come from it; BIOS settings need the box"))
    out.append(speedup_claim(contents, SPEED_CLAIMS["C5"]))
    params = predict.parameters("llama-7b")
    c6 = speedup_claim(contents, SPEED_CLAIMS["C6"])
    c6.evidence += (f"; sizes by arithmetic: {params / 1e9:.2f}B parameters are {params * 4 / 1e9:.1f} GB in FP32 "
                    f"and {params / 1e9:.1f} GB in INT8, not 13 and 3.25 (that is FP16 -> 4-bit); " + accuracy_evidence(contents))
    q8 = speedup_claim(contents, replace(SPEED_CLAIMS["C6"], is_a=lambda v: v == "q8_0"))
    if q8.basis == "measured":
        c6.evidence += "; Q8_0 against FP32: " + q8.evidence.removeprefix("measured ")
    out.append(c6)
    out.append(speedup_claim(contents, SPEED_CLAIMS["C7"]))
    c8 = speedup_claim(contents, SPEED_CLAIMS["C8"])
    if c8.verdict == "not measured yet" and single_node(contents):
        c8 = Verdict(c8.claim, "every host in the database has one NUMA node: no thread can be scheduled across nodes there",
                     "not testable here", "none", c8.next_step)
    out.append(c8)
    out.append(speedup_claim(contents, SPEED_CLAIMS["C9"]))
    out.append(speedup_claim(contents, SPEED_CLAIMS["C10"]))
    out.append(c11_verdict(contents))

    w = a["workload"]
    server = seed_option(a)
    seed = predict.option_serving(server, contents, context, a)
    low, high = seed.interval()
    for claim, claimed, value, unit in (("C12: time to first token 380 ms on 4 x E5 (A100 120 ms)", 380,
                                         None if seed.prefill_s is None else seed.prefill_s * 1e3, "ms to prefill the batch's prompts"),
                                        ("C13: 85 tokens/s on 4 x E5 (A100 260)", 85, seed.generated_tokens_per_s,
                                         "generated tokens/s end to end, prefill included")):
        if value is None:
            out.append(Verdict(claim, f"no prefill time in the figure: {seed.source}", "not measured yet", "none",
                               "cpullm bench --workload seed --db results.db on the box"))
        elif seed.kind == "measured":
            out.append(Verdict(claim, f"{value:.3g} {unit}: {seed.source}",
                               "confirmed" if abs(value - claimed) <= 0.2 * claimed else "refuted", "measured"))
        else:
            note = ""
            if claim.startswith("C13"):
                note = (f" ({low:.3g}-{high:.3g} over the inputs' ranges; the claimed {claimed} is "
                        f"{'inside' if low <= claimed <= high else 'outside'} that interval)")
            out.append(Verdict(claim, f"{value:.3g} {unit}{note}; {seed.source}", "not testable here", "predicted",
                               "cpullm bench --workload seed --db results.db on the box"))
    out.append(c14_verdict(contents, context, server))
    out.append(c15_verdict(contents, context, server))
    upgrade = predict.predicted_cpu("xeon-8380", w, "q8_0", a["prediction_efficiency"])
    e5_predicted = predict.predicted_cpu("e5-4627v4", w, server["format"], a["prediction_efficiency"])
    (ul, uh), (el, eh) = upgrade.interval(), e5_predicted.interval()
    out.append(Verdict("C16: upgrade path Xeon Platinum 8380 (AVX-512, more memory channels)",
                       f"predicted {upgrade.generated_tokens_per_s:.0f} ({ul:.0f}-{uh:.0f}) generated tokens/s end to end on 2 x 8380 "
                       f"against {e5_predicted.generated_tokens_per_s:.0f} ({el:.0f}-{eh:.0f}) on 4 x E5 "
                       f"({upgrade.generated_tokens_per_s / e5_predicted.generated_tokens_per_s:.1f}x; the 8380's slow end against the "
                       f"E5's fast end {ul / eh:.1f}x); {upgrade.source}",
                       "confirmed" if ul > eh else "not testable here" if uh > el else "refuted", "predicted",
                       "a run on an 8380 box would confirm it"))
    return out


def accuracy_evidence(contents):
    """What eval-quant measured of INT8 per channel against F32 (the audit stores it: test
    "accuracy", metrics kl_mean and top1), else where the figures are."""
    stored = {r["format"]: r for r in contents.results if r.get("test") == "accuracy" and r["metrics"].get("kl_mean") is not None}
    if "int8-channel" not in stored:
        return "accuracy: cpullm eval-quant (docs/quantization-accuracy.md), not GLUE"
    parts = [f"{fmt} mean KL {stored[fmt]['metrics']['kl_mean']:.2e}, top-1 agreement {stored[fmt]['metrics']['top1']:.4f}"
             for fmt in ("int8-channel", "q8_0") if fmt in stored]
    return (f"accuracy against F16 by cpullm eval-quant on {stored['int8-channel'].get('model_type') or 'the audit model'} "
            f"(run {stored['int8-channel']['run_id']}; random weights where the model is synthetic): " + "; ".join(parts) + ", not GLUE")


def seed_option(a):
    """The assumptions' option for the seed's server (profile e5-4627v4), else one as the seed
    describes it: what C12-C15 judge."""
    return next((o for o in a["options"] if o.get("profile") == "e5-4627v4"),
                {"name": "4 x Xeon E5-4627 v4", "kind": "cpu", "profile": "e5-4627v4", "cpu_model_match": SEED_HOST, "format": "q8_0"})


def c14_verdict(contents, context, e5):
    """C14's energy by arithmetic at full load (IT power, before PUE), the same function the TCO's
    column uses: the E5 option's CPUs alone and with its platform, the A100's; its prices are in
    CNY, this report's in USD, so they are not compared."""
    profile = predict.load_profile("e5-4627v4")
    sockets, _ = predict.profile_layout(profile)
    tdp = profile["tdp_watts_per_package"]["value"]
    cpus = sockets * tdp * 24 / 1000
    power = tco.option_power(e5, contents, context.gpus, context.assumptions["workload"]) if "own" in e5 else None
    a100 = next((o for o in context.assumptions["options"] if o.get("gpu", "").startswith("a100")), None)
    a100_kwh = tco.full_load_kwh(tco.option_power(a100, contents, context.gpus, context.assumptions["workload"])) if a100 else None
    evidence = (f"arithmetic at full load, IT power before PUE: {sockets} x {tdp} W x 24 h = {cpus:.2f} kWh/day for the CPUs alone"
                + (f", {tco.full_load_kwh(power):.2f} with the option's platform ({power.source})" if power else "")
                + (f"; the A100 option {a100_kwh:.1f} kWh/day (TDP and platform)" if a100_kwh else "")
                + "; the seed's prices are CNY, the TCO's USD (reports/assumptions.json): not compared")
    return Verdict("C14: A100 12,000 CNY vs 4 x E5 8,000 CNY; 1.2 vs 0.8 kWh per day", evidence,
                   "refuted" if cpus > 0.8 * 1.2 else "confirmed", "arithmetic")


def c11_verdict(contents):
    """C11 from cpullm bench --processes: the largest share of the model's memory saved by
    processes sharing its mapping, confirmed at 80% of the claimed 40%."""
    claim = "C11: mmap'ed shared weights: 40% less memory for multi-process inference"
    sharing = throughput.sharing_results(contents)
    if not sharing:
        return Verdict(claim, "no multi-process result", "not measured yet", "none", "cpullm bench -m MODEL --processes 4 --db results.db")
    best = max(sharing, key=lambda r: r["metrics"]["model_saved_fraction"])
    m = best["metrics"]
    processes = best["config"].get("processes")
    sizes = ""
    if m.get("model_sum_rss_bytes") and m.get("model_sum_pss_bytes"):
        sizes = f": sum of Pss {m['model_sum_pss_bytes'] / 2**20:.0f} MiB against sum of Rss {m['model_sum_rss_bytes'] / 2**20:.0f} MiB"
    saved = m["model_saved_fraction"]
    limit = f"; copies would save 0%, {processes} processes sharing every page {1 - 1 / processes:.0%}" if processes else ""
    who = f"{processes} processes" if processes else "processes"
    return Verdict(claim, f"measured by cpullm bench --processes: {who} sharing the mapped model saved {saved:.0%} "
                          f"of its memory{sizes} against one process (the best of {len(sharing)} result(s); "
                          f"{runs_named(contents, sharing)}){limit}",
                   "holds" if saved >= 0.4 * 0.8 else "does not hold", "measured")


def c15_verdict(contents, context, e5):
    """C15 by the TCO model at 100k generated tokens/day: the seed's server, owned, against each
    GPU option owned and rented, with the saving's range over every assumption's range (the
    TCO's variations). Where owning and renting give different verdicts, the verdict says so."""
    claim = "C15: under 100k tokens/day the E5 server's TCO is over 60% lower; '70% of the GPU's performance at a third of the cost'"
    _, base, moved = tco.model(contents, context)
    cpu = next((i for i, o in enumerate(base) if o.option["name"] == e5.get("name") and o.acquisition == "own"), None)
    gpus = [j for j, o in enumerate(base) if o.option["kind"] == "gpu"]
    if cpu is None or not gpus:
        return Verdict(claim, "the assumptions file lists no owned E5 option and GPU option", "not measured yet", "none",
                       "add both to reports/assumptions.json")
    a = context.assumptions
    volume = 1e5
    parts, verdicts = [], {}
    for j in gpus:
        def saving(offers, assumptions):
            return 1 - offers[cpu].daily_cost(volume, assumptions) / offers[j].daily_cost(volume, assumptions)
        value = saving(base, a)
        ends = [saving(o, m) for _, _, varied, moved_a, path in moved if tco.concerns(path, base[cpu], a) or tco.concerns(path, base[j], a)
                for o, m in zip(varied, moved_a)]
        gpu = base[j]
        verdicts[gpu.acquisition] = verdicts.get(gpu.acquisition, set()) | {"confirmed" if value > 0.6 else "refuted"}
        cpu_cost, gpu_cost = base[cpu].daily_cost(volume, a), gpu.daily_cost(volume, a)
        saved = f"{value:.0%} lower" if value >= 0 else f"{cpu_cost / gpu_cost:.1f}x the GPU's"
        parts.append(f"against {gpu.name}: {cpu_cost:.2f} vs {gpu_cost:.2f} {a['currency']}/day, {saved} (saving "
                     f"{min(ends):.0%} to {max(ends):.0%} over the assumptions' ranges; {tco.kinds_note(base[cpu], gpu)})")
    all_verdicts = set().union(*verdicts.values())
    if len(all_verdicts) == 1:
        verdict = all_verdicts.pop()
    elif verdicts.get("own") != verdicts.get("rent") and len(verdicts.get("own", ())) == 1 and len(verdicts.get("rent", ())) == 1:
        verdict = f"{next(iter(verdicts['own']))} against owned GPUs, {next(iter(verdicts['rent']))} against rented ones"
    else:
        verdict = "depends on the GPU option"
    return Verdict(claim, f"TCO model at {volume:.0e} generated tokens/day, {base[cpu].name}: " + "; ".join(parts) +
                   f"; the seed's own table gives 85/260 = {85 / 260:.0%} of the performance, not 70%",
                   verdict, "predicted", "the model's inputs are in the TCO section")


def build(contents, context):
    def label(v):
        css = {"confirmed": "confirmed", "holds": "confirmed", "refuted": "refuted", "does not hold": "refuted"}.get(v.verdict, "untested")
        return f'<span class="{css}">{esc(v.verdict)}</span>'
    verdicts = audit(contents, context)
    context.report_data["claims"] = [asdict(v) for v in verdicts]
    rows = [[esc(v.claim), esc(v.evidence), label(v), esc(v.basis), esc(v.next_step)] for v in verdicts]
    return Section("claims", "Seed claims audit", table(["claim", "what cpullm has", "verdict", "basis", "what it would take / note"], rows))
