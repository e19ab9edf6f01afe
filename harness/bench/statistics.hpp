// The few statistics a benchmark reports, with their edge cases written down.
#pragma once
#include <span>

namespace cpullm {

// Arithmetic mean; 0 for no samples.
double mean(std::span<const double> samples);

// Sample standard deviation (n - 1 in the denominator). One sample says nothing about spread:
// llama-bench reports 0 there, and so does this, so the two tools' outputs compare.
double stddev(std::span<const double> samples);

// The p-th percentile (0 <= p <= 100) by linear interpolation between the two nearest ranks
// (numpy's default), so p50 of {1, 2, 3, 4} is 2.5. 0 for no samples.
double percentile(std::span<const double> samples, double p);

// A distribution-free 95% interval for the p-th percentile: the order statistics x(l) and x(u)
// between which the percentile lies with probability >= 0.95 (the number of samples below it is
// Binomial(n, p / 100)), each end the one leaving at most 2.5% outside it. An end the samples
// cannot bound (too few of them for a tail percentile) is NaN.
struct Interval {
  double low, high;
};
Interval percentile_interval(std::span<const double> samples, double p);

}  // namespace cpullm
