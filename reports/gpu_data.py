"""GPU profiles (data/gpus.json: sourced specs and published throughput) and measured GPU
results imported from a JSON file whose schema docs/gpu-results.md describes."""
import json
import os

from tuning import files

from .serving import COUNTS

GPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpus.json")
RESULT_FIELDS = {"gpu": str, "model": str, "format": str, "engine": str, "n_seq": int, "n_prompt": int, "n_gen": int,
                 "tokens_per_s": (int, float), "host": str, "date": str, "command": str}
OPTIONAL_FIELDS = {"ttft_ms": (int, float), "tpot_ms": (int, float), "power_w": (int, float), "notes": str, "counts": str}


class GpuDataError(Exception):
    """A GPU results file that does not follow the schema; the message names the file and entry."""


def load_gpus():
    with open(GPUS) as f:
        data = json.load(f)
    return {g["id"]: g for g in data["gpus"]}, data["published"]


def load_results(path, known_gpus):
    """The entries of a measured-results file, checked field by field."""
    data = files.read_json(path, GpuDataError)
    if not isinstance(data, dict) or data.get("schema") != "cpullm-gpu-results/1" or not isinstance(data.get("results"), list):
        raise GpuDataError(f'{path}: expected {{"schema": "cpullm-gpu-results/1", "results": [...]}}')
    for i, entry in enumerate(data["results"]):
        where = f"{path}: results[{i}]"
        if not isinstance(entry, dict):
            raise GpuDataError(f"{where}: not an object")
        for name, kind in list(RESULT_FIELDS.items()) + list(OPTIONAL_FIELDS.items()):
            if name not in entry:
                if name in RESULT_FIELDS:
                    raise GpuDataError(f"{where}: missing field {name!r}")
                continue
            if not isinstance(entry[name], kind) or isinstance(entry[name], bool):
                raise GpuDataError(f"{where}: field {name!r} has the wrong type ({type(entry[name]).__name__})")
        unknown = set(entry) - set(RESULT_FIELDS) - set(OPTIONAL_FIELDS)
        if unknown:
            raise GpuDataError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        if entry["gpu"] not in known_gpus:
            raise GpuDataError(f"{where}: gpu {entry['gpu']!r} is not one of {', '.join(known_gpus)} (reports/data/gpus.json)")
        if entry["tokens_per_s"] <= 0:
            raise GpuDataError(f"{where}: tokens_per_s must be positive")
        if entry.get("counts", "generated") not in COUNTS:
            raise GpuDataError(f"{where}: counts {entry['counts']!r} is none of {', '.join(COUNTS)}")
    return data["results"]
