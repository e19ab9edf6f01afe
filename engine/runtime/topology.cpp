#include "engine/runtime/topology.hpp"

#include <hwloc.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <memory>

#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"

namespace cpullm {
namespace {

// Far above any machine's CPU count; bounds what a typo like "0-2000000000" can allocate.
constexpr int kMaxCpu = 65535;

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using HwlocTopology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

HwlocTopology new_hwloc_topology() {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) fail("hwloc: cannot initialise a topology");
  return HwlocTopology(t);
}

void load(const HwlocTopology& t, const std::string& what) {
  if (hwloc_topology_load(t.get()) != 0) fail("hwloc: cannot load the topology from {}", what);
}

hwloc_obj_t ancestor_of_type(hwloc_obj_t obj, hwloc_obj_type_t type) {
  for (hwloc_obj_t p = obj->parent; p; p = p->parent)
    if (p->type == type) return p;
  return nullptr;
}

std::vector<int> read_isolated_cpus() {
  std::ifstream in("/sys/devices/system/cpu/isolated");
  std::string line;
  if (!in || !std::getline(in, line) || line.find_first_not_of(" \t") == std::string::npos) return {};
  return parse_cpu_list(line);
}

// Copies what the plans need out of hwloc's tree, so nothing else includes hwloc.h.
Topology from_hwloc(const HwlocTopology& handle, std::string source) {
  hwloc_topology_t t = handle.get();
  Topology topology;
  topology.source = std::move(source);
  topology.is_this_system = hwloc_topology_is_thissystem(t) != 0;
  topology.package_count = std::max(1, hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));

  std::vector<hwloc_obj_t> node_objs;
  for (int i = 0; i < hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE); ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, i);
    hwloc_obj_t package = ancestor_of_type(node, HWLOC_OBJ_PACKAGE);
    const bool has_cpus = !hwloc_bitmap_iszero(node->cpuset);
    topology.nodes.push_back({static_cast<int>(node->os_index), node->attr->numanode.local_memory,
                              has_cpus ? (package ? static_cast<int>(package->logical_index) : 0) : -1});
    node_objs.push_back(node);
  }
  if (topology.nodes.empty()) fail("hwloc: {} has no NUMA node", topology.source);

  for (int i = 0; i < hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE); ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, i);
    Core c;
    hwloc_obj_t package = ancestor_of_type(core, HWLOC_OBJ_PACKAGE);
    c.package = package ? static_cast<int>(package->logical_index) : 0;
    const auto node = std::find_if(node_objs.begin(), node_objs.end(),
                                   [&](hwloc_obj_t n) { return hwloc_bitmap_isincluded(core->cpuset, n->cpuset); });
    if (node == node_objs.end()) fail("hwloc: {}: core L#{} is in no NUMA node", topology.source, i);
    c.node = static_cast<int>(node - node_objs.begin());
    unsigned pu = 0;
    hwloc_bitmap_foreach_begin(pu, core->cpuset) c.pus.push_back(static_cast<int>(pu));
    hwloc_bitmap_foreach_end();
    topology.cores.push_back(std::move(c));
  }
  if (topology.cores.empty()) fail("hwloc: {} has no cores", topology.source);

  const std::pair<hwloc_obj_type_t, const char*> levels[] = {
      {HWLOC_OBJ_L1CACHE, "L1d"}, {HWLOC_OBJ_L2CACHE, "L2"}, {HWLOC_OBJ_L3CACHE, "L3"}};
  for (const auto& [type, name] : levels) {
    const int count = hwloc_get_nbobjs_by_type(t, type);
    if (count == 0) continue;
    hwloc_obj_t cache = hwloc_get_obj_by_type(t, type, 0);
    topology.caches.push_back({name, cache->attr->cache.size, count,
                               hwloc_get_nbobjs_inside_cpuset_by_type(t, cache->cpuset, HWLOC_OBJ_CORE)});
  }
  if (topology.is_this_system) topology.isolated_cpus = read_isolated_cpus();
  return topology;
}

}  // namespace

Topology detect_topology() {
  HwlocTopology t = new_hwloc_topology();
  load(t, "this machine");
  return from_hwloc(t, "this machine (hwloc)");
}

namespace {

// hwloc builds every object a synthetic description names: "pack:64 numa:64 core:64 pu:64" is
// 16.7 million PUs, tens of seconds and most of a GiB. The largest machines have a few thousand
// PUs, and -t takes at most 4096 threads, so larger descriptions are refused before hwloc sees them.
constexpr uint64_t kMaxSyntheticPus = 4096;
// hwloc's XML of a large server is a few MB.
constexpr std::uintmax_t kMaxXmlBytes = 64 << 20;

// The PUs a description makes: the product of its levels' arities ("core:4", or a bare "4").
// Attributes in parentheses and memory levels in brackets add none; what is not an arity is left
// for hwloc to judge.
uint64_t synthetic_pus(const std::string& description) {
  std::string levels;  // the description without (...) and [...]
  int depth = 0;
  for (char ch : description) {
    if (ch == '(' || ch == '[') ++depth;
    else if ((ch == ')' || ch == ']') && depth > 0) --depth;
    else if (depth == 0) levels += ch;
  }
  uint64_t pus = 1;
  std::size_t start = 0;
  while ((start = levels.find_first_not_of(" \t\n", start)) != std::string::npos) {
    const std::size_t end = std::min(levels.find_first_of(" \t\n", start), levels.size());
    const std::string level = levels.substr(start, end - start);
    start = end;
    const std::size_t colon = level.find(':');
    const std::string arity = colon == std::string::npos ? level : level.substr(colon + 1);
    uint64_t count = 0;
    const auto [rest, error] = std::from_chars(arity.data(), arity.data() + arity.size(), count);
    if (error == std::errc::result_out_of_range) return UINT64_MAX;
    if (error != std::errc() || rest != arity.data() + arity.size() || count == 0) continue;
    pus = count > UINT64_MAX / pus ? UINT64_MAX : pus * count;
  }
  return pus;
}

}  // namespace

Topology synthetic_topology(const std::string& description) {
  const uint64_t pus = synthetic_pus(description);
  if (pus > kMaxSyntheticPus)
    fail("--synthetic \"{}\": {} PUs; at most {} are supported (the most threads cpullm runs)", description,
         pus == UINT64_MAX ? std::string("more than 2^64") : std::to_string(pus), kMaxSyntheticPus);
  HwlocTopology t = new_hwloc_topology();
  if (hwloc_topology_set_synthetic(t.get(), description.c_str()) != 0)
    fail("hwloc: invalid synthetic topology \"{}\" (see hwloc's Synthetic topologies documentation)", description);
  load(t, "a synthetic description");
  return from_hwloc(t, "hwloc synthetic \"" + description + "\"");
}

Topology xml_topology(const std::string& path) {
  // Read here, not by hwloc from the path: a FIFO would block hwloc's open() for ever.
  const std::string xml = read_input_file(path, "a hwloc XML topology", kMaxXmlBytes);
  HwlocTopology t = new_hwloc_topology();
  // The size counts the terminating NUL, which hwloc's own XML parser expects.
  if (hwloc_topology_set_xmlbuffer(t.get(), xml.c_str(), static_cast<int>(xml.size() + 1)) != 0 ||
      hwloc_topology_load(t.get()) != 0)
    fail_file(path, "not a readable hwloc XML topology");
  return from_hwloc(t, "hwloc XML " + path);
}

std::vector<int> all_pus(const Topology& topology) {
  std::vector<int> pus;
  for (const Core& core : topology.cores) pus.insert(pus.end(), core.pus.begin(), core.pus.end());
  std::sort(pus.begin(), pus.end());
  return pus;
}

std::vector<int> parse_cpu_list(std::string_view list) {
  const auto number = [&](std::string_view text) {
    int value = -1;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0 || value > kMaxCpu)
      fail("CPU list \"{}\": \"{}\" is not a CPU number (0-{})", list, text, kMaxCpu);
    return value;
  };
  while (!list.empty() && (list.back() == '\n' || list.back() == ' ')) list.remove_suffix(1);
  if (list.empty()) fail("empty CPU list");
  std::vector<int> cpus;
  std::string_view rest = list;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const std::size_t dash = item.find('-');
    const int first = number(item.substr(0, dash));
    const int last = dash == std::string_view::npos ? first : number(item.substr(dash + 1));
    if (last < first) fail("CPU list \"{}\": range {} runs backwards", list, item);
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace cpullm
