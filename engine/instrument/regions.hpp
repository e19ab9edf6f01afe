// Named regions: every op of the forward pass (and sampling) is a region, timed and charged its
// analytic FLOPs and bytes, plus hardware/software counters and likwid markers where attached.
//
//   { ScopedRegion region(Region::q_proj, matmul_cost(w, tokens)); matmul(...); }
//
// Off (the default), a ScopedRegion is one test of a global flag, predicted not taken, and nothing
// else. On, it reads steady_clock (a vDSO call, ~20 ns) at entry and exit and adds to its region's
// totals. Regions are entered on the main thread only, around kernels that are parallel inside
// (OpenMP): one region's wall time covers all threads' work; the counters sum over threads.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cpullm {

enum class Region {
  embedding, attn_norm, q_proj, k_proj, v_proj, rope, attention, o_proj,
  ffn_norm, ffn_gate, ffn_up, ffn_act, ffn_down, final_norm, lm_head, sampling,
  count
};
constexpr int kRegionCount = static_cast<int>(Region::count);
std::string_view region_name(Region region);  // "q_proj"

// What one entry of a region does, computed from shapes and formats (op_costs.hpp).
struct RegionCost {
  double flops = 0, bytes = 0;
};

// Counters a region reads at entry and exit; the most any counter set holds.
constexpr int kMaxRegionCounters = 8;

// One region's totals since the last reset.
struct RegionTotals {
  int64_t calls = 0;
  int64_t shared_calls = 0;  // calls fused with other regions' work, whose time was split (ScopedRegion)
  double seconds = 0;  // wall time inside the region
  double flops = 0;    // analytic, summed over calls
  double bytes = 0;    // analytic, summed over calls
  std::array<double, kMaxRegionCounters> counters{};  // deltas, in the order of the attached set's names
};

// Everything the regions hold, for reporting.
struct RegionProfile {
  std::array<RegionTotals, kRegionCount> regions;  // indexed by Region
  std::vector<std::string> counter_names;          // the attached counters' names; empty without
  const RegionTotals& operator[](Region region) const { return regions[static_cast<int>(region)]; }
};

// A source of counter values that regions read at entry and exit (PerfCounters in counters.hpp).
// read() writes names().size() values, each monotonic, summed over threads.
class RegionCounterSource {
 public:
  virtual ~RegionCounterSource() = default;
  virtual const std::vector<std::string>& names() const = 0;
  virtual void read(double* values) = 0;
};

namespace detail {
extern bool regions_on;  // the one flag an inactive ScopedRegion tests
}

// Turns region accounting on or off (off at start). Totals are kept until reset_regions().
void enable_regions(bool on);
inline bool regions_enabled() { return detail::regions_on; }
void reset_regions();
RegionProfile region_snapshot();
// Regions read `counters` (not owned; nullptr detaches) while enabled; at most
// kMaxRegionCounters names. Resets the totals, whose counter columns change meaning.
void attach_region_counters(RegionCounterSource* counters);

// A region and what it does: one member of a ScopedRegion.
struct RegionShare {
  Region region;
  RegionCost cost;
};
constexpr int kMaxFusedRegions = 4;

// Times one region, or several whose work runs as one fused kernel (decode's q, k and v
// projections are one matvec_group: one fork/join over all three). A fused call's wall time and
// counters are split among its members in proportion to their analytic bytes (what a
// memory-bound kernel's time follows), and each member counts it as a shared call.
class ScopedRegion {
 public:
  ScopedRegion(Region region, RegionCost cost) {
    if (detail::regions_on) [[unlikely]] {
      const RegionShare one{region, cost};
      begin({&one, 1});
    }
  }
  explicit ScopedRegion(std::span<const RegionShare> members) {  // 1..kMaxFusedRegions members
    if (detail::regions_on) [[unlikely]]
      begin(members);
  }
  ~ScopedRegion() {
    if (active_) [[unlikely]]
      end();
  }
  ScopedRegion(const ScopedRegion&) = delete;
  ScopedRegion& operator=(const ScopedRegion&) = delete;

 private:
  void begin(std::span<const RegionShare> members);
  void end();

  bool active_ = false;
  int member_count_ = 0;
  std::array<RegionShare, kMaxFusedRegions> members_;
  std::chrono::steady_clock::time_point start_;
  std::array<double, kMaxRegionCounters> counters_at_start_;  // filled only with counters attached
};

}  // namespace cpullm
