"""Regression statistics for scripts/nightly: the Mann-Whitney U test (scipy) between this run's
repetitions and the history's, a minimum effect size on the medians, and binary segmentation over
the series of per-run medians to find the run where a step happened."""
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


def mann_whitney_u(x, y):
    """(U of x, two-sided p) for "x and y come from the same distribution". The normal
    approximation with the tie correction and a continuity correction: accurate enough from
    about 5 values per side, and conservative (too large a p) below that. All values tied: p = 1."""
    if len(x) == 0 or len(y) == 0:
        raise ValueError("mann_whitney_u needs values on both sides")
    result = stats.mannwhitneyu(x, y, alternative="two-sided", use_continuity=True, method="asymptotic")
    return float(result.statistic), float(result.pvalue)


@dataclass
class Comparison:
    baseline_median: float
    current_median: float
    change: float   # relative change of the median, (current - baseline) / baseline
    p_value: float
    verdict: str    # regression | improvement | unchanged


def compare(baseline, current, alpha, min_effect):
    """Times (larger is worse): a regression when the test rejects equality at alpha AND the
    median moved by at least min_effect; the same the other way is an improvement. The effect
    threshold keeps a consistent but tiny shift (noise from a neighbour, a warm cache) quiet."""
    base, now = float(np.median(baseline)), float(np.median(current))
    _, p = mann_whitney_u(current, baseline)
    change = (now - base) / base if base else 0.0
    verdict = "unchanged"
    if p < alpha and abs(change) >= min_effect:
        verdict = "regression" if change > 0 else "improvement"
    return Comparison(base, now, change, p, verdict)


def segment_cost(series):
    return float(((series - series.mean()) ** 2).sum())


def change_points(series, min_effect, min_size=2):
    """Indices i where the level of `series` (per-run medians, oldest first) steps between
    series[i - 1] and series[i], by binary segmentation: split where the squared error drops
    most, keep the split when the drop beats a BIC-style penalty (2 sigma^2 log n, sigma from
    the median absolute successive difference) and the two means differ by min_effect of the
    median; recurse on both halves. Written here because Debian packages no change-point
    library (ruptures is on PyPI only), and scipy has none."""
    series = np.asarray(series, float)
    if len(series) < 2 * min_size:
        return []
    sigma = np.median(np.abs(np.diff(series))) / (0.6745 * math.sqrt(2)) if len(series) > 2 else 0.0
    scale = float(np.median(series))
    sigma = max(sigma, 1e-3 * abs(scale), 1e-300)  # a noiseless series still needs a finite penalty
    penalty = 2 * sigma ** 2 * math.log(len(series))
    found = []

    def split(lo, hi):
        segment = series[lo:hi]
        if len(segment) < 2 * min_size:
            return
        whole = segment_cost(segment)
        best, best_gain = None, 0.0
        for k in range(min_size, len(segment) - min_size + 1):
            gain = whole - segment_cost(segment[:k]) - segment_cost(segment[k:])
            if gain > best_gain:
                best, best_gain = k, gain
        if best is None or best_gain <= penalty:
            return
        if abs(segment[best:].mean() - segment[:best].mean()) < min_effect * abs(scale):
            return
        found.append(lo + best)
        split(lo, lo + best)
        split(lo + best, hi)

    split(0, len(series))
    return sorted(found)
