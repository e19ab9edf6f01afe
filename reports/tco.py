"""TCO: the cost per million generated tokens of each option, owned or rented, against daily
token volume; the volume where each CPU option stops being cheaper than each GPU option; and how
far that volume moves when each assumption changes over its range. Every assumption comes from
one file (reports/assumptions.json by default, checked by inputs.py) and is printed here, with
the date and address of every fact it cites."""
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tuning import roofline

from . import inputs, predict
from .page import Section, esc, figure, new_figure, number, table
from .serving import Serving

VOLUMES_REPORTED = (1e5, 1e7, 1e9)  # tokens/day of report --json's cost_per_mtok


class Power(NamedTuple):
    idle: float   # W, the whole server (or the GPU's share of one) idle
    load: float   # W, serving at full load
    source: str   # where the load figure comes from


def measured_energy(contents, option, workload):
    """(package + DRAM watts, J per generated token, the result) while the option's host ran the
    workload (predict.workload_results), from RAPL (cpullm bench's energy_j per repetition over
    its time), or None where it was not measured."""
    measured = [r for r in predict.workload_results(contents, option, workload)
                if r.get("energy_j") and r.get("avg_ns") and r["metrics"].get("energy_j_per_generated_token")]
    if not measured:
        return None
    r = max(measured, key=lambda r: r["gen_ts"])
    return r["energy_j"] / (r["avg_ns"] / 1e9), r["metrics"]["energy_j_per_generated_token"], r


def option_power(option, contents, gpus, workload):
    """Idle and load power of the option's hardware: for a CPU the profile's idle per package x
    sockets, and at load the measured package + DRAM power where the database has the workload's
    energy on such a host, else the profile's TDP x sockets; for a GPU its assumed idle and its
    TDP. The platform's power (the option's own figures) is added to both. A rented option has
    the same hardware: its power is shown, its price includes it."""
    platform = option["own"] if "own" in option else {"platform_idle_w": 0, "platform_load_w": 0}
    if option["kind"] == "cpu":
        profile = predict.load_profile(option["profile"])
        sockets, _ = predict.profile_layout(profile)
        idle = sockets * roofline.at(profile["idle_watts_per_package"]["value"], "mid")
        energy = measured_energy(contents, option, workload)
        if energy:
            load = energy[0]
            run = contents.runs[energy[2]["run_id"]]
            source = (f"measured: {energy[1]:.3g} J per generated token, {load:.0f} W package + DRAM (RAPL) in run {run['id']} "
                      f"on {run['host']}, {energy[2]['case_name']}; idle from tuning/profiles/{option['profile']}.json")
        else:
            load = sockets * roofline.at(profile["tdp_watts_per_package"]["value"], "mid")
            source = f"profile: {sockets} x TDP and idle per package (tuning/profiles/{option['profile']}.json); no measured energy of the workload"
    else:
        idle, load = inputs.value(platform.get("gpu_idle_w", 0)), gpus[option["gpu"]]["tdp_w"]["value"]
        source = f"GPU idle (assumed) and TDP (data/gpus.json, {option['gpu']})"
    return Power(idle + inputs.value(platform["platform_idle_w"]), load + inputs.value(platform["platform_load_w"]),
                 source + "; platform power as assumed")


def full_load_kwh(power):
    """kWh a day of the hardware busy all day: IT power, before PUE."""
    return power.load * 24 / 1000


def own_daily_cost(own, tokens_per_s, power, volume, a):
    """Cost per day of serving `volume` generated tokens/day on owned servers: enough of them
    at max_utilisation, capital straight-line over the amortisation years less the residual
    value, energy at their actual busy share between idle and load power times PUE, rack units
    per month."""
    capacity = tokens_per_s * 86400 * inputs.value(a["max_utilisation"])
    servers = max(1, math.ceil(volume / capacity))
    busy = volume / (servers * tokens_per_s * 86400)
    capital = servers * inputs.value(own["price"]) * (1 - inputs.value(a["residual_value_fraction"])) / \
        (inputs.value(a["amortisation_years"]) * 365)
    kwh = servers * (power.idle + (power.load - power.idle) * busy) * 24 / 1000 * inputs.value(a["pue"])
    rack = servers * inputs.value(own["rack_units"]) * inputs.value(a["rack_per_unit_per_month"]) * 12 / 365
    return capital + kwh * inputs.value(a["electricity_per_kwh"]) + rack


def rent_daily_cost(rent, tokens_per_s, volume):
    """Cost per day of serving `volume` generated tokens/day on rented hardware: the busy time
    at the price per hour (energy and rack included), billed by the second or in whole hours."""
    hours = volume / tokens_per_s / 3600
    return (hours if rent["billing"] == "second" else math.ceil(hours)) * inputs.value(rent["price_per_hour"])


@dataclass
class Offer:
    """An option as acquired: owned or rented."""
    option: dict
    acquisition: str   # own | rent
    serving: Serving
    power: Power

    @property
    def name(self):
        return f"{self.option['name']}, {'owned' if self.acquisition == 'own' else 'rented'}"

    def daily_cost(self, volume, a):
        rate = self.serving.generated_tokens_per_s
        if self.acquisition == "own":
            return own_daily_cost(self.option["own"], rate, self.power, volume, a)
        return rent_daily_cost(self.option["rent"], rate, volume)


def offers(contents, context, a, profile_corner="mid"):
    out = []
    for option in a["options"]:
        serving = predict.option_serving(option, contents, context, a, profile_corner)
        power = option_power(option, contents, context.gpus, a["workload"])
        out += [Offer(option, acquisition, serving, power) for acquisition in ("own", "rent") if acquisition in option]
    return out


def volume_grid(a):
    grid = a["daily_volumes"]
    return np.logspace(math.log10(grid["from"]), math.log10(grid["to"]), grid["points"])


def crossings(cpu, gpu, a):
    """Where the cheaper side changes along the volume grid, each refined by bisection (in the
    logarithm of the volume): [(volume, the side cheaper above it)]."""
    volumes = volume_grid(a)

    def cpu_cheaper(v):
        return cpu.daily_cost(v, a) < gpu.daily_cost(v, a)
    out = []
    for low, high in zip(volumes[:-1], volumes[1:]):
        if cpu_cheaper(low) == cpu_cheaper(high):
            continue
        side = cpu_cheaper(low)
        for _ in range(40):
            middle = math.sqrt(low * high)
            low, high = (middle, high) if cpu_cheaper(middle) == side else (low, middle)
        out.append((high, "CPU" if not side else "GPU"))
    return out


def break_even(cpu, gpu, a):
    """The volume above which the GPU offer first becomes the cheaper: 0 where it is cheaper at
    every volume of the grid, infinity where it never is."""
    volumes = volume_grid(a)
    if cpu.daily_cost(volumes[0], a) >= gpu.daily_cost(volumes[0], a):
        return 0.0
    return next((v for v, side in crossings(cpu, gpu, a) if side == "GPU"), math.inf)


def volume_text(v, a):
    grid = a["daily_volumes"]
    if v == 0:
        return f"GPU cheaper at every volume from {grid['from']:.3g} tokens/day"
    if math.isinf(v):
        return f"CPU cheaper at every volume up to {grid['to']:.3g} tokens/day"
    return f"{v:.3g} tokens/day"


def kinds_note(cpu, gpu):
    if cpu.serving.kind == gpu.serving.kind:
        return f"both {cpu.serving.kind}"
    return f"ranks a {cpu.serving.kind} figure against a {gpu.serving.kind} one: kinds differ"


def pairs(all_offers):
    return [(c, g) for c in all_offers if c.option["kind"] == "cpu" for g in all_offers if g.option["kind"] == "gpu"]


def variations(contents, context, a):
    """Every assumption with a range at its low and its high end alone, then the CPU profiles'
    ranges (clock, fork/join latencies) at their slow and fast end: [(label, (low input, high
    input), [offers at each end], [assumptions at each end], the assumption's path)]."""
    out = []
    for label, path in inputs.ranged(a):
        q = a
        for key in path:
            q = q[key]
        moved = [inputs.with_value(a, path, v) for v in inputs.span(q)]
        out.append((label, inputs.span(q), [offers(contents, context, m) for m in moved], moved, path))
    out.append(("CPU profiles' ranges (clock, fork/join latencies)", ("slow end", "fast end"),
                [offers(contents, context, a, corner) for corner in ("low", "high")], [a, a], ()))
    return out


def concerns(path, offer, a):
    """Whether a variation's path can move this offer's cost: a global assumption, or the
    offer's own option and acquisition."""
    if path[:1] != ("options",):
        return True
    return a["options"][path[1]]["name"] == offer.option["name"] and path[2] == offer.acquisition


def sensitivity(contents, context, a, base, moved):
    """For each CPU offer against each GPU offer, the break-even volume at the assumed values
    and at each end of each variation (variations): [{cpu, gpu, baseline, rows: [(label, (low
    input, high input), (break-even at the low end, at the high end))]}]."""
    out = []
    for i, cpu in enumerate(base):
        for j, gpu in enumerate(base):
            if cpu.option["kind"] != "cpu" or gpu.option["kind"] != "gpu":
                continue
            rows = [(label, ends, tuple(break_even(o[i], o[j], m) for o, m in zip(varied, assumptions)))
                    for label, ends, varied, assumptions, path in moved
                    if concerns(path, cpu, a) or concerns(path, gpu, a)]
            out.append({"cpu": cpu.name, "gpu": gpu.name, "baseline": break_even(cpu, gpu, a), "rows": rows})
    return out


def offer_data(offer, a):
    s = offer.serving
    return {"name": offer.option["name"], "kind": offer.option["kind"], "acquisition": offer.acquisition,
            "figure_kind": s.kind, "source": s.source,
            "workload": {"n_seq": s.n_seq, "n_prompt": s.n_prompt, "n_gen": s.n_gen},
            "generated_tokens_per_s": s.generated_tokens_per_s, "generated_tokens_per_s_interval": list(s.interval()),
            "prefill_s": s.prefill_s, "decode_s": s.decode_s, "ttft_s": s.ttft_s, "tpot_s": s.tpot_s,
            "prompt_tokens_per_s": s.prompt_tokens_per_s,
            "idle_w": offer.power.idle, "load_w": offer.power.load, "power_source": offer.power.source,
            "kwh_per_day_full_load": full_load_kwh(offer.power),
            "price": offer.option[offer.acquisition]["price" if offer.acquisition == "own" else "price_per_hour"],
            "cost_per_mtok": {f"{v:.0e}".replace("+0", ""): offer.daily_cost(v, a) / (v / 1e6) for v in VOLUMES_REPORTED}}


def model(contents, context):
    """What the section shows, as data (report --json's "tco"), with the offers and the
    variations it came from; computed once per report (the audit reads it too)."""
    if "tco" not in context.cache:
        context.cache["tco"] = compute(contents, context)
    return context.cache["tco"]


def compute(contents, context):
    a = context.assumptions
    all_offers = offers(contents, context, a)
    moved = variations(contents, context, a)
    return {"currency": a["currency"], "workload": a["workload"], "assumptions_file": context.assumptions_path,
            "options": [offer_data(o, a) for o in all_offers],
            "break_even": [{"cpu": c.name, "gpu": g.name, "volume": break_even(c, g, a), "kinds": kinds_note(c, g),
                            "crossings": [{"volume": v, "cheaper_above": side} for v, side in crossings(c, g, a)]}
                           for c, g in pairs(all_offers)],
            "sensitivity": sensitivity(contents, context, a, all_offers, moved)}, all_offers, moved


def interval_text(serving):
    low, high = serving.interval()
    value = serving.generated_tokens_per_s
    return number(float(value)) if low == high else f"{number(float(value))} ({number(float(low))}\u2013{number(float(high))})"


# The unit of each assumption, by its key (a price in the file's currency).
UNITS = {"amortisation_years": "years", "residual_value_fraction": "share of the price", "electricity_per_kwh": "{c} per kWh",
         "pue": "facility W per IT W", "max_utilisation": "share of the day", "rack_per_unit_per_month": "{c} per U per month",
         "bandwidth": "share of the roof", "compute": "share of the roof", "price": "{c}", "platform_idle_w": "W",
         "platform_load_w": "W", "rack_units": "U", "price_per_hour": "{c} per hour"}


def assumptions_table(a, facts):
    """Every assumption as a row: name, value, its range, unit and source."""
    def unit(key):
        return UNITS.get(key, "").format(c=a["currency"])
    rows = []
    for label, path in [(n, (n,)) for n in inputs.GLOBAL_QUANTITIES] + [(f"{n} efficiency", ("prediction_efficiency", n))
                                                                        for n in ("bandwidth", "compute")]:
        q = a
        for key in path:
            q = q[key]
        low, high = inputs.span(q)
        rows.append([esc(label), number(float(inputs.value(q))), "" if low == high else f"{number(float(low))}\u2013{number(float(high))}",
                     esc(unit(path[-1])), esc(inputs.cite(q, facts))])
    for option in a["options"]:
        for acquisition, keys in (("own", inputs.OWN), ("rent", inputs.RENT)):
            for key in keys if acquisition in option else []:
                q = option[acquisition][key]
                low, high = inputs.span(q)
                rows.append([esc(f"{option['name']}: {key.replace('_', ' ')} ({acquisition})"), number(float(inputs.value(q))),
                             "" if low == high else f"{number(float(low))}\u2013{number(float(high))}", esc(unit(key)),
                             esc(inputs.cite(q, facts))])
    return table(["assumption", "value", "range", "unit", "source (date, address)"], rows)


def sensitivity_figures(rows_by_pair, a):
    """A tornado a pair whose baseline break-even lies inside the volume grid: for each
    assumption the break-even at its low and high end; pairs outside it are said in words."""
    body = ""
    grid = a["daily_volumes"]
    for pair in rows_by_pair:
        base = pair["baseline"]
        if base == 0 or math.isinf(base):
            moved = sorted({v for _, _, ends in pair["rows"] for v in ends})
            body += (f"<p>{esc(pair['cpu'])} against {esc(pair['gpu'])}: {esc(volume_text(base, a))} at the assumed values; over every "
                     f"range, the break-even runs from {esc(volume_text(moved[0], a))} to {esc(volume_text(moved[-1], a))}.</p>")
            continue
        fig, ax = new_figure(height=0.35 * len(pair["rows"]) + 1.2)
        labels = [label for label, _, _ in pair["rows"]]
        for y, (_, _, ends) in enumerate(pair["rows"]):
            ends = [min(max(v, grid["from"]), grid["to"]) for v in ends]
            ax.plot(ends, [y, y], color="0.4", linewidth=6, solid_capstyle="butt")
            ax.plot(ends[0], y, "o", color="tab:blue")
            ax.plot(ends[1], y, "s", color="tab:red")
        ax.axvline(base, color="black", linewidth=1)
        ax.set_xscale("log")
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.set_xlabel("break-even, tokens/day (circle: the assumption's low end, square: its high end)", fontsize=8)
        body += figure(fig, f"Break-even sensitivity: {pair['cpu']} against {pair['gpu']}",
                       f"computed from {a['daily_volumes']} and each range of the assumptions file, one at a time; "
                       f"the line is the break-even at the assumed values, {volume_text(base, a)}")
    return body


def build(contents, context):
    a = context.assumptions
    data, all_offers, _ = model(contents, context)
    context.report_data["tco"] = data
    w = a["workload"]
    body = (f"<p>Workload: {esc(w['model'])}, {w['n_seq']} sequences of {w['n_prompt']} prompt tokens generating {w['n_gen']} each, "
            f"{esc(w['kv_type'])} KV cache. Throughput is generated tokens per second over the whole batch, prefill included "
            "(n x generated / (prefill + decode)), for every option and every kind of figure; prompt tokens/s is shown apart "
            "and never priced.</p>")
    body += "<h3>Assumptions</h3>" + f"<p>From <code>{esc(context.assumptions_path)}</code>:</p>" + assumptions_table(a, context.facts)

    rows = []
    for o in all_offers:
        s = o.serving
        rows.append([esc(o.name), interval_text(s), esc(s.kind), number(s.prefill_s), number(s.decode_s),
                     number(None if s.tpot_s is None else s.tpot_s * 1e3), number(s.prompt_tokens_per_s), esc(s.source),
                     f"{o.power.idle:.0f} / {o.power.load:.0f}", esc(o.power.source), number(full_load_kwh(o.power)),
                     esc(inputs.cite(o.option[o.acquisition]["price" if o.acquisition == "own" else "price_per_hour"], context.facts))])
    body += "<h3>Options</h3>" + table(
        ["option", "generated tokens/s (interval)", "kind", "prefill s (TTFT)", "decode s", "TPOT ms", "prompt tokens/s", "source",
         "idle / load W", "power source", "kWh/day at full load (IT)", f"price ({a['currency']}; date, source)"], rows)

    volumes = volume_grid(a)
    fig, ax = new_figure()
    for o in all_offers:
        ax.loglog(volumes, [o.daily_cost(v, a) / (v / 1e6) for v in volumes], label=f"{o.name} ({o.serving.kind})",
                  linestyle="-" if o.acquisition == "own" else "--")
    ax.set_xlabel("generated tokens per day")
    ax.set_ylabel(f"{a['currency']} per million generated tokens")
    ax.legend(fontsize=6)
    ax.grid(True, which="major", alpha=0.3)
    body += figure(fig, "Cost per million generated tokens against daily volume",
                   f"computed from {context.assumptions_path} (prices, power, PUE, electricity, amortisation, residual value, rack, "
                   "rent per hour and its billing) and each option's throughput and power as listed above (throughput measured, "
                   "published or predicted; load power measured by RAPL where the database has the workload's energy on such a "
                   "host, else the profile's TDP); owned solid, rented dashed")

    rows = [[esc(b["cpu"]), esc(b["gpu"]), esc(volume_text(b["volume"], a)),
             esc("; ".join(f"{side} cheaper above {v:.3g}" for v, side in ((c["volume"], c["cheaper_above"]) for c in b["crossings"]))
                 or "no change"), esc(b["kinds"])] for b in data["break_even"]]
    body += "<h3>Break-even volume</h3>" + table(["CPU option", "GPU option", "GPU cheaper above", "every change", "figures"], rows)
    body += "<h3>Sensitivity</h3>" + sensitivity_figures(data["sensitivity"], a)
    return Section("tco", "Total cost of ownership and renting", body)
