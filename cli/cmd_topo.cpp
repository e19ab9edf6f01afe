// cpullm topo: the machine (or an emulated one) and the plan over it: which thread runs on which
// processor, which NUMA node holds which weights. It computes and prints; it binds nothing.
#include <fmt/ranges.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/data_dir.hpp"
#include "cli/run_options.hpp"
#include "engine/run/machine_settings.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/runtime/hardware_profile.hpp"
#include "engine/runtime/placement.hpp"
#include "engine/util/error.hpp"

namespace cpullm::cli {
namespace {

struct TopoOptions {
  std::string hardware;   // profile name or path
  std::string synthetic;  // hwloc synthetic description
  std::string xml;        // hwloc XML file
  RunConfig run;  // -t, --bind, --cpuset, --housekeeping: planned here, not applied
  std::string numa = "first-touch";
  std::string model;      // GGUF file sizing the placement
  std::string shape = "llama-7b";
  std::string dtype = "q8_0";
  bool json = false;
};

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", bytes / 1073741824.0); }

std::string size_text(uint64_t bytes) {
  return bytes >= (1u << 20) ? fmt::format("{} MiB", bytes >> 20) : fmt::format("{} KiB", bytes >> 10);
}

std::vector<int> node_cpus(const Topology& topology, int node) {
  std::vector<int> cpus;
  for (const Core& core : topology.cores)
    if (core.node == node) cpus.insert(cpus.end(), core.pus.begin(), core.pus.end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

nlohmann::json figure_json(const Figure& f) {
  const nlohmann::json value = !f.value ? nlohmann::json(nullptr) : f.high ? nlohmann::json{*f.value, *f.high} : nlohmann::json(*f.value);
  return {{"value", value}, {"source", f.source}};
}

// Everything `topo` prints, computed once for both outputs.
struct Report {
  Topology topology;                       // the machine, detected or emulated
  std::optional<HardwareProfile> profile;  // with --hardware
  ThreadRequest request;                   // the flags, parsed
  ThreadPlan threads;                      // the request, planned (and possibly reduced)
  NumaStrategy requested_strategy;         // --numa
  PlacementPlan placement;                 // the strategy, planned (and possibly reduced)
  std::string weights;                     // what the placement was sized from: a file or a shape
};

void print_json(const Report& r) {
  using nlohmann::json;
  const Topology& t = r.topology;
  json out;
  out["topology"] = {{"source", t.source}, {"emulated", !t.is_this_system}, {"packages", t.package_count},
                     {"isolated_cpus", t.isolated_cpus}};
  for (std::size_t n = 0; n < t.nodes.size(); ++n)
    out["topology"]["nodes"].push_back({{"os_index", t.nodes[n].os_index}, {"package", t.nodes[n].package},
                                        {"memory_bytes", t.nodes[n].memory_bytes},
                                        {"cpus", node_cpus(t, static_cast<int>(n))}});
  for (const Core& c : t.cores) out["topology"]["cores"].push_back({{"package", c.package}, {"node", c.node}, {"pus", c.pus}});
  out["topology"]["caches"] = json::array();
  for (const CacheLevel& c : t.caches)
    out["topology"]["caches"].push_back(
        {{"name", c.name}, {"size_bytes", c.size_bytes}, {"count", c.count}, {"cores_sharing", c.cores_sharing}});
  if (r.profile) {
    const HardwareProfile& p = *r.profile;
    out["profile"] = {{"name", p.name}, {"path", p.path}, {"description", p.description},
                      {"topology", {{"value", p.topology.value}, {"source", p.topology.source}}},
                      {"isa", {{"value", p.isa.value}, {"source", p.isa.source}}},
                      {"isa_detail", {{"value", p.isa_detail.value}, {"source", p.isa_detail.source}}}};
    for (const auto& [field, figure] : profile_figures(p)) out["profile"][field] = figure_json(*figure);
  } else {
    out["profile"] = nullptr;
  }
  out["threads"] = {{"requested_policy", bind_policy_name(r.request.policy)},
                    {"policy", bind_policy_name(r.threads.policy)},
                    {"count", r.threads.threads.size()},
                    {"cpuset", r.request.cpuset},
                    {"housekeeping", r.request.housekeeping},
                    {"usable_cpus", r.threads.usable_pus},
                    {"per_node", threads_per_node(t, r.threads)}};
  for (std::size_t i = 0; i < r.threads.threads.size(); ++i) {
    const ThreadSlot& s = r.threads.threads[i];
    out["threads"]["slots"].push_back({{"thread", i}, {"cpu", s.pu}, {"core", s.core}, {"node", s.node}});
  }
  out["placement"] = {{"requested_strategy", numa_strategy_name(r.requested_strategy)},
                      {"strategy", numa_strategy_name(r.placement.strategy)},
                      {"weights", r.weights},
                      {"weight_bytes", r.placement.weight_bytes},
                      {"bytes_per_node", r.placement.bytes_per_node},
                      {"unplaced_bytes", r.placement.unplaced_bytes},
                      {"shards", json::array()}};
  for (const TensorShard& s : r.placement.shards) {
    json ranges = json::array();
    for (const RowRange& range : s.ranges) ranges.push_back({{"node", range.node}, {"begin", range.begin}, {"end", range.end}});
    out["placement"]["shards"].push_back({{"name", s.name}, {"ranges", ranges}});
  }
  out["notes"] = r.threads.notes;
  for (const std::string& note : r.placement.notes) out["notes"].push_back(note);
  std::printf("%s\n", out.dump(2).c_str());
}

void print_text(const Report& r) {
  const Topology& t = r.topology;
  std::printf("topology: %s\n", t.source.c_str());
  std::printf(t.is_this_system ? "this machine: the plan below fits it (topo itself binds nothing)\n"
                               : "emulated: not this machine; the plan below is computed and printed, never applied\n");
  std::size_t pus = 0;
  for (const Core& c : t.cores) pus += c.pus.size();
  std::printf("packages: %d, NUMA nodes: %zu, cores: %zu, PUs: %zu\n", t.package_count, t.nodes.size(), t.cores.size(), pus);
  for (std::size_t n = 0; n < t.nodes.size(); ++n)
    std::printf("  node %zu (P#%d): package %d, %s, CPUs %s\n", n, t.nodes[n].os_index, t.nodes[n].package,
                gib(t.nodes[n].memory_bytes).c_str(), format_cpu_list(node_cpus(t, static_cast<int>(n))).c_str());
  std::printf("caches:");
  for (std::size_t i = 0; i < t.caches.size(); ++i) {
    const CacheLevel& c = t.caches[i];
    std::printf("%s %s %s x %d (%d core%s each)", i ? "," : "", c.name.c_str(), size_text(c.size_bytes).c_str(),
                c.count, c.cores_sharing, c.cores_sharing == 1 ? "" : "s");
  }
  std::printf("\nisolated CPUs: %s\n",
              !t.is_this_system ? "not applicable (emulated)"
              : t.isolated_cpus.empty() ? "none (/sys/devices/system/cpu/isolated is empty)"
                                        : format_cpu_list(t.isolated_cpus).c_str());
  if (r.profile) {
    const HardwareProfile& p = *r.profile;
    std::printf("\nprofile %s: %s\n", p.name.c_str(), p.description.c_str());
    const std::string isa = p.isa.value == "detect" ? "detect: " + std::string(isa_name(best_isa())) : p.isa.value;
    std::printf("  %-34s %-12s %s\n", "isa", isa.c_str(), p.isa.source.c_str());
    std::printf("  %-34s %s\n", "isa_detail", p.isa_detail.value.c_str());
    for (const auto& [field, figure] : profile_figures(p))
      std::printf("  %-34s %-12s %s\n", field, figure_text(*figure).c_str(), figure->source.c_str());
  }

  std::printf("\nthreads: %zu, bind %s", r.threads.threads.size(), std::string(bind_policy_name(r.threads.policy)).c_str());
  if (r.threads.policy != r.request.policy)
    std::printf(" (asked: %s)", std::string(bind_policy_name(r.request.policy)).c_str());
  std::printf(", usable CPUs %s\n", format_cpu_list([&] {
                auto cpus = r.threads.usable_pus;
                std::sort(cpus.begin(), cpus.end());
                return cpus;
              }()).c_str());
  if (r.threads.policy != BindPolicy::none)
    for (std::size_t i = 0; i < r.threads.threads.size(); ++i) {
      const ThreadSlot& s = r.threads.threads[i];
      std::printf("  thread %3zu -> CPU %3d (node %d, package %d)\n", i, s.pu, s.node,
                  t.cores[static_cast<std::size_t>(s.core)].package);
    }

  const PlacementPlan& p = r.placement;
  std::printf("\nplacement: %s", std::string(numa_strategy_name(p.strategy)).c_str());
  if (p.strategy != r.requested_strategy) std::printf(" (asked: %s)", std::string(numa_strategy_name(r.requested_strategy)).c_str());
  std::printf(", weights %s: %s\n", r.weights.c_str(), gib(p.weight_bytes).c_str());
  const std::vector<int> per_node = threads_per_node(t, r.threads);
  for (std::size_t n = 0; n < t.nodes.size(); ++n)
    std::printf("  node %zu: %s%s (%lu bytes)\n", n,
                r.threads.policy == BindPolicy::none ? "" : fmt::format("{:3} threads, ", per_node[n]).c_str(),
                gib(p.bytes_per_node[n]).c_str(), p.bytes_per_node[n]);
  if (p.unplaced_bytes) std::printf("  not predictable: %s\n", gib(p.unplaced_bytes).c_str());
  // Tensors with the same row count split identically: one line per row count.
  std::map<int64_t, std::pair<const TensorShard*, int>> by_rows;
  for (const TensorShard& s : p.shards) {
    auto& [first, count] = by_rows[s.ranges.back().end];
    if (!first) first = &s;
    ++count;
  }
  for (const auto& [rows, entry] : by_rows) {
    std::printf("  %d tensor(s) of %ld rows, e.g. %s:", entry.second, rows, entry.first->name.c_str());
    for (const RowRange& range : entry.first->ranges)
      std::printf(" node %d [%ld, %ld)", range.node, range.begin, range.end);
    std::printf("\n");
  }

  std::vector<std::string> notes = r.threads.notes;
  notes.insert(notes.end(), p.notes.begin(), p.notes.end());
  if (!notes.empty()) std::printf("\nnotes:\n");
  for (const std::string& note : notes) std::printf("  - %s\n", note.c_str());
}

void run_topo(const TopoOptions& o) {
  Report r;
  if (!o.hardware.empty()) {
    r.profile = read_hardware_profile(find_hardware_profile(o.hardware, profile_dirs()));
    r.topology = profile_topology(*r.profile);
  } else if (!o.synthetic.empty()) {
    r.topology = synthetic_topology(o.synthetic);
  } else if (!o.xml.empty()) {
    r.topology = xml_topology(o.xml);
  } else {
    r.topology = detect_topology();
  }

  r.request = thread_request(o.run);
  r.threads = plan_threads(r.topology, r.request);

  std::vector<TensorSize> tensors;
  if (!o.model.empty()) {
    tensors = gguf_tensor_sizes(o.model);
    r.weights = o.model;
  } else {
    const std::optional<SyntheticShape> shape = named_shape(o.shape);
    if (!shape) fail("unknown --shape '{}' ({})", o.shape, fmt::join(shape_names(), ", "));
    tensors = shape_tensor_sizes(*shape, weight_format_named(o.dtype, "topo: unknown --dtype").type);
    r.weights = fmt::format("{} shape at {} (no -m)", o.shape, o.dtype);
  }
  r.requested_strategy = parse_numa_strategy(o.numa);
  r.placement = plan_placement(r.topology, r.threads, r.requested_strategy, tensors);
  o.json ? print_json(r) : print_text(r);
}

}  // namespace

void register_topo(CLI::App& app) {
  auto options = std::make_shared<TopoOptions>();
  CLI::App* command = app.add_subcommand("topo", "Show the machine's topology and the thread and NUMA placement plan");
  CLI::Option* hardware = command->add_option("--hardware", options->hardware,
                                              "Hardware profile: a name in tuning/profiles (e.g. e5-4627v4, host) or a .json path");
  CLI::Option* synthetic = command->add_option("--synthetic", options->synthetic, "An hwloc synthetic topology instead of this machine");
  CLI::Option* xml = command->add_option("--xml", options->xml, "An hwloc XML topology (lstopo --of xml) instead of this machine")
                         ->check(CLI::ExistingFile);
  hardware->excludes(synthetic)->excludes(xml);
  synthetic->excludes(xml);
  add_run_options(*command, options->run, {RunFlag::threads, RunFlag::bind, RunFlag::cpuset, RunFlag::housekeeping});
  command->add_option("--numa", options->numa, "Weight placement: first-touch, interleave, replicate, shard")
      ->check(CLI::IsMember({"first-touch", "interleave", "replicate", "shard"}));
  command->add_option("-m,--model", options->model, "GGUF file to size the placement from")->check(CLI::ExistingFile);
  command->add_option("--shape", options->shape,
                      fmt::format("Without -m: size the placement for this named shape ({})", fmt::join(shape_names(), ", ")));
  std::vector<std::string> formats;
  for (const WeightFormat& f : weight_formats()) formats.emplace_back(f.name);
  command->add_option("--dtype", options->dtype, "Without -m: the shape's matrix type (" + weight_format_names() + ")")
      ->check(CLI::IsMember(formats));
  command->add_flag("--json", options->json, "Print JSON instead of text");
  command->callback([options] { run_topo(*options); });
}

}  // namespace cpullm::cli
