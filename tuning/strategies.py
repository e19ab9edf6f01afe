"""Search strategies over a list of points, each driven by one `evaluate(point, level)` call
that returns a result with an objective "value" (or None when the run failed), and a Budget
that says when to stop. Level 0 is the shortest measurement; halving raises it for survivors.

- grid: every point, in space order, until the budget ends;
- random: the points in a seeded random order, at most `count`, until the budget ends;
- halving: successive halving: every point short (level 0), the best 1/eta measured longer
  (level 1), and so on until one is left or the budget ends.
"""
import math
import random
import time


class Budget:
    """Wall-clock seconds for the whole sweep; `None` means no limit."""

    def __init__(self, seconds):
        self.seconds, self.start = seconds, time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.start

    def left(self):
        return math.inf if self.seconds is None else self.seconds - self.elapsed()

    def spent(self):
        return self.left() <= 0


def parse_duration(text):
    """"90s", "10m", "1h", or plain seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        raise ValueError(f"--budget {text!r}: expected a duration such as 90s, 10m or 1h")


def ranked(results, better):
    """Results that measured something, best first. better(a, b) is True when a beats b."""
    ok = [r for r in results if r["value"] is not None]
    key = (lambda r: r["value"]) if better(0, 1) else (lambda r: -r["value"])
    return sorted(ok, key=key)


def run_grid(points, evaluate, budget, **_):
    results = []
    for point in points:
        if budget.spent():
            break
        results.append(evaluate(point, 0))
    return results


def run_random(points, evaluate, budget, seed=0, count=None, **_):
    order = list(points)
    random.Random(seed).shuffle(order)
    return run_grid(order[:count] if count else order, evaluate, budget)


def run_halving(points, evaluate, budget, better, eta=3, seed=0, **_):
    """Returns every result: the last level reached (the survivors' longest measurements) and
    those eliminated earlier. Stops when a level would keep a single point (the confirmation
    run that follows pits it against the runner-up) or the budget ends, mid-level included."""
    survivors = list(points)
    random.Random(seed).shuffle(survivors)
    results = []
    for level in range(len(halving_plan(len(points), eta))):
        done = []
        for point in survivors:
            if budget.spent():
                break
            done.append(evaluate(point, level))
        results += done
        if len(done) < len(survivors):
            break
        survivors = [r["point"] for r in ranked(done, better)[:math.ceil(len(done) / eta)]]
    return results


def halving_plan(points, eta):
    """Points measured at each level of successive halving, e.g. 27 points, eta 3: [27, 9, 3]
    (a level that would keep one point is not run)."""
    plan = [points]
    while math.ceil(plan[-1] / eta) > 1:
        plan.append(math.ceil(plan[-1] / eta))
    return plan


STRATEGIES = {"grid": run_grid, "random": run_random, "halving": run_halving}
