"""GPU comparison: the GPU profiles with their sourced specs; every published figure beside
what the same roofline model the CPUs get predicts for its workload; measured results imported
from a JSON file; the seed workload on each GPU as the TCO takes it; and a side-by-side table
like the seed article's, each figure with its kind (claimed, published, measured or predicted)."""
from . import inputs, predict, tco
from .page import Section, esc, number, table
from .serving import generated_rate

# The seed article's own table (claims C12-C14): (row, unit, A100, 4 x E5).
SEED_TABLE = [("time to first token", "ms", 120, 380), ("throughput", "generated tokens/s", 260, 85),
              ("hardware cost", "CNY", 12000, 8000), ("energy per day at full load", "kWh", 1.2, 0.8)]


def spec_cell(figure):
    return f'{number(figure["value"])}<br><small>{esc(figure["source"])}</small>'


def specs_table(gpus):
    rows = [[esc(g["name"]), spec_cell(g["memory_gb"]), spec_cell(g["memory_bandwidth_gbs"]), spec_cell(g["tdp_w"]),
             spec_cell(g["fp16_tensor_tflops"])] for g in gpus.values()]
    return table(["GPU", "memory GB", "bandwidth GB/s", "TDP W", "FP16 tensor TFLOP/s (dense)"], rows)


def published_table(context):
    """Each published figure, what it counts and its conversion to generated tokens/s, beside the
    roofline model's prediction for the same workload on the GPU it names (compare_on: the
    variant, where the source names only the family): how far the model the TCO uses for GPUs is
    from the published."""
    a = context.assumptions
    rows = []
    for p in context.published:
        fact = context.facts[p["source"].removeprefix("fact:")]
        converted = generated_rate(p["tokens_per_s"], p["counts"], p["n_prompt"] or 0, p["n_gen"] or 0)
        gpu_id = p["compare_on"]
        model_cell, ratio = "\u2014", "not comparable: no prompt time"
        if converted:
            workload = dict(a["workload"], model=p["model"], n_seq=p["n_seq"], n_prompt=p["n_prompt"], n_gen=p["n_gen"])
            model = predict.predicted_gpu(context.gpus[gpu_id], workload, p["format"], a["prediction_efficiency"])
            model_cell = f"{number(model.generated_tokens_per_s)} on {esc(gpu_id)}"
            ratio = f"{model.generated_tokens_per_s / converted[0]:.2f}"
        rows.append([esc(p["gpu"]), esc(p["engine"]), esc(p["format"]), number(p["n_seq"]), number(p["n_prompt"]), number(p["n_gen"]),
                     number(float(p["tokens_per_s"])), esc(p["counts"]),
                     number(float(converted[0])) if converted else "\u2014", model_cell, ratio,
                     esc(f"{fact['says']} ({fact['date']}, {fact['url']}); {p['note']}")])
    return table(["GPU", "engine", "format", "sequences", "prompt", "generated", "published tokens/s", "counts",
                  "generated tokens/s", "model's prediction (same workload)", "model / published", "source (date, address)"], rows)


def measured_table(context):
    rows = []
    for m in context.gpu_results:
        converted = generated_rate(m["tokens_per_s"], m.get("counts", "generated"), m["n_prompt"], m["n_gen"])
        rows.append([esc(m["gpu"]), esc(m["engine"]), esc(m["format"]), number(m["n_seq"]), number(m["n_prompt"]), number(m["n_gen"]),
                     number(float(m["tokens_per_s"])), esc(m.get("counts", "generated")),
                     number(float(converted[0])) if converted else "\u2014", esc(f"{m['host']}, {m['date']}: {m['command']}")])
    return table(["GPU", "engine", "format", "sequences", "prompt", "generated", "tokens/s", "counts", "generated tokens/s", "where, when, how"],
                 rows)


def workload_table(contents, context):
    """The assumed workload on each GPU, as the TCO takes it: measured, published or predicted."""
    a = context.assumptions
    rows = []
    for gpu_id, gpu in context.gpus.items():
        option = {"kind": "gpu", "gpu": gpu_id, "format": "f16"}
        s = predict.option_serving(option, contents, context, a)
        rows.append([esc(gpu["name"]), tco.interval_text(s), esc(s.kind), number(s.prefill_s), number(s.decode_s), esc(s.source)])
    w = a["workload"]
    return table([f"GPU ({w['model']}, {w['n_seq']} x {w['n_prompt']} -> {w['n_gen']}, F16)", "generated tokens/s (interval)", "kind",
                  "prefill s", "decode s", "source"], rows)


def side_by_side(contents, context):
    """The seed's rows for its two machines as claimed, then for each TCO option as cpullm has
    it: TTFT (the batch's prefill), generated tokens/s end to end, price in its own currency,
    and full-load energy (IT power) from the same function as the TCO's."""
    a = context.assumptions
    columns = [("A100 (seed's claim)", [r[2] for r in SEED_TABLE], ["CNY" if r[1] == "CNY" else "" for r in SEED_TABLE], "claimed"),
               ("4 x E5-4627 v4 (seed's claim)", [r[3] for r in SEED_TABLE], ["CNY" if r[1] == "CNY" else "" for r in SEED_TABLE],
                "claimed")]
    for option in a["options"]:
        s = predict.option_serving(option, contents, context, a)
        power = tco.option_power(option, contents, context.gpus, a["workload"])
        price = option["own"]["price"] if "own" in option else option["rent"]["price_per_hour"]
        per = "" if "own" in option else " per hour"
        ttft = None if s.prefill_s is None else s.prefill_s * 1e3
        columns.append((option["name"], [ttft, s.generated_tokens_per_s, inputs.value(price), tco.full_load_kwh(power)],
                        ["", "", a["currency"] + per, ""],
                        f"throughput {s.kind}, TTFT {s.kind if s.prefill_s is not None else 'unknown'}, price assumed, "
                        "energy from power x 24 h at full load"))
    headers = ["row"] + [name for name, *_ in columns]
    rows = []
    for i, (label, unit, *_) in enumerate(SEED_TABLE):
        unit_text = "" if unit == "CNY" else f" ({unit})"
        rows.append([esc(label + unit_text)] + [("\u2014" if values[i] is None else
                                                 f"{number(float(values[i]))} {esc(units[i])}".strip())
                                                for _, values, units, _ in columns])
    rows.append(["what the figures are"] + [esc(kind) for *_, kind in columns])
    ratio = [esc("CPU / GPU throughput")] + [f"{85 / 260:.0%} (TTFT {380 / 120:.1f}x)", ""]
    a100 = next((values[1] for name, values, *_ in columns[2:] if "A100" in name), None)
    ratio += [f"{values[1] / a100:.0%} of the A100 option" if a100 else "" for _, values, *_ in columns[2:]]
    rows.append(ratio)
    return table(headers, rows)


def build(contents, context):
    body = ("<h3>Specifications</h3>" + specs_table(context.gpus) +
            "<h3>Published figures against the model</h3>"
            "<p>Each published figure in generated tokens/s (converted where it counts prompt tokens too; a decode-only rate "
            "has no prompt time and cannot be compared end to end), beside what tuning/roofline.py predicts for the same "
            "workload: the TCO uses that model for every GPU whose workload no source ran, so that GPUs are ranked on one "
            "kind of figure.</p>" + published_table(context) +
            "<h3>Measured (imported)</h3>" + (measured_table(context) if context.gpu_results else
                                              "<p>None imported: <code>--gpu-results FILE</code> (docs/gpu-results.md).</p>") +
            "<h3>The assumed workload on each GPU</h3>" + workload_table(contents, context) +
            "<h3>Side by side, as the seed's table</h3>" + side_by_side(contents, context) +
            "<p>The seed's table puts the E5 server at 85/260 = 33% of the A100's throughput while its text says "
            "'about 70%'. Its prices are in CNY, this report's in USD: they are not compared.</p>")
    return Section("gpu", "GPU comparison", body)
