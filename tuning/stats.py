"""Statistics for repeated measurements: the median, the mean and its confidence interval (Student's t),
and the loop that repeats a measurement until the interval is tight enough or time runs out."""
import math
import time

# Two-sided 95% Student's t quantiles by degrees of freedom; beyond 30 the normal 1.96 is close.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
        10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}


def t95(dof):
    """The 95% t quantile for dof degrees of freedom (the nearest tabulated one below)."""
    return _T95[max(d for d in _T95 if d <= dof)] if dof <= 30 else 1.96


def median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def mean_ci(values):
    """(mean, half-width of the 95% interval). One value has no spread to estimate: the
    half-width is infinite, so a single sample never counts as precise."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, math.inf
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, t95(n - 1) * sd / math.sqrt(n)


def repeat_until_tight(measure_once, metric, rel_ci, min_reps, max_reps, budget_s):
    """Calls measure_once() (-> dict of metrics) until the 95% interval of `metric` is within
    rel_ci of its mean, max_reps is reached, or budget_s has passed (after min_reps, whatever
    the time). Returns the list of samples."""
    samples = []
    start = time.monotonic()
    while True:
        samples.append(measure_once())
        n = len(samples)
        if n >= max_reps:
            break
        if n >= min_reps:
            mean, half = mean_ci([s[metric] for s in samples])
            if half <= rel_ci * abs(mean) or time.monotonic() - start >= budget_s:
                break
    return samples
