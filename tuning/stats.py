"""Statistics for repeated measurements: the median, the mean and its confidence interval (Student's t),
and the loop that repeats a measurement until the interval is tight enough or time runs out."""
import math
import statistics
import time
from statistics import median  # noqa: F401 (stats.median for the callers)

from scipy import stats as scipy_stats


def t95(dof):
    """The two-sided 95% Student's t quantile for dof degrees of freedom."""
    return float(scipy_stats.t.ppf(0.975, dof))


def mean_ci(values):
    """(mean, half-width of the 95% interval). One value has no spread to estimate: the
    half-width is infinite, so a single sample never counts as precise."""
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return mean, math.inf
    return mean, t95(n - 1) * statistics.stdev(values) / math.sqrt(n)


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
