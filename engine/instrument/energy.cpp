#include "engine/instrument/energy.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace cpullm {
namespace {

namespace fs = std::filesystem;

bool read_line(const fs::path& path, std::string& line) {
  std::ifstream file(path);
  return static_cast<bool>(std::getline(file, line));
}

bool read_number(const fs::path& path, uint64_t& value) {
  std::ifstream file(path);
  return static_cast<bool>(file >> value);
}

}  // namespace

std::string default_powercap_root() {
  const char* root = std::getenv("CPULLM_POWERCAP_ROOT");
  return root && *root ? root : "/sys/class/powercap";
}

EnergyMeter::EnergyMeter(const std::string& powercap_root) {
  const fs::path root = powercap_root;
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    reason_ = fmt::format("unavailable here: {} does not exist (no RAPL powercap driver; virtual machines do not "
                          "expose RAPL)",
                          root.string());
    return;
  }
  std::vector<fs::path> zones;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, error))
    if (entry.path().filename().string().starts_with("intel-rapl:")) zones.push_back(entry.path());
  std::sort(zones.begin(), zones.end());
  for (const fs::path& zone : zones) {
    std::string name;
    if (!read_line(zone / "name", name) || !(name.starts_with("package") || name == "dram")) continue;
    EnergyDomain domain{name, (zone / "energy_uj").string(), 0};
    uint64_t probe = 0;
    if (!read_number(domain.counter_path, probe)) {
      reason_ = access(domain.counter_path.c_str(), R_OK) != 0
                    ? fmt::format("unavailable here: {} is not readable: only root may read RAPL counters since Linux "
                                  "5.10 (CVE-2020-8694); run as root or make it readable",
                                  domain.counter_path)
                    : fmt::format("unavailable here: {} holds no number", domain.counter_path);
      domains_.clear();
      return;
    }
    if (!read_number(zone / "max_energy_range_uj", domain.range_uj)) domain.range_uj = 0;
    domains_.push_back(domain);
  }
  if (domains_.empty())
    reason_ = fmt::format("unavailable here: {} has no intel-rapl package or dram zone", root.string());
}

std::vector<uint64_t> EnergyMeter::read() const {
  std::vector<uint64_t> values(domains_.size(), 0);
  for (std::size_t i = 0; i < domains_.size(); ++i) read_number(domains_[i].counter_path, values[i]);
  return values;
}

EnergyUse EnergyMeter::between(const std::vector<uint64_t>& before, const std::vector<uint64_t>& after) const {
  EnergyUse use;
  for (std::size_t i = 0; i < domains_.size() && i < before.size() && i < after.size(); ++i) {
    const uint64_t delta = after[i] >= before[i] ? after[i] - before[i] : domains_[i].range_uj - before[i] + after[i];
    const double joules = static_cast<double>(delta) * 1e-6;
    if (domains_[i].name == "dram") {
      use.dram_j += joules;
      use.has_dram = true;
    } else {
      use.package_j += joules;
    }
  }
  return use;
}

}  // namespace cpullm
