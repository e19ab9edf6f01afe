"""TCO: the cost per million tokens of each option against daily token volume, and the volume
where each CPU option stops being cheaper than each GPU option. Every assumption comes from one
file (reports/assumptions.json by default) and is printed here."""
import json
import math

import numpy as np

import predict
from page import Section, esc, figure, new_figure, number, table


def option_power(option, gpus):
    """(idle W, load W) of one option: the CPU profile's idle and TDP per package x sockets, or
    the GPU's idle and TDP, plus the platform's."""
    if option["kind"] == "cpu":
        profile = predict.load_profile(option["profile"])
        sockets, _ = predict.profile_layout(profile)
        idle = sockets * profile["idle_watts_per_package"]["value"]
        load = sockets * profile["tdp_watts_per_package"]["value"]
    else:
        idle, load = option["gpu_idle_w"], gpus[option["gpu"]]["tdp_w"]["value"]
    return idle + option["platform_idle_w"], load + option["platform_load_w"]


def daily_cost(option, tokens_per_s, power, volume, a):
    """Cost per day of serving `volume` tokens/day: enough servers at max_utilisation, capital
    straight-line over the amortisation years less the residual value, energy at the servers'
    busy share between idle and load power times PUE, rack units per month."""
    capacity = tokens_per_s * 86400 * a["max_utilisation"]
    servers = max(1, math.ceil(volume / capacity))
    busy = volume / (servers * tokens_per_s * 86400)
    capital = servers * option["price"] * (1 - a["residual_value_fraction"]) / (a["amortisation_years"] * 365)
    idle, load = power
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
        power = option_power(option, context.gpus)
        costs = np.array([daily_cost(option, throughput.value, power, v, a)[0] for v in volumes])
        options.append((option, throughput, power, costs))

    rows = []
    for option, throughput, power, costs in options:
        kwh_full = daily_cost(option, throughput.value, power, throughput.value * 86400, a)[1]
        rows.append([esc(option["name"]), number(float(throughput.value)), esc(throughput.kind), esc(throughput.source),
                     f"{power[0]:.0f} / {power[1]:.0f}", number(kwh_full), number(float(option["price"])), esc(option["price_source"])])
    body += "<h3>Options</h3>" + table(["option", "tokens/s", "kind", "source", "idle / load W", "kWh/day at full load",
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
                   "and each option's throughput as listed in the table above (measured, published or predicted)")

    rows = []
    for cpu in (o for o in options if o[0]["kind"] == "cpu"):
        for gpu in (o for o in options if o[0]["kind"] == "gpu"):
            rows.append([esc(cpu[0]["name"]), esc(gpu[0]["name"]), esc(break_even(volumes, cpu[3], gpu[3]))])
    body += "<h3>Break-even volume</h3>" + table(["CPU option", "GPU option", "which is cheaper"], rows)
    return Section("tco", "Total cost of ownership", body)
