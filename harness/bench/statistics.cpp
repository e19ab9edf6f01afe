#include "harness/bench/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cpullm {

double mean(std::span<const double> samples) {
  if (samples.empty()) return 0;
  double sum = 0;
  for (double s : samples) sum += s;
  return sum / samples.size();
}

double stddev(std::span<const double> samples) {
  if (samples.size() < 2) return 0;
  const double m = mean(samples);
  double squares = 0;
  for (double s : samples) squares += (s - m) * (s - m);
  return std::sqrt(squares / (samples.size() - 1));
}

double percentile(std::span<const double> samples, double p) {
  if (samples.empty()) return 0;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const double rank = p / 100.0 * (sorted.size() - 1);  // 0-based, fractional
  const std::size_t below = static_cast<std::size_t>(std::floor(rank));
  const std::size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (rank - below) * (sorted[above] - sorted[below]);
}

Interval percentile_interval(std::span<const double> samples, double p) {
  const std::size_t n = samples.size();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (n == 0) return {nan, nan};
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  const double q = p / 100;
  if (q <= 0 || q >= 1) return {q <= 0 ? sorted.front() : sorted.back(), q <= 0 ? sorted.front() : sorted.back()};
  // cdf[k] = P(Binomial(n, q) <= k): the chance that at most k samples fall below the percentile
  // (each term in logarithms: no underflow at thousands of samples).
  std::vector<double> cdf(n + 1);
  double total = 0;
  const double dn = static_cast<double>(n);
  for (std::size_t k = 0; k <= n; ++k) {
    const double dk = static_cast<double>(k);
    total += std::exp(std::lgamma(dn + 1) - std::lgamma(dk + 1) - std::lgamma(dn - dk + 1) + dk * std::log(q) +
                      (dn - dk) * std::log1p(-q));
    cdf[k] = total;
  }
  // The percentile is below x(l) (1-based) when at most l - 1 samples are below it: cdf[l - 1] <= 2.5% for the low end.
  Interval interval{nan, nan};
  for (std::size_t l = n; l >= 1; --l)
    if (cdf[l - 1] <= 0.025) {
      interval.low = sorted[l - 1];
      break;
    }
  for (std::size_t u = 1; u <= n; ++u)
    if (cdf[u - 1] >= 0.975) {
      interval.high = sorted[u - 1];
      break;
    }
  return interval;
}

}  // namespace cpullm
