#include "engine/instrument/regions.hpp"

#include <algorithm>

#include "engine/instrument/likwid_markers.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace detail {
bool regions_on = false;
}

namespace {

constexpr std::array<std::string_view, kRegionCount> kRegionNames = {
    "embedding", "attn_norm", "q_proj", "k_proj",   "v_proj",     "rope",    "attention", "o_proj",
    "ffn_norm",  "ffn_gate",  "ffn_up", "ffn_act",  "ffn_down",   "final_norm", "lm_head", "sampling"};

struct RegionState {
  std::array<RegionTotals, kRegionCount> totals;
  RegionCounterSource* counters = nullptr;
};
RegionState state;

}  // namespace

std::string_view region_name(Region region) { return kRegionNames.at(static_cast<int>(region)); }

void enable_regions(bool on) { detail::regions_on = on; }

void reset_regions() { state.totals = {}; }

RegionProfile region_snapshot() {
  RegionProfile profile;
  profile.regions = state.totals;
  if (state.counters) profile.counter_names = state.counters->names();
  return profile;
}

void attach_region_counters(RegionCounterSource* counters) {
  if (counters && counters->names().size() > kMaxRegionCounters)
    fail("{} counters attached to the regions; at most {}", counters->names().size(), kMaxRegionCounters);
  state.counters = counters;
  reset_regions();
}

void ScopedRegion::begin(std::span<const RegionShare> members) {
  if (members.size() < 1 || members.size() > kMaxFusedRegions)
    fail("a region scope holds 1 to {} regions, not {}", kMaxFusedRegions, members.size());
  active_ = true;
  member_count_ = static_cast<int>(members.size());
  std::copy(members.begin(), members.end(), members_.begin());
  // likwid: each member's region covers the whole fused call (likwid cannot split counts).
  if (likwid_markers_active())
    for (int m = 0; m < member_count_; ++m) likwid_region_start(kRegionNames[static_cast<int>(members_[m].region)].data());
  if (state.counters) state.counters->read(counters_at_start_.data());
  start_ = std::chrono::steady_clock::now();  // last, so the reads above are not charged
}

void ScopedRegion::end() {
  const auto stop = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(stop - start_).count();
  std::array<double, kMaxRegionCounters> counter_deltas{};
  if (state.counters) {
    state.counters->read(counter_deltas.data());
    for (std::size_t i = 0; i < state.counters->names().size(); ++i) counter_deltas[i] -= counters_at_start_[i];
  }
  double total_bytes = 0;
  for (int m = 0; m < member_count_; ++m) total_bytes += members_[m].cost.bytes;
  for (int m = 0; m < member_count_; ++m) {
    const RegionShare& member = members_[m];
    if (likwid_markers_active()) likwid_region_stop(kRegionNames[static_cast<int>(member.region)].data());
    const double share = total_bytes > 0 ? member.cost.bytes / total_bytes : 1.0 / member_count_;
    RegionTotals& totals = state.totals[static_cast<int>(member.region)];
    totals.calls += 1;
    totals.shared_calls += member_count_ > 1;
    totals.seconds += seconds * share;
    totals.flops += member.cost.flops;
    totals.bytes += member.cost.bytes;
    for (int i = 0; i < kMaxRegionCounters; ++i) totals.counters[i] += counter_deltas[i] * share;
  }
}

}  // namespace cpullm
