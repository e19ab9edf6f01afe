"""GPU comparison: the GPU profiles with their sourced specs, published throughput, measured
results imported from a JSON file, and a side-by-side table like the seed article's with what
each figure is (claimed, published, measured or predicted) and the CPU/GPU ratios."""
from . import predict
from . import tco
from .page import Section, esc, number, table

# The seed article's own table (claims C12-C14): (row, A100, 4 x E5).
SEED_TABLE = [("time to first token (ms)", 120, 380), ("throughput (tokens/s)", 260, 85),
              ("hardware cost (CNY)", 12000, 8000), ("energy per day (kWh)", 1.2, 0.8)]


def spec_cell(figure):
    return f'{number(figure["value"])}<br><small>{esc(figure["source"])}</small>'


def specs_table(gpus):
    rows = [[esc(g["name"]), spec_cell(g["memory_gb"]), spec_cell(g["memory_bandwidth_gbs"]), spec_cell(g["tdp_w"]),
             spec_cell(g["fp16_tensor_tflops"])] for g in gpus.values()]
    return table(["GPU", "memory GB", "bandwidth GB/s", "TDP W", "FP16 tensor TFLOP/s (dense)"], rows)


def throughput_table(context):
    a = context.assumptions
    rows = [[esc(p["gpu"]), esc(p["engine"]), esc(p["format"]), number(p["n_seq"]), number(p["n_prompt"]), number(p["n_gen"]),
             number(float(p["tokens_per_s"])), "published", esc(p["source"])] for p in context.published]
    rows += [[esc(m["gpu"]), esc(m["engine"]), esc(m["format"]), number(m["n_seq"]), number(m["n_prompt"]), number(m["n_gen"]),
              number(float(m["tokens_per_s"])), "measured", esc(f"{m['host']}, {m['date']}: {m['command']}")] for m in context.gpu_results]
    w = a["workload"]
    for gpu in context.gpus.values():
        p = predict.predicted_gpu(gpu, w, "f16", a["prediction_efficiency"])
        rows.append([esc(gpu["id"]), "roofline model", "f16", number(w["n_seq"]), number(w["n_prompt"]), number(w["n_gen"]),
                     number(float(p.value)), "predicted", esc(p.source)])
    return table(["GPU", "engine", "format", "sequences", "prompt", "generated", "tokens/s", "kind", "source"], rows)


def side_by_side(contents, context):
    """The seed's rows for its two machines as claimed, then for each TCO option as cpullm has it."""
    a = context.assumptions
    columns = [("A100 (seed's claim)", [r[1] for r in SEED_TABLE], "claimed"),
               ("4 x E5-4627 v4 (seed's claim)", [r[2] for r in SEED_TABLE], "claimed")]
    for option in a["options"]:
        throughput = predict.option_throughput(option, contents, context.gpu_results, context.gpus, a)
        power = tco.option_power(option, contents, context.gpus, a["workload"])
        kwh = tco.daily_cost(option, throughput.value, power, throughput.value * 86400, a)[1]
        ttft = None
        if option["kind"] == "cpu":
            ttft = predict.predicted_cpu(option["profile"], a["workload"], option["format"], a["prediction_efficiency"])[1].value
        columns.append((option["name"], [ttft, throughput.value, option["price"], kwh],
                        f"throughput {throughput.kind}, TTFT predicted, price assumed ({a['currency']}), energy from power x 24 h at full load"))
    headers = ["row"] + [name for name, _, _ in columns]
    rows = [[esc(label)] + [number(float(values[i])) if values[i] is not None else "\u2014" for _, values, _ in columns]
            for i, (label, _, _) in enumerate(SEED_TABLE)]
    rows.append(["what the figures are"] + [esc(kind) for _, _, kind in columns])
    ratio = [esc("CPU / GPU ratio")] + [f"throughput {85 / 260:.0%}, TTFT {380 / 120:.1f}x", ""]
    gpus = [values[1] for name, values, _ in columns[2:] if "A100" in name]
    ratio += [f"throughput {values[1] / gpus[0]:.0%} of the A100 option" if gpus and values[1] else "" for _, values, _ in columns[2:]]
    rows.append(ratio)
    return table(headers, rows)


def build(contents, context):
    body = ("<h3>Specifications</h3>" + specs_table(context.gpus) +
            "<h3>Throughput: published, measured, predicted</h3>" + throughput_table(context) +
            "<h3>Side by side, as the seed's table</h3>" + side_by_side(contents, context) +
            "<p>The seed's table puts the E5 server at 85/260 = 33% of the A100's throughput while its text says "
            "'about 70%'. Measured GPU results enter through <code>--gpu-results FILE</code> (docs/gpu-results.md).</p>")
    return Section("gpu", "GPU comparison", body)
