"""cpullm report: one self-contained HTML file (figures inline as SVG) from the results database:
latency, throughput and scaling, cpullm against its peers (llama.cpp) at the same points, roofline, the suites' runs against the roofs, sweeps, TCO, GPU
comparison, the seed-claims audit and the runs behind it all; with --json, the TCO and the audit
as data. Run as `cpullm report [--db FILE|URL] [--runs ID ...] [--assumptions FILE]
[--gpu-results FILE] [--profile NAME] -o report.html [--json report.json]`."""
import datetime
import json
import math
import os
import shlex
import sys
from dataclasses import dataclass, field

from tuning.cli_errors import ArgumentParser, fail
from tuning import files

from . import claims, gpu, gpu_data, inputs, latency, load, page, peers, predict, provenance, roofs, suites, sweeps, tco, throughput
from .resultsdb import Contents, Database, DatabaseError, without_password

HERE = os.path.dirname(os.path.abspath(__file__))
SECTIONS = [latency, load, throughput, peers, roofs, suites, sweeps, tco, gpu, claims, provenance]


@dataclass
class Context:
    """What every section gets besides the database's contents."""
    assumptions: dict       # the TCO assumptions file, parsed and checked (inputs.py)
    assumptions_path: str
    facts: dict             # fact id -> the cited fact (data/facts.json)
    gpus: dict              # gpu id -> profile (data/gpus.json)
    published: list         # published GPU throughput (data/gpus.json)
    gpu_results: list       # measured GPU results imported with --gpu-results
    profile: str            # hardware profile whose predicted roofline is drawn
    report_data: dict = field(default_factory=dict)  # what sections put in report --json, by section
    cache: dict = field(default_factory=dict)        # what one section computes and another reads


def plain(value):
    """`value` as JSON can hold it: numpy numbers as plain ones, infinity (a break-even beyond
    the volume grid) as null, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, bool, int)) or value is None:
        return value
    value = float(value)
    return None if math.isinf(value) or math.isnan(value) else value


def parse_arguments(argv):
    parser = ArgumentParser(prog="cpullm report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="results database: SQLite file, postgresql:// URL or libpq conninfo string "
                                     "(none: an empty report of what to measure)")
    parser.add_argument("--runs", type=int, nargs="+", metavar="ID", help="only these run ids (default: every run)")
    parser.add_argument("--assumptions", default=os.path.join(HERE, "assumptions.json"), help="TCO assumptions (JSON)")
    parser.add_argument("--gpu-results", help="measured GPU results to import (JSON, docs/gpu-results.md)")
    parser.add_argument("--profile", default="e5-4627v4", help="hardware profile whose predicted roofline is drawn (tuning/profiles)")
    parser.add_argument("-o", "--output", required=True, help="the HTML file to write")
    parser.add_argument("--json", metavar="FILE", help="also write what the page shows as JSON: tco (options, break-even, "
                                                       "sensitivity) and the claims audit (docs/report.md)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_arguments(argv)
    if not os.path.isfile(os.path.join(predict.PROFILES, f"{args.profile}.json")):
        fail(f"--profile {args.profile}: no tuning/profiles/{args.profile}.json")
    gpus, published = gpu_data.load_gpus()
    try:
        gpu_results = gpu_data.load_results(args.gpu_results, gpus) if args.gpu_results else []
        contents = Database(args.db).load(args.runs) if args.db else Contents()
    except (DatabaseError, gpu_data.GpuDataError) as e:
        fail(str(e))
    facts = inputs.load_facts()
    try:
        assumptions = inputs.load_assumptions(args.assumptions, facts)
    except inputs.InputError as e:
        fail(str(e))
    context = Context(assumptions, args.assumptions, facts, gpus, published, gpu_results, args.profile)
    sections = [module.build(contents, context) for module in SECTIONS]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = shlex.join(without_password(a) for a in (argv if argv is not None else sys.argv[1:]))
    subtitle = (f"Written {now} by: cpullm report {command}; "
                f"database {without_password(args.db or '(none)')}, {len(contents.runs)} runs, {len(contents.results)} results "
                f"of cpullm and {len(contents.peers)} of its peers")
    outputs = [(args.output, page.render("cpullm report", subtitle, sections))]
    if args.json:
        outputs.append((args.json, json.dumps(plain(dict(context.report_data, written_by=subtitle)), indent=1, allow_nan=False) + "\n"))
    for path, text in outputs:
        try:
            files.write_output(path, text)
        except OSError as e:
            fail(f"{path}: cannot write: {e.strerror}")
    print(os.path.abspath(args.output))


if __name__ == "__main__":
    main()
