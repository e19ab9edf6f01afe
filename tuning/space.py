"""The sweep space: which values each option takes, expanded into points, with the constraints
that remove points which cannot run or would measure the same thing twice.

A space file is JSON or TOML (by its extension):

    [values]                      # every key optional; a missing key keeps cpullm's default
    threads = [1, 2]              # 0: one per usable core
    bind = ["none", "compact"]    # none, compact, scatter, numa
    cpuset = ["", "1"]            # isolcpus-style lists; "": every CPU
    housekeeping = [0, 1]         # cores per NUMA node left to the OS
    attn_tile = ["8x8", "128x128"]
    format = ["q8_0", "q4_0"]     # the model is quantized into the cache (cpullm quantize)
    keep = ["", "first,last"]     # tensors left at full precision (quantize --keep)
    sparsity = [0.0, 0.5]         # fraction of weights pruned (quantize --sparsity)
    placement = ["first-touch"]   # first-touch, interleave, replicate, shard
    batch = [512]                 # prompt batch (bench -b)
    sequences = [1]               # concurrent sequences (bench -np)
    prefetch = [0, 1]             # double buffering of the next layer's weights
    kv_type = ["f16", "q8_0"]      # the KV cache's type (`cpullm info --formats` lists them)

    [workload]
    prompt = 64                   # prompt tokens per measurement
    gen = 32                      # generated tokens per measurement
    depth = 0                     # context positions filled, untimed, before each (bench -d)
"""
import itertools
import json
import os
import tomllib

from . import files
from . import registry

# Each dimension: the bench flag that sets it, the long option name a config file uses, its type.
DIMENSIONS = {
    "threads": ("-t", "threads", int),
    "bind": ("--bind", "bind", str),
    "cpuset": ("--cpuset", "cpuset", str),
    "housekeeping": ("--housekeeping", "housekeeping", int),
    "attn_tile": ("--attn-tile", "attn-tile", str),
    "format": (None, None, str),  # chooses the model file, not a flag
    "keep": (None, None, str),  # likewise (quantize --keep)
    "sparsity": (None, "sparsity", float),
    "placement": ("--placement", "placement", str),
    "batch": ("-b", "batch-size", int),
    "sequences": ("-np", "np", int),
    "prefetch": ("--prefetch", "prefetch", int),
    "kv_type": ("--kv-type", "kv-type", str),
}
# The formats and KV cache types are the binary's (`cpullm info --formats`).
CHOICES = {
    "bind": {"none", "compact", "scatter", "numa"},
    "placement": {"first-touch", "interleave", "replicate", "shard"},
    "prefetch": {0, 1},
}
BINARY_CHOICES = {"format": registry.format_names, "kv_type": registry.kv_type_names}
WORKLOAD_DEFAULTS = {"prompt": 64, "gen": 32, "depth": 0}


class SpaceError(Exception):
    """A space file that cannot be used: the message names the file and the key."""


def load_space(path):
    """Reads a space file: {"values": {dim: [..]}, "workload": {...}}, checked."""
    try:
        text = files.read_input(path)
        data = tomllib.loads(text) if path.endswith(".toml") else json.loads(text)
    except (OSError, ValueError) as e:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise SpaceError(f"{path}: cannot read the space: {e}")
    if not isinstance(data, dict) or not isinstance(data.get("values"), dict):
        raise SpaceError(f"{path}: a space needs a \"values\" table of option: [values]")
    values = {}
    for key, options in data["values"].items():
        if key not in DIMENSIONS:
            raise SpaceError(f"{path}: values.{key}: unknown option (known: {', '.join(DIMENSIONS)})")
        if not isinstance(options, list) or not options:
            raise SpaceError(f"{path}: values.{key}: must be a non-empty list")
        kind = DIMENSIONS[key][2]
        checked = []
        for v in options:
            if kind is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, kind) or isinstance(v, bool):
                raise SpaceError(f"{path}: values.{key}: {v!r} is not a {kind.__name__}")
            choices = BINARY_CHOICES[key]() if key in BINARY_CHOICES else CHOICES.get(key)
            if choices is not None and v not in choices:
                raise SpaceError(f"{path}: values.{key}: {v!r} is not one of {sorted(choices)}")
            if kind in (int, float) and v < 0:
                raise SpaceError(f"{path}: values.{key}: {v!r} is negative")
            checked.append(v)
        values[key] = checked
    workload = dict(WORKLOAD_DEFAULTS)
    for key, v in data.get("workload", {}).items():
        least = 0 if key == "depth" else 1
        if key not in WORKLOAD_DEFAULTS or not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise SpaceError(f"{path}: workload.{key}: expected prompt or gen, a positive integer, or depth, 0 or more")
        workload[key] = v
    return {"values": values, "workload": workload, "path": os.path.abspath(path)}


def expand(space):
    """Every combination of the values, in file order: a list of {dim: value} dicts."""
    keys = list(space["values"])
    return [dict(zip(keys, combo)) for combo in itertools.product(*(space["values"][k] for k in keys))]


def parse_cpu_list(text):
    """The kernel's list syntax, "0-3,8" -> [0, 1, 2, 3, 8]."""
    cpus = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def usable_cores(topology, cpuset, housekeeping):
    """Cores threads may use under a cpuset and housekeeping, as engine/runtime/thread_plan does:
    a core counts when its first PU is in the set; the lowest-numbered N per node are the OS's."""
    allowed = set(parse_cpu_list(cpuset)) if cpuset else None
    per_node = {}
    for core in topology["cores"]:
        if allowed is None or core["pus"][0] in allowed:
            per_node.setdefault(core["node"], []).append(core)
    return [c for cores in per_node.values() for c in sorted(cores, key=lambda c: c["pus"][0])[housekeeping:]]


def constrain(points, topology, source_format, features):
    """Splits points into (kept, dropped) where dropped is [(point, reason)].

    topology: `cpullm topo --json`'s "topology"; source_format: the model file's matrix format;
    features: the dimensions the measuring command can set (the rest must stay at defaults), and
    "sparsity" where quantize can prune."""
    kept, dropped, seen = [], [], set()
    bits = registry.format_bits()  # a model is never "quantized" to more bits per weight than it has
    one_node = len(topology["nodes"]) == 1
    for point in points:
        reason = None
        cores = usable_cores(topology, point.get("cpuset", ""), point.get("housekeeping", 0))
        fmt = point.get("format", source_format)
        if point.get("cpuset") and any(c not in {p for core in topology["cores"] for p in core["pus"]}
                                       for c in parse_cpu_list(point["cpuset"])):
            reason = f"cpuset {point['cpuset']} names CPUs this machine lacks"
        elif not cores:
            reason = "no core left after the cpuset and housekeeping"
        elif point.get("threads", 0) > len(cores):
            reason = f"{point['threads']} threads do not fit {len(cores)} usable cores"
        elif bits[fmt] > bits.get(source_format, 32):
            reason = f"the model is {source_format}: quantizing to {fmt} cannot add precision"
        elif point.get("keep") and fmt == source_format and not point.get("sparsity"):
            reason = f"--keep changes nothing when the format is the model's own ({fmt})"
        elif point.get("sparsity", 0.0) > 0 and "sparsity" not in features:
            reason = "this build's `cpullm quantize` has no --sparsity"
        else:
            unsupported = [k for k in point if k not in features and k not in ("format", "keep", "sparsity")]
            if unsupported:
                reason = f"the measuring command cannot set {', '.join(unsupported)}"
        if reason:
            dropped.append((point, reason))
            continue
        if one_node and point.get("placement", "first-touch") != "first-touch":
            point = dict(point, placement="first-touch")  # one NUMA node: every strategy is first-touch
        key = point_key(point)
        if key in seen:
            dropped.append((point, "the same as an earlier point on this machine (one NUMA node: every placement is first-touch)"))
            continue
        seen.add(key)
        kept.append(point)
    return kept, dropped


def point_key(point):
    """A stable name for a point: what the results store and resume match on."""
    return json.dumps(point, sort_keys=True, separators=(",", ":"))


def describe(point):
    return " ".join(f"{k}={v}" for k, v in point.items()) or "(defaults)"
