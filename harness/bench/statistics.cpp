#include "harness/bench/statistics.hpp"

#include <algorithm>
#include <cmath>
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

}  // namespace cpullm
