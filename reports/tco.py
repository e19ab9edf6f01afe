"""TCO: the cost per million tokens of each option against daily token volume, and the volume
where each CPU option stops being cheaper than each GPU option. Every assumption comes from one
file (reports/assumptions.json by default) and is printed here."""
import json
import math
from typing import NamedTuple

import numpy as np

from . import predict
from .page import Section, esc, figure, new_figure, number, table


class Power(NamedTuple):
    idle: float   # W, the whole server idle
    load: float   # W, the whole server serving at full load
    source: str   # where the load figure comes from


def measured_energy(contents, option, workload):
    """(package + DRAM watts, J/token, the result) while the option's host ran the workload, from
    RAPL (cpullm bench's energy_j per repetition over its time), or None where it was not measured."""
    measured = [r for r in predict.workload_results(contents, option, workload)
                if r.get("energy_j") and r.get("avg_ns") and r["metrics"].get("energy_j_per_token")]
    if not measured:
        return None
    r = max(measured, key=lambda r: r["avg_ts"])
    return r["energy_j"] / (r["avg_ns"] / 1e9), r["metrics"]["energy_j_per_token"], r


def option_power(option, contents, gpus, workload):
    """Idle and load power of one option: for a CPU the profile's idle per package x sockets,
    and at load the measured package + DRAM power where the database has the workload's energy
    on such a host, else the profile's TDP x sockets; for a GPU its assumed idle and its TDP.
    The platform's (assumed) power is added to both."""
    if option["kind"] == "cpu":
        profile = predict.load_profile(option["profile"])
        sockets, _ = predict.profile_layout(profile)
        idle = sockets * profile["idle_watts_per_package"]["value"]
        energy = measured_energy(contents, option, workload)
        if energy:
            load = energy[0]
            run = contents.runs[energy[2]["run_id"]]
            source = (f"measured: {energy[1]:.3g} J/token, {load:.0f} W package + DRAM (RAPL) in run {run['id']} on {run['host']}, "
                      f"{energy[2]['case_name']}; idle from tuning/profiles/{option['profile']}.json")
        else:
            load = sockets * profile["tdp_watts_per_package"]["value"]
            source = f"profile: {sockets} x TDP and idle per package (tuning/profiles/{option['profile']}.json); no measured energy of the workload"
    else:
        idle, load = option["gpu_idle_w"], gpus[option["gpu"]]["tdp_w"]["value"]
        source = f"assumed: GPU idle (assumptions) and TDP (data/gpus.json, {option['gpu']})"
    return Power(idle + option["platform_idle_w"], load + option["platform_load_w"], source + "; platform power assumed")


def daily_cost(option, tokens_per_s, power, volume, a):
    """Cost per day of serving `volume` tokens/day: enough servers at max_utilisation, capital
    straight-line over the amortisation years less the residual value, energy at the servers'
    busy share between idle and load power times PUE, rack units per month."""
    capacity = tokens_per_s * 86400 * a["max_utilisation"]
    servers = max(1, math.ceil(volume / capacity))
    busy = volume / (servers * tokens_per_s * 86400)
    capital = servers * option["price"] * (1 - a["residual_value_fraction"]) / (a["amortisation_years"] * 365)
    idle, load = power.idle, power.load
    kwh = servers * (idle + (load - idle) * busy) * 24 / 1000 * a["pue"]
    rack = servers * option["rack_units"] * a["rack_per_unit_per_month"] * 12 / 365
    return capital + kwh * a["electricity_per_kwh"] + rack, kwh / servers / a["pue"]


def break_even(volumes, cpu_costs, gpu_costs):
    """Where the cheaper side changes along the volume grid, described in words."""
    cheaper = cpu_costs < gpu_costs
    if cheaper.all():
        return f"CPU cheaper at every volume up to {volumes[-1]:.3g} tokens/day"
    if not cheaper.any():
        return "GPU cheaper at every volume"
    changes = np.flatnonzero(np.diff(cheaper.astype(int)))
    return "; ".join(f"{'GPU' if cheaper[i] else 'CPU'} cheaper above {volumes[i + 1]:.3g} tokens/day" for i in changes)


def build(contents, context):
    a = context.assumptions
    grid = a["daily_volumes"]
    volumes = np.logspace(math.log10(grid["from"]), math.log10(grid["to"]), grid["points"])
    body = "<h3>Assumptions</h3>" + f"<p>From <code>{esc(context.assumptions_path)}</code>:</p><pre>{esc(json.dumps(a, indent=1))}</pre>"
    options = []
    for option in a["options"]:
        throughput = predict.option_throughput(option, contents, context.gpu_results, context.gpus, a)
        power = option_power(option, contents, context.gpus, a["workload"])
        costs = np.array([daily_cost(option, throughput.value, power, v, a)[0] for v in volumes])
        options.append((option, throughput, power, costs))

    rows = []
    for option, throughput, power, costs in options:
        kwh_full = daily_cost(option, throughput.value, power, throughput.value * 86400, a)[1]
        rows.append([esc(option["name"]), number(float(throughput.value)), esc(throughput.kind), esc(throughput.source),
                     f"{power.idle:.0f} / {power.load:.0f}", esc(power.source), number(kwh_full), number(float(option["price"])),
                     esc(option["price_source"])])
    body += "<h3>Options</h3>" + table(["option", "tokens/s", "kind", "source", "idle / load W", "power source", "kWh/day at full load",
                                         f"price ({a['currency']})", "price source"], rows)

    fig, ax = new_figure()
    for option, throughput, _, costs in options:
        ax.loglog(volumes, costs / (volumes / 1e6), label=f"{option['name']} ({throughput.kind})")
    ax.set_xlabel("tokens per day")
    ax.set_ylabel(f"{a['currency']} per million tokens")
    ax.legend(fontsize=7)
    ax.grid(True, which="major", alpha=0.3)
    body += figure(fig, "Cost per million tokens against daily volume",
                   f"computed from {context.assumptions_path} (prices, power, PUE, electricity, amortisation, residual value, rack) "
                   "and each option's throughput and power as listed in the table above (throughput measured, published or predicted; "
                   "load power measured by RAPL where the database has the workload's energy on such a host, else the profile's TDP)")

    rows = []
    for cpu in (o for o in options if o[0]["kind"] == "cpu"):
        for gpu in (o for o in options if o[0]["kind"] == "gpu"):
            rows.append([esc(cpu[0]["name"]), esc(gpu[0]["name"]), esc(break_even(volumes, cpu[3], gpu[3]))])
    body += "<h3>Break-even volume</h3>" + table(["CPU option", "GPU option", "which is cheaper"], rows)
    return Section("tco", "Total cost of ownership", body)
