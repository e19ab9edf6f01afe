"""cpullm sweep: measure a model over a space of configurations and keep the best.

    cpullm sweep -m MODEL --space SPACE [--strategy grid|random|halving] [--budget 10m]
                 [--objective ttft|tpot|throughput|cost] [--db FILE] [--out DIR] [--resume]

Each point runs `cpullm bench ... -o jsonl` (a build without bench falls back to
`cpullm generate`'s timing line and says so), repeated until the 95% confidence interval of
the objective is within --rel-ci of its mean or the point's time (--point-budget, longer at
each halving level) is spent. The winner is re-measured against the runner-up, alternating
runs, before it is declared. Writes OUT/sweep-state.jsonl (resume), OUT/sweep-table.md and
OUT/best-OBJECTIVE.toml per objective, which `cpullm generate/bench --config FILE` read, and
with an SQLite --db a run of kind 'sweep' there, one row per evaluation (bench's own runs then
go to OUT/bench-runs.db).
"""
import json
import os
import shlex
import sys

from . import measure
from . import files
from . import registry
from . import results as res
from . import space as sp
from .cli_errors import ArgumentParser, fail, os_error
from .stats import mean_ci, repeat_until_tight
from .strategies import STRATEGIES, Budget, halving_plan, parse_duration, ranked

HERE = os.path.dirname(os.path.abspath(__file__))


default_cpullm = registry.default_cpullm


def add_measure_arguments(parser):
    """Flags shared by sweep and tune: how each point is measured."""
    parser.add_argument("-m", "--model", required=True, help="GGUF model (any matrix format quantize reads)")
    parser.add_argument("--budget", default="10m", help="wall-clock budget for the sweep: 90s, 10m, 1h (default 10m)")
    parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="halving")
    parser.add_argument("--objective", choices=sorted(res.OBJECTIVES), default="throughput")
    parser.add_argument("--db", help="results database: an SQLite file (the sweep as a run of kind sweep), or a "
                                     "postgresql:// URL or libpq conninfo string (bench's runs only)")
    parser.add_argument("--out", default="sweep-out", help="folder for the state, the table and the configs")
    parser.add_argument("--cache", help="folder for quantized copies of the model (default OUT/models)")
    parser.add_argument("--resume", action="store_true", help="continue the sweep in --out, repeating nothing finished")
    parser.add_argument("--seed", type=int, default=0, help="order of random and halving")
    parser.add_argument("--count", type=int, help="random: at most this many points")
    parser.add_argument("--eta", type=int, default=3, help="halving: keep 1/eta of the points per level (default 3)")
    parser.add_argument("--point-budget", type=float, default=20.0, help="seconds per point at level 0 (x eta per level)")
    parser.add_argument("--rel-ci", type=float, default=0.05, help="stop repeating when the 95%% interval is within this of the mean")
    parser.add_argument("--min-reps", type=int, default=2)
    parser.add_argument("--max-reps", type=int, default=8, help="repetitions per point at level 0 (x eta per level)")
    parser.add_argument("--confirm-reps", type=int, default=3, help="runs each of the winner and the runner-up get when re-measured")
    parser.add_argument("--usd-per-hour", type=float, help="the machine's cost per hour, for --objective cost")
    parser.add_argument("--noise", choices=["cpu", "memory", "both"], help="run a background hog during every measurement")
    parser.add_argument("--noise-on", choices=["housekeeping", "all"], default="all",
                        help="where the hog runs: every CPU, or the housekeeping cores (the lowest core of each node)")
    parser.add_argument("--isolation-check", action="store_true",
                        help="after the sweep: the winner's p99 inter-token latency under a noise load on all cores, "
                             "then with the load on the housekeeping cores and the winner on the rest")
    parser.add_argument("--backend", choices=["auto", "bench", "generate"], default="auto",
                        help="what measures a point (auto: bench when this build has it)")
    parser.add_argument("--cpullm", default=default_cpullm(), help="the cpullm binary ($CPULLM_BIN, else build/cpullm)")


class Progress:
    """One stderr line per finished evaluation (redrawn in place on a terminal): a bar, the
    count, elapsed time, the ETA, and the best point so far."""

    def __init__(self, total, budget, objective):
        self.total, self.budget, self.objective, self.done, self.best = total, budget, objective, 0, None
        self.tty = sys.stderr.isatty()

    def update(self, result, measured):
        self.done += 1
        better = res.better_for(self.objective)
        if result["value"] is not None and (self.best is None or better(result["value"], self.best["value"])):
            self.best = result
        elapsed = self.budget.elapsed()
        rate = elapsed / self.done
        eta = min(rate * max(self.total - self.done, 0), self.budget.left())
        width = 20
        filled = min(width, width * self.done // max(self.total, 1))
        best = (f"best {self.best['value']:.4g} {res.OBJECTIVES[self.objective][2]} ({sp.describe(self.best['point'])})"
                if self.best else "best: none yet")
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                f"{'measured' if measured else 'resumed'}, {elapsed:.0f}s elapsed, ETA {eta:.0f}s, {best}")
        print(("\r" + line + "\033[K") if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def finish(self):
        if self.tty:
            print(file=sys.stderr)


class Sweep:
    """Everything a measurement needs: the binary, the model and its quantized copies, the
    workload, the measuring command, noise, and the stored state."""

    def __init__(self, args, workload):
        self.args, self.workload = args, workload
        if not os.path.exists(args.cpullm):
            fail(f"{args.cpullm}: no cpullm binary (build it, or pass --cpullm / set CPULLM_BIN)")
        if args.objective == "cost" and not args.usd_per_hour:
            fail("--objective cost needs --usd-per-hour (what the machine costs per hour)")
        self.info = measure.model_info(args.cpullm, args.model)
        self.source_format = measure.matrix_format(self.info)
        self.topology = topology_json(args.cpullm)["topology"]
        backend = args.backend
        if backend == "auto":
            backend = "bench" if measure.has_bench(args.cpullm) else "generate"
            if backend == "generate":
                print("cpullm sweep: note: this build has no `cpullm bench`; measuring with `cpullm generate`'s timing "
                      "line (no inter-token percentiles, no --db rows, only threads/bind/cpuset/housekeeping/attn_tile)",
                      file=sys.stderr)
        self.backend = backend
        if backend == "generate" and workload.get("depth"):
            fail(f"workload depth {workload['depth']}: measuring at depth needs `cpullm bench -d` (generate cannot fill "
                 "the context before the prompt)")
        self.features = measure.BENCH_FEATURES if backend == "bench" else measure.GENERATE_FEATURES
        if measure.quantize_prunes(args.cpullm):
            self.features = self.features | {"sparsity"}
        self.once = measure.bench_once if backend == "bench" else measure.generate_once
        os.makedirs(args.out, exist_ok=True)
        self.cache = args.cache or os.path.join(args.out, "models")
        self.state = res.State(os.path.join(args.out, "sweep-state.jsonl"), args.resume)
        # With an SQLite --db the sweep writes its own run there and bench its runs into OUT; a
        # PostgreSQL one (no driver in Python's standard library) gets bench's runs only.
        self.bench_db, self.db = args.db, None
        if args.db and backend == "bench" and not measure.is_postgres(args.db):
            self.bench_db = os.path.join(args.out, "bench-runs.db")
            command = shlex.join(["cpullm", os.path.splitext(os.path.basename(sys.argv[0]))[0]]
                                 + [a for a in sys.argv[1:] if a != "--resume"])
            self.db = res.SweepDb(args.cpullm, args.db, self.bench_db, command, workload, self.source_format)
        elif args.db and backend == "bench":
            print(f"cpullm sweep: note: {measure.without_password(args.db)}: the sweep's own run (kind 'sweep') is written to SQLite databases "
                  "only; cpullm bench writes each repetition's run there", file=sys.stderr)
        self.progress = None
        self.complete = False  # the sweep ran to its end within the budget
        self.before_run = None  # tune's hook: called with (point, level) before each run of an evaluation

    def model_path(self, point):
        return measure.model_for(self.args.cpullm, self.args.model, self.source_format,
                                 point.get("format", self.source_format), point.get("keep", ""),
                                 point.get("sparsity", 0.0), self.cache)

    def noise_cpus(self):
        """The CPUs the hog runs on: all, or each node's lowest core (the housekeeping one)."""
        cores = self.topology["cores"]
        if self.args.noise_on == "all":
            return sorted(p for c in cores for p in c["pus"])
        first = {}
        for c in cores:
            first.setdefault(c["node"], c)
        return sorted(p for c in first.values() for p in c["pus"])

    def sample(self, point):
        """One run of the point, with the derived metrics (cost) added."""
        flags = {k: v for k, v in point.items() if k not in ("format", "keep", "sparsity")}
        s = self.once(self.args.cpullm, self.model_path(point), flags, self.workload, self.bench_db)
        if self.args.usd_per_hour:
            s["usd_per_mtok"] = self.args.usd_per_hour / (s["decode_tps"] * 3600) * 1e6
        return s

    def evaluate(self, point, level):
        """The point at a level, from the stored state when it was measured before."""
        result, measured = res.evaluate_stored(self.state, point, level, self.measure)
        self.record(result)
        if self.progress:
            self.progress.update(result, measured)
        return result

    def record(self, result):
        """Into the results database (once), where the sweep writes one."""
        if self.db:
            self.db.record(result, self.model_path(result["point"]))

    def measure(self, point, level):
        """Repetitions of the point, more at higher levels (eta^level times the level-0 budget)."""
        scale = self.args.eta ** level
        metric = res.OBJECTIVES[self.args.objective][0]
        try:
            return res.summarize(point, level, self.repeat(point, level, metric, scale), self.args.objective)
        except measure.MeasureError as e:
            return res.summarize(point, level, [], self.args.objective, error=str(e))

    def run_once(self, point, level):
        if self.before_run:
            self.before_run(point, level)
        return self.sample(point)

    def repeat(self, point, level, metric, scale):
        run = lambda: repeat_until_tight(lambda: self.run_once(point, level), metric, self.args.rel_ci,
                                         self.args.min_reps, self.args.max_reps * scale, self.args.point_budget * scale)
        if not self.args.noise:
            return run()
        with measure.NoiseLoad(self.noise_cpus(), self.args.noise):
            return run()

    def confirm(self, winner, runner_up):
        """Alternating runs of the two best points (A B A B ...), so drift hits both alike."""
        pairs = self.args.confirm_reps
        stored = [self.state.get(p, "confirm") for p in (winner, runner_up)]
        if None in stored:
            samples = ([], [])
            for _ in range(pairs):
                for i, p in enumerate((winner, runner_up)):
                    try:
                        samples[i].append(self.sample(p))
                    except measure.MeasureError:
                        pass
            stored = [res.summarize(p, "confirm", s, self.args.objective) for p, s in zip((winner, runner_up), samples)]
            for r in stored:
                self.state.add(r)
        for r in stored:
            self.record(r)
        return stored


def topology_json(cpullm):
    return json.loads(measure.run_checked([cpullm, "topo", "--json"]).stdout)


def run_sweep(args, space, before_run=None):
    """The sweep itself; returns (sweep, every result, the declared winner or None).
    before_run(point, level), if given, runs before each run of a point's evaluation."""
    if args.eta < 2:
        fail(f"--eta {args.eta}: halving keeps 1/eta of the points per level, so eta must be at least 2")
    sweep = Sweep(args, space["workload"])
    if sweep.state.finished:  # resuming it would replay every evaluation into the database again
        print(f"cpullm sweep: {args.out}: the sweep finished at {sweep.state.finished}; --resume adds nothing "
              f"(its table: {os.path.join(args.out, 'sweep-table.md')}; another --out starts a new sweep)", file=sys.stderr)
        sys.exit(0)
    sweep.before_run = before_run
    points, dropped = sp.constrain(sp.expand(space), sweep.topology, sweep.source_format, sweep.features)
    for point, reason in dropped:
        print(f"cpullm sweep: skipped {sp.describe(point)}: {reason}", file=sys.stderr)
    if not points:
        fail(f"{space['path']}: no point of the space can run here (see the skipped lines above)")
    budget = Budget(parse_duration(args.budget))
    better = res.better_for(args.objective)
    planned = sum(halving_plan(len(points), args.eta)) if args.strategy == "halving" else min(len(points), args.count or len(points))
    sweep.progress = Progress(planned, budget, args.objective)
    print(f"cpullm sweep: {len(points)} points ({len(dropped)} skipped), strategy {args.strategy}, objective "
          f"{args.objective}, budget {args.budget}, measured by cpullm {sweep.backend}", file=sys.stderr)
    results = STRATEGIES[args.strategy](points, sweep.evaluate, budget, better=better, eta=args.eta,
                                        seed=args.seed, count=args.count)
    sweep.progress.finish()
    top_level = max((r["level"] for r in results if r["value"] is not None), default=0)
    order = ranked([r for r in results if r["level"] == top_level], better)
    winner = None
    if len(order) >= 2:
        a, b = sweep.confirm(order[0]["point"], order[1]["point"])
        results += [a, b]
        pick = [r for r in (a, b) if r["value"] is not None]
        winner = min(pick, key=lambda r: r["value"] if not res.OBJECTIVES[args.objective][1] else -r["value"]) if pick else order[0]
    elif order:
        winner = order[0]
    sweep.complete = not budget.spent()  # a sweep the budget cut short stays open for --resume
    return sweep, results, winner


def report(args, sweep, results, winner):
    """The table, the configs and the winner's lines on stdout; then a sweep that ran to its end
    is marked finished, in the state and the database."""
    write_outputs(args, sweep, results, winner)
    if sweep.complete:
        if sweep.db:
            sweep.db.finish()
        sweep.state.finish()


def write_outputs(args, sweep, results, winner):
    table = res.sweep_table(results, args.objective)
    files.write_output(os.path.join(args.out, "sweep-table.md"), table)
    print(table)
    if not winner:
        print("no point finished: nothing to declare")
        return
    metric, larger, unit = res.OBJECTIVES[args.objective]
    others = [r for r in results if r["level"] == "confirm" and r is not winner]
    verdict = ""
    if others and others[0]["value"] is not None:
        w, o = winner["metrics"][metric], others[0]["metrics"][metric]
        overlap = w["ci95"] is None or o["ci95"] is None or abs(w["mean"] - o["mean"]) <= w["ci95"] + o["ci95"]
        verdict = (f"; runner-up {sp.describe(others[0]['point'])} {o['mean']:.4g} "
                   f"({'statistically tied: the intervals overlap' if overlap else 'beaten: the intervals do not overlap'})")
    print(f"best for {args.objective}: {sp.describe(winner['point'])}: {winner['value']:.4g} {unit}{verdict}")
    for objective, (m, is_larger, u) in res.OBJECTIVES.items():
        scored = [r for r in results if m in r["metrics"] and not r["error"]]
        if not scored:
            continue
        best = winner if objective == args.objective else max(
            scored, key=lambda r: r["metrics"][m]["mean"] * (1 if is_larger else -1))
        path = os.path.join(args.out, f"best-{objective}.toml")
        note = ("re-measured against the runner-up" if objective == args.objective
                else "from the sweep's measurements (not re-measured)")
        res.write_config(path, os.path.abspath(sweep.model_path(best["point"])), best["point"],
                         [f"cpullm sweep: best for {objective} ({best['metrics'][m]['mean']:.4g} {u}), {note}",
                          f"model {args.model}, workload prompt {sweep.workload['prompt']} gen {sweep.workload['gen']} "
                          f"depth {sweep.workload.get('depth', 0)}, "
                          f"measured by cpullm {sweep.backend}"])
        print(f"config: {path}")
    if args.isolation_check:
        isolation_check(sweep, winner["point"])


def isolation_check(sweep, point):
    """What CPU isolation buys: the winner's latency with the noise load on every CPU, then
    with the load on the housekeeping cores and the winner's threads on the rest."""
    metric = "itl_p99_ms" if sweep.backend == "bench" else "tpot_ms"
    reps = max(sweep.args.min_reps, 3)
    rows = []
    isolated = dict(point, housekeeping=max(1, point.get("housekeeping", 0)))
    isolated.pop("cpuset", None)
    isolated.pop("threads", None)
    for label, where, p in (("noise on all CPUs", "all", point), ("noise on housekeeping cores, inference on the rest", "housekeeping", isolated)):
        sweep.args.noise_on = where
        with measure.NoiseLoad(sweep.noise_cpus(), sweep.args.noise or "both"):
            try:
                values = [sweep.sample(p)[metric] for _ in range(reps)]
            except measure.MeasureError as e:
                rows.append(f"  {label}: failed: {e}")
                continue
        mean, half = mean_ci(values)
        rows.append(f"  {label} ({sp.describe(p)}): {metric} {mean:.2f} ± {half:.2f} ms over {reps} runs")
    what = ("p99 inter-token latency" if metric == "itl_p99_ms"
            else "mean time per output token: p99 inter-token latency needs cpullm bench")
    print(f"isolation check ({what}):")
    print("\n".join(rows))


def main(argv=None):
    parser = ArgumentParser(prog="cpullm sweep", description=__doc__.split("\n\n")[0])
    add_measure_arguments(parser)
    parser.add_argument("--space", required=True, help="space file (JSON or TOML), see tuning/spaces/")
    args = parser.parse_args(argv)
    os.environ["CPULLM_BIN"] = os.path.abspath(args.cpullm)  # the formats are the measured binary's
    try:
        space = sp.load_space(args.space)
        sweep, results, winner = run_sweep(args, space)
        report(args, sweep, results, winner)
    except (sp.SpaceError, measure.MeasureError, registry.RegistryError, FileExistsError, ValueError) as e:
        fail(str(e))
    except OSError as e:  # the output folder, its state file or its table
        fail(os_error(e))


if __name__ == "__main__":
    main()
