"""The cost model's inputs: the cited facts (data/facts.json) and the assumptions file, checked
as they are read. An assumption is a number, or a quantity {"value", "range": [low, high],
"source", "facts": [fact ids], "date"}: its range is what the sensitivity figure moves it over;
its facts give it a dated, addressed source. A price (price, price_per_hour, electricity, rack)
must carry a date, its own or its facts'. A file that breaks these rules is refused with one
line naming the file and the field."""
import json
import os

from tuning import files
from tuning import registry  # the KV cache's types: the binary's

FACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "facts.json")
TOP_LEVEL = ["currency", "workload", "amortisation_years", "residual_value_fraction", "electricity_per_kwh", "pue",
             "max_utilisation", "rack_per_unit_per_month", "prediction_efficiency", "daily_volumes", "options"]
WORKLOAD = {"model": str, "n_seq": int, "n_prompt": int, "n_gen": int, "kv_type": str}
# The global quantities, by name; the options' own are in OWN and RENT.
GLOBAL_QUANTITIES = ["amortisation_years", "residual_value_fraction", "electricity_per_kwh", "pue", "max_utilisation",
                     "rack_per_unit_per_month"]
OWN = ["price", "platform_idle_w", "platform_load_w", "rack_units"]
RENT = ["price_per_hour"]
PRICES = {"price", "price_per_hour", "electricity_per_kwh", "rack_per_unit_per_month"}
BILLING = ("hour", "second")


class InputError(Exception):
    """An assumptions or facts file that breaks the rules; the message names the file and field."""


def load_facts():
    with open(FACTS) as f:
        return {fact["id"]: fact for fact in json.load(f)["facts"]}


def value(q):
    """A quantity's value (a plain number is its own)."""
    return q["value"] if isinstance(q, dict) else q


def span(q):
    """(low, high) of a quantity: its range, or its value twice."""
    return tuple(q["range"]) if isinstance(q, dict) and "range" in q else (value(q), value(q))


def dates(q, facts):
    """The dates a quantity carries: its own, else its facts'."""
    if not isinstance(q, dict):
        return []
    return [q["date"]] if q.get("date") else [facts[f]["date"] for f in q.get("facts", []) if facts[f].get("date")]


def cite(q, facts):
    """A quantity's source in words, with each fact's date and address."""
    if not isinstance(q, dict):
        return ""
    parts = [q.get("source", "")] + [f"{facts[f]['says']} ({facts[f]['date']}, {facts[f]['url']})" for f in q.get("facts", [])]
    if q.get("date"):
        parts.append(f"as of {q['date']}")
    return "; ".join(p for p in parts if p)


def check_quantity(q, where, facts, price=False):
    if isinstance(q, bool) or not isinstance(q, (int, float, dict)):
        raise InputError(f"{where}: expected a number or {{\"value\", \"range\", \"source\"}}")
    if isinstance(q, dict):
        unknown = set(q) - {"value", "range", "source", "facts", "date"}
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        if isinstance(q.get("value"), bool) or not isinstance(q.get("value"), (int, float)):
            raise InputError(f"{where}.value: expected a number")
        if "range" in q:
            r = q["range"]
            if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in r)
                    and r[0] <= q["value"] <= r[1]):
                raise InputError(f"{where}.range: expected [low, high] around the value {q['value']}")
        for fact in q.get("facts", []):
            if fact not in facts:
                raise InputError(f"{where}.facts: no fact {fact!r} in reports/data/facts.json")
    if value(q) < 0:
        raise InputError(f"{where}: negative")
    if price and not dates(q, facts):
        raise InputError(f"{where}: a price needs a date, its own (\"date\") or a cited fact's")


def check_assumptions(a, facts):
    """Raises InputError (without the file's name) on the first rule `a` breaks."""
    if not isinstance(a, dict):
        raise InputError("expected a JSON object")
    missing = [k for k in TOP_LEVEL if k not in a]
    if missing:
        raise InputError(f"missing assumption(s): {', '.join(missing)} (see reports/assumptions.json)")
    w = a["workload"]
    for key, kind in WORKLOAD.items():
        if not isinstance(w.get(key), kind) or isinstance(w.get(key), bool):
            raise InputError(f"workload.{key}: expected {'text' if kind is str else 'a whole number'}")
    kv_types = registry.kv_type_names()
    if w["kv_type"] not in kv_types:
        raise InputError(f"workload.kv_type: {w['kv_type']!r} is none of {', '.join(kv_types)}")
    if w["n_seq"] < 1 or w["n_prompt"] < 0 or w["n_gen"] < 1:
        raise InputError("workload: needs n_seq >= 1, n_prompt >= 0 and n_gen >= 1 (generated tokens are what is priced)")
    for name in GLOBAL_QUANTITIES:
        check_quantity(a[name], name, facts, name in PRICES)
    for name in ("bandwidth", "compute"):
        check_quantity(a["prediction_efficiency"].get(name), f"prediction_efficiency.{name}", facts)
    if not isinstance(a["options"], list) or not a["options"]:
        raise InputError("options: expected a list of options")
    for i, option in enumerate(a["options"]):
        where = f"options[{i}]"
        if not isinstance(option, dict) or option.get("kind") not in ("cpu", "gpu"):
            raise InputError(f"{where}.kind: expected \"cpu\" or \"gpu\"")
        for key in ("name", "format", "profile" if option["kind"] == "cpu" else "gpu"):
            if not isinstance(option.get(key), str):
                raise InputError(f"{where}.{key}: expected text")
        if "own" not in option and "rent" not in option:
            raise InputError(f"{where}: needs \"own\", \"rent\" or both")
        for acquisition, keys in (("own", OWN), ("rent", RENT)):
            if acquisition not in option:
                continue
            for key in keys + (["gpu_idle_w"] if acquisition == "own" and option["kind"] == "gpu" else []):
                check_quantity(option[acquisition].get(key), f"{where}.{acquisition}.{key}", facts, key in PRICES)
        if "rent" in option and option["rent"].get("billing") not in BILLING:
            raise InputError(f"{where}.rent.billing: expected \"hour\" or \"second\"")


def load_assumptions(path, facts):
    """The assumptions file, checked; InputError names the file."""
    assumptions = files.read_json(path, InputError)
    try:
        check_assumptions(assumptions, facts)
    except InputError as e:
        raise InputError(f"{path}: {e}")
    return assumptions


def ranged(a):
    """Every assumption with a range, as (label, path into `a`): what the sensitivity figure moves."""
    out = [(name.replace("_", " "), (name,)) for name in GLOBAL_QUANTITIES if "range" in _as_dict(a[name])]
    out += [(f"{name} efficiency", ("prediction_efficiency", name)) for name in ("bandwidth", "compute")
            if "range" in _as_dict(a["prediction_efficiency"][name])]
    for i, option in enumerate(a["options"]):
        for acquisition, keys in (("own", OWN), ("rent", RENT)):
            for key in keys:
                if acquisition in option and "range" in _as_dict(option[acquisition][key]):
                    short = option["name"].split(" (")[0]  # "A100 80GB SXM (1 GPU of ...)": its name without the aside
                    out.append((f"{short}: {key.replace('_', ' ')} ({acquisition})", ("options", i, acquisition, key)))
    return out


def _as_dict(q):
    return q if isinstance(q, dict) else {}


def with_value(a, path, new):
    """A copy of `a` with the quantity at `path` set to `new` (its range and source kept)."""
    copy = json.loads(json.dumps(a))
    node = copy
    for key in path[:-1]:
        node = node[key]
    q = node[path[-1]]
    node[path[-1]] = dict(q, value=new) if isinstance(q, dict) else new
    return copy
