// Package and DRAM energy from RAPL through the powercap sysfs tree
// (/sys/class/powercap/intel-rapl:N = package N, intel-rapl:N:M named "dram" = its memory; AMD
// CPUs from Zen on appear under the same names). Each domain's energy_uj is a counter that wraps
// at max_energy_range_uj. Where there is no RAPL (virtual machines), the meter says why.
// CPULLM_POWERCAP_ROOT replaces /sys/class/powercap (tests point it at a fake tree).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpullm {

struct EnergyDomain {
  std::string name;          // "package-0", "dram"
  std::string counter_path;  // .../energy_uj
  uint64_t range_uj = 0;     // max_energy_range_uj: the counter wraps to 0 past it
};

// Joules between two reads, per kind of domain.
struct EnergyUse {
  double package_j = 0;  // all packages
  double dram_j = 0;     // all DRAM domains
  bool has_dram = false;
};

// $CPULLM_POWERCAP_ROOT where set and not empty, else /sys/class/powercap.
std::string default_powercap_root();

class EnergyMeter {
 public:
  explicit EnergyMeter(const std::string& powercap_root = default_powercap_root());
  bool available() const { return reason_.empty(); }
  // Empty when available; else "unavailable here: ..." naming the path and the cause.
  const std::string& reason() const { return reason_; }
  const std::vector<EnergyDomain>& domains() const { return domains_; }
  // Every domain's counter in microjoules (empty when unavailable).
  std::vector<uint64_t> read() const;
  // Energy between two reads; a counter smaller than before wrapped once.
  EnergyUse between(const std::vector<uint64_t>& before, const std::vector<uint64_t>& after) const;

 private:
  std::vector<EnergyDomain> domains_;
  std::string reason_;
};

}  // namespace cpullm
