// cpullm profile: one prefill and one decode run with the regions on, then a table per phase:
// each region's calls, time and share, GFLOP/s, GB/s and arithmetic intensity from the analytic
// costs, how close it came to this machine's roof, and the counters the kernel offers (or why
// none). --overhead instead times the same runs with the regions off, on, and on with counters.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/data_dir.hpp"
#include "cli/run_options.hpp"
#include "engine/instrument/counters.hpp"
#include "engine/instrument/energy.hpp"
#include "engine/instrument/likwid_markers.hpp"
#include "engine/instrument/op_costs.hpp"
#include "engine/instrument/regions.hpp"
#include "engine/instrument/roofs.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/run/session.hpp"
#include "engine/runtime/hardware_profile.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/util/error.hpp"
#include "engine/util/mapped_file.hpp"
#include "engine/util/text.hpp"

namespace cpullm::cli {
namespace {

struct ProfileOptions {
  RunConfig run;              // --np: sequences run together, each step one token of each
  int prompt_tokens = 64;
  int generated_tokens = 32;
  std::string hardware;       // a profile name or path: roofs from it instead of measured
  bool counters = true;       // perf_event counters per region
  bool overhead = false;      // time regions off / on / on with counters instead of the table
  int repetitions = 3;        // --overhead: runs of each mode
  bool json = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// One phase of the measured run: its regions and what it took.
struct Phase {
  std::string name;     // "prefill", "decode"
  int64_t tokens = 0;   // tokens run
  double seconds = 0;   // wall time of the whole phase
  RegionProfile regions;
  std::optional<EnergyUse> energy;  // nullopt without RAPL
};

// The roofs this run is compared with: from a hardware profile where it has the figures, else
// measured now. `isa` is the kernels' level: the compute roof at their vector width.
HardwareProfile load_profile(const std::string& hardware) {
  return read_hardware_profile(find_hardware_profile(hardware, profile_dirs()));
}

Roofs find_roofs(const std::string& hardware, Isa isa) {
  Roofs roofs;
  if (!hardware.empty()) {
    const HardwareProfile profile = load_profile(hardware);
    const Topology topology = profile_topology(profile);
    const Figure& bandwidth = profile.memory_bandwidth_measured_gbs.value ? profile.memory_bandwidth_measured_gbs
                                                                          : profile.memory_bandwidth_gbs;
    if (bandwidth.value) {
      roofs.bytes_per_s = bandwidth.upper() * 1e9 * topology.package_count;
      roofs.memory_source = fmt::format("profile {}: {} GB/s per package x {} ({})", profile.name, bandwidth.upper(),
                                        topology.package_count, bandwidth.source);
    } else {
      roofs.memory_source = fmt::format("profile {} has no memory bandwidth ({}), so ", profile.name, bandwidth.source);
    }
    // The sustained all-core clock of the profile's vector width (its kernels'), not the base
    // clock: a roof is a bound, so a range's high end.
    const bool avx512 = profile.isa.value == "avx512";
    const Figure& clock = avx512 ? profile.avx512_clock_ghz : profile.avx2_clock_ghz;
    const Figure& per_cycle = profile.fp32_flops_per_cycle;
    if (clock.value && per_cycle.value) {
      roofs.flops_per_s = topology.cores.size() * clock.upper() * 1e9 * per_cycle.upper();
      roofs.compute_source = fmt::format("profile {}: {} cores x {} GHz (all-core {} clock, {}) x {} FLOP/cycle", profile.name,
                                         topology.cores.size(), clock.upper(), avx512 ? "AVX-512" : "AVX2",
                                         figure_text(clock), per_cycle.upper());
    } else {
      roofs.compute_source = fmt::format("profile {} has no all-core {} clock or FLOP/cycle, so ", profile.name,
                                         avx512 ? "AVX-512" : "AVX2");
    }
  }
  const int threads = omp_get_max_threads();
  if (roofs.bytes_per_s == 0) {
    roofs.bytes_per_s = measure_read_bandwidth();
    roofs.memory_source += fmt::format("measured: read of 256 MiB, {} threads, best of 5", threads);
  }
  if (roofs.flops_per_s == 0) {
    roofs.flops_per_s = measure_fma_peak(isa);
    roofs.compute_source += fmt::format("measured: {} FMA chains, {} threads, best of 3", isa_name(isa), threads);
  }
  return roofs;
}

// A prompt of `count` token ids spread over the vocabulary (the text does not matter to the
// time), starting with the BOS id 1 as a real prompt would.
std::vector<int32_t> synthetic_prompt(int count, int64_t vocab) {
  std::vector<int32_t> tokens(count);
  for (int i = 0; i < count; ++i) tokens[i] = static_cast<int32_t>(i == 0 ? 1 % vocab : (7919 * i) % vocab);
  return tokens;
}

// Prefill of the prompt in `sequences` copies (one batch), then `generated` greedy decode steps
// of one token per sequence (sampling is a region), each phase timed as a whole and, where
// regions are on, region by region.
std::vector<Phase> run_phases(Session& session, const std::vector<int32_t>& prompt, int generated,
                              const EnergyMeter& energy) {
  const int sequences = session.config().sequences;
  std::vector<Phase> phases;
  auto measure = [&](const char* name, int64_t tokens, auto&& work) {
    reset_regions();
    const std::vector<uint64_t> energy_before = energy.read();
    const auto start = Clock::now();
    work();
    Phase phase{name, tokens, seconds_since(start), region_snapshot(), std::nullopt};
    if (energy.available()) phase.energy = energy.between(energy_before, energy.read());
    phases.push_back(std::move(phase));
  };
  measure("prefill", static_cast<int64_t>(prompt.size()) * sequences,
          [&] { session.prefill(prompt_copies(prompt, sequences)); });
  DecodeLoop loop;
  loop.steps = generated;
  loop.first_position = static_cast<int64_t>(prompt.size());
  loop.choose = [](int64_t, int32_t, std::span<const float> logits) {
    ScopedRegion region(Region::sampling, sampling_cost(static_cast<int64_t>(logits.size()), true));
    return argmax(logits);
  };
  measure("decode", static_cast<int64_t>(generated) * sequences, [&] { session.decode(loop); });
  return phases;
}

// A region that ran in a phase, with its figures against the roofs: one list for both outputs.
struct RegionRow {
  Region region;
  const RegionTotals* totals;
  RoofUse use;
};
std::vector<RegionRow> region_rows(const Phase& phase, const Roofs& roofs) {
  std::vector<RegionRow> rows;
  for (int r = 0; r < kRegionCount; ++r) {
    const RegionTotals& t = phase.regions.regions[r];
    if (t.calls > 0) rows.push_back({static_cast<Region>(r), &t, roof_use(roofs, t.flops, t.bytes, t.seconds)});
  }
  return rows;
}
// The phase's time outside every region: residual adds, loop bookkeeping, the clock reads.
double outside_seconds(const Phase& phase) {
  double inside = 0;
  for (const RegionTotals& t : phase.regions.regions) inside += t.seconds;
  return phase.seconds - inside;
}

// 1234567 -> "1.23M": counters span nine orders of magnitude.
std::string compact(double value) {
  const char* units[] = {"", "k", "M", "G", "T"};
  int unit = 0;
  while (std::abs(value) >= 1000 && unit < 4) value /= 1000, ++unit;
  return fmt::format("{:.3g}{}", value, units[unit]);
}

void print_phase(const Phase& phase, const Roofs& roofs) {
  std::printf("\n%s: %ld tokens in %.1f ms (%.1f tokens/s)", phase.name.c_str(), static_cast<long>(phase.tokens),
              phase.seconds * 1e3, phase.tokens / phase.seconds);
  if (phase.energy)
    std::printf(", package %.2f J%s, %.3f J/token", phase.energy->package_j,
                phase.energy->has_dram ? fmt::format(", DRAM {:.2f} J", phase.energy->dram_j).c_str() : "",
                (phase.energy->package_j + phase.energy->dram_j) / phase.tokens);
  std::printf("\n%-11s %6s %10s %6s %9s %8s %7s %6s %-7s", "region", "calls", "time ms", "share", "GFLOP/s", "GB/s",
              "FLOP/B", "roof%", "bound");
  for (const std::string& name : phase.regions.counter_names) std::printf(" %12s", name.c_str());
  std::printf("\n");
  for (const RegionRow& row : region_rows(phase, roofs)) {
    const RegionTotals& t = *row.totals;
    std::printf("%-11s %6ld%c %9.3f %5.1f%% %9.2f %8.2f %7.2f %5.1f%% %-7s",
                std::string(region_name(row.region)).c_str(), static_cast<long>(t.calls), t.shared_calls ? '*' : ' ',
                t.seconds * 1e3,
                100 * t.seconds / phase.seconds, t.flops / t.seconds * 1e-9, t.bytes / t.seconds * 1e-9,
                t.bytes > 0 ? t.flops / t.bytes : 0.0, 100 * row.use.fraction,
                row.use.memory_bound ? "memory" : "compute");
    for (std::size_t c = 0; c < phase.regions.counter_names.size(); ++c)
      std::printf(" %12s", compact(t.counters[c]).c_str());
    std::printf("\n");
  }
  const double outside = outside_seconds(phase);
  std::printf("%-11s %6s %10.3f %5.1f%%\n", "(outside)", "", outside * 1e3, 100 * outside / phase.seconds);
  for (const RegionRow& row : region_rows(phase, roofs))
    if (row.totals->shared_calls) {
      std::printf("* fused with other regions in one kernel call (decode's q/k/v and gate/up matvec_group): the "
                  "call's time and counters split by analytic bytes\n");
      break;
    }
}

nlohmann::json phase_json(const Phase& phase, const Roofs& roofs) {
  nlohmann::json regions = nlohmann::json::array();
  for (const RegionRow& row : region_rows(phase, roofs)) {
    const RegionTotals& t = *row.totals;
    nlohmann::json counters = nlohmann::json::object();
    for (std::size_t c = 0; c < phase.regions.counter_names.size(); ++c)
      counters[phase.regions.counter_names[c]] = t.counters[c];
    regions.push_back({{"name", region_name(row.region)},
                       {"calls", t.calls},
                       {"shared_calls", t.shared_calls},
                       {"seconds", t.seconds},
                       {"flops", t.flops},
                       {"bytes", t.bytes},
                       {"gflops", t.flops / t.seconds * 1e-9},
                       {"gbs", t.bytes / t.seconds * 1e-9},
                       {"intensity", t.bytes > 0 ? t.flops / t.bytes : 0.0},
                       {"roof_fraction", row.use.fraction},
                       {"bound", row.use.memory_bound ? "memory" : "compute"},
                       {"counters", counters}});
  }
  nlohmann::json energy = nullptr;
  if (phase.energy)
    energy = {{"package_j", phase.energy->package_j},
              {"dram_j", phase.energy->has_dram ? nlohmann::json(phase.energy->dram_j) : nlohmann::json(nullptr)},
              {"j_per_token", (phase.energy->package_j + phase.energy->dram_j) / phase.tokens}};
  return {{"name", phase.name},     {"tokens", phase.tokens},
          {"seconds", phase.seconds}, {"tokens_per_s", phase.tokens / phase.seconds},
          {"outside_seconds", outside_seconds(phase)}, {"energy", energy},
          {"regions", regions}};
}

// Tokens/s of each phase with the regions off, on, and on with counters, in interleaved rounds
// (off, on, counters, off, ...) so that drift on this shared machine hits every mode alike; the
// median of each.
void run_overhead(const ProfileOptions& o, Session& session, const std::vector<int32_t>& prompt, PerfCounters* counters,
                  const EnergyMeter& energy) {
  const char* modes[] = {"off", "regions", "regions+counters"};
  const int n_modes = counters ? 3 : 2;
  std::vector<std::vector<double>> rates(n_modes * 2);  // (mode, phase) tokens/s per repetition
  for (int rep = 0; rep < o.repetitions; ++rep)
    for (int mode = 0; mode < n_modes; ++mode) {
      enable_regions(mode > 0);
      attach_region_counters(mode == 2 ? counters : nullptr);
      const std::vector<Phase> phases = run_phases(session, prompt, o.generated_tokens, energy);
      for (int p = 0; p < 2; ++p) rates[mode * 2 + p].push_back(phases[p].tokens / phases[p].seconds);
    }
  enable_regions(false);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  nlohmann::json json = nlohmann::json::array();
  if (!o.json) std::printf("%-17s %16s %16s   (median of %d interleaved runs)\n", "instrumentation", "prefill tok/s",
                           "decode tok/s", o.repetitions);
  for (int mode = 0; mode < n_modes; ++mode) {
    const double prefill = median(rates[mode * 2]), decode = median(rates[mode * 2 + 1]);
    const double prefill_off = median(rates[0]), decode_off = median(rates[1]);
    json.push_back({{"mode", modes[mode]}, {"prefill_tokens_per_s", prefill}, {"decode_tokens_per_s", decode},
                    {"prefill_ratio", prefill / prefill_off}, {"decode_ratio", decode / decode_off},
                    {"prefill_samples", rates[mode * 2]}, {"decode_samples", rates[mode * 2 + 1]}});
    if (!o.json)
      std::printf("%-17s %9.1f (%5.3f) %9.2f (%5.3f)\n", modes[mode], prefill, prefill / prefill_off, decode,
                  decode / decode_off);
  }
  if (o.json) std::printf("%s\n", nlohmann::json{{"overhead", json}, {"repetitions", o.repetitions}}.dump(2).c_str());
}

void run_profile(ProfileOptions o) {
  // Under --hardware the GEMM blocks for the profile's caches, as on that box.
  if (!o.hardware.empty()) o.run.cache_topology = profile_topology(load_profile(o.hardware));
  Session session(o.run);
  std::fprintf(stderr, "cpullm: run: %s\n", session.describe().c_str());
  for (const std::string& note : session.report().notes) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());
  const std::string& blocking = session.report().cache_blocking;
  const Model& model = session.model();
  // Counters are opened on each OpenMP thread: the session has fixed the team the kernels use.
  std::unique_ptr<PerfCounters> counters;
  if (o.counters) counters = std::make_unique<PerfCounters>();
  const std::string likwid = start_likwid_markers();
  const EnergyMeter energy;

  if (o.prompt_tokens + o.generated_tokens > model.context())
    fail("-p {} plus -n {} exceeds the context of {} positions; raise -c or lower -p/-n", o.prompt_tokens,
         o.generated_tokens, model.context());
  const std::vector<int32_t> prompt = synthetic_prompt(o.prompt_tokens, model.config().vocab_size);

  // Warm-up: the weights paged in and the threads started, so that the measured runs see neither.
  run_phases(session, prompt, std::min(o.generated_tokens, 2), energy);
  if (o.overhead) return run_overhead(o, session, prompt, counters.get(), energy);

  const Roofs roofs = find_roofs(o.hardware, session.report().kernels.isa);
  attach_region_counters(counters.get());
  enable_regions(true);
  const std::vector<Phase> phases = run_phases(session, prompt, o.generated_tokens, energy);
  enable_regions(false);
  close_likwid_markers();

  // The roof reads fresh anonymous memory; a model cached in 4 KiB pages reads slower than one in
  // 2 MiB pages on some hosts (docs/kernels-decode.md, "Page sizes"), so say which it was.
  const MappedFile& mapping = model.file().mapping();
  const std::string counter_text = counters ? counters->describe() : "off (--no-counters)";
  const std::string energy_text = energy.available() ? fmt::format("RAPL, {} domains", energy.domains().size())
                                                     : energy.reason();
  if (o.json) {
    nlohmann::json phase_list = nlohmann::json::array();
    for (const Phase& phase : phases) phase_list.push_back(phase_json(phase, roofs));
    nlohmann::json unavailable = nlohmann::json::array();
    if (counters)
      for (const UnavailableCounter& u : counters->unavailable()) unavailable.push_back({{"name", u.name}, {"reason", u.reason}});
    const std::optional<std::size_t> huge_bytes = mapping.huge_page_bytes();
    const nlohmann::json out = {
        {"model", valid_utf8(o.run.model)},
        {"threads", session.report().threads},
        {"sequences", o.run.sequences},
        {"isa", std::string(isa_name(session.report().kernels.isa))},
        {"kv_type", o.run.kv_type},
        {"prefetch", o.run.prefetch},
        {"attn_tile", o.run.attn_tile},
        {"binding", session.report().binding},
        {"placement", session.report().placement},
        {"context", model.context()},
        {"mlock", o.run.mlock},
        {"prefetched_bytes", model.prefetched_bytes()},  // what the --prefetch thread mapped (0 without it)
        {"roofs",
         {{"memory_bytes_per_s", roofs.bytes_per_s}, {"memory_source", roofs.memory_source},
          {"flops_per_s", roofs.flops_per_s}, {"compute_source", roofs.compute_source}, {"ridge", roofs.ridge()}}},
        {"gemm_blocking", blocking},
        {"pages", {{"model_bytes", mapping.size()}, {"huge_page_bytes", huge_bytes ? nlohmann::json(*huge_bytes) : nlohmann::json()}}},
        {"counters",
         {{"available", counters ? counters->names() : std::vector<std::string>{}},
          {"unavailable", unavailable},
          {"perf_event_paranoid", read_perf_event_paranoid()}}},
        {"likwid", likwid},
        {"dispatch", describe_dispatch(omp_get_max_threads())},
        {"energy", {{"available", energy.available()}, {"reason", energy.reason()}}},
        {"phases", phase_list}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("cpullm profile: %s, %d threads, kernels %s, KV cache %s%s\n", o.run.model.c_str(),
              session.report().threads, std::string(isa_name(session.report().kernels.isa)).c_str(), o.run.kv_type.c_str(),
              o.run.sequences > 1 ? fmt::format(", {} sequences a step", o.run.sequences).c_str() : "");
  std::printf("dispatch: %s\n", describe_dispatch(omp_get_max_threads()).c_str());
  std::printf("roofs: memory %.1f GB/s (%s)\n       compute %.1f GFLOP/s (%s)\n       ridge %.1f FLOP/byte\n",
              roofs.bytes_per_s * 1e-9, roofs.memory_source.c_str(), roofs.flops_per_s * 1e-9,
              roofs.compute_source.c_str(), roofs.ridge());
  std::printf("%s\n", blocking.c_str());
  std::printf("pages: %s\n", describe_page_sizes(mapping).c_str());
  std::printf("counters: %s\n%s\nenergy: %s\n", counter_text.c_str(), likwid.c_str(), energy_text.c_str());
  for (const Phase& phase : phases) print_phase(phase, roofs);
}

}  // namespace

void register_profile(CLI::App& app) {
  auto options = std::make_shared<ProfileOptions>();
  CLI::App* command = app.add_subcommand("profile", "Per-region time, GFLOP/s, GB/s, roofline and counters of a run");
  command->add_option("-m,--model", options->run.model, "GGUF model file")->required()->check(CLI::ExistingFile);
  command->add_option("-p,--n-prompt", options->prompt_tokens, "Prompt tokens (prefill)")->check(CLI::Range(1, 1 << 20));
  command->add_option("-n,--n-gen", options->generated_tokens, "Generated tokens (decode)")->check(CLI::Range(1, 1 << 20));
  // --prefetch also keeps the decode table free of page faults on embedding rows no token read before.
  add_run_options(*command, options->run,
                  {RunFlag::threads, RunFlag::bind, RunFlag::cpuset, RunFlag::housekeeping, RunFlag::isa,
                   RunFlag::placement, RunFlag::attn_tile, RunFlag::kv_type, RunFlag::context, RunFlag::sequences,
                   RunFlag::prefetch, RunFlag::mlock});
  command->add_option("--hardware", options->hardware,
                      "Hardware profile (name in tuning/profiles or path) to take the roofs from instead of measuring");
  command->add_flag("!--no-counters", options->counters, "Do not read perf_event counters per region");
  command->add_flag("--overhead", options->overhead,
                    "Time prefill and decode with regions off, on, and on with counters, instead of the table");
  command->add_option("-r,--repetitions", options->repetitions, "--overhead: runs of each mode")->check(CLI::Range(1, 1000));
  command->add_flag("--json", options->json, "Machine-readable output");
  command->callback([options] { run_profile(*options); });
}

}  // namespace cpullm::cli
