#include "harness/bench/bench_plan.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "engine/util/text.hpp"
#include "harness/results/llama_bench_output.hpp"

namespace cpullm {

std::string BenchPoint::test_name() const {
  return llama_bench_test_name(n_prompt, n_gen) + (n_depth > 0 ? fmt::format(" @ d{}", n_depth) : "");
}

std::string BenchPoint::case_name() const {
  return fmt::format("{}/{}/t{}/b{}/np{}/{}/{}/{}/{}/{}/prefetch{}{}", valid_utf8(std::filesystem::path(model).stem().string()),
                     llama_bench_test_name(n_prompt, n_gen) + (n_depth > 0 ? fmt::format("@d{}", n_depth) : ""), threads, n_batch, n_seq,
                     isa.empty() ? "best" : isa, attn_tile, binding, placement, kv_type, prefetch ? 1 : 0,
                     cold ? "/cold" : "");
}

std::vector<BenchPoint> expand_points(const BenchParams& params) {
  std::vector<std::pair<int64_t, int64_t>> tests;  // (n_prompt, n_gen)
  for (int64_t p : params.n_prompt)
    if (p > 0) tests.emplace_back(p, 0);
  for (int64_t n : params.n_gen)
    if (n > 0) tests.emplace_back(0, n);
  for (const auto& pg : params.prompt_gen) tests.push_back(pg);

  std::vector<BenchPoint> points;
  BenchPoint p;
  p.numa = params.numa;
  p.cpuset = params.cpuset;
  p.housekeeping = params.housekeeping;
  p.repetitions = params.repetitions;
  p.cold = params.cold;
  p.inject_delay_ms = params.inject_delay_ms;
  for (const auto& model : params.models)
    for (int64_t threads : params.threads)
      for (int64_t n_batch : params.n_batch)
        for (int64_t n_seq : params.n_seq)
          for (const auto& isa : params.isa)
            for (const auto& tile : params.attn_tile)
              for (const auto& binding : params.binding)
                for (const auto& placement : params.placement)
                  for (const auto& kv_type : params.kv_type)
                    for (int64_t prefetch : params.prefetch)
                      for (int64_t n_depth : params.n_depth)
                        for (const auto& [n_prompt, n_gen] : tests) {
                          p.model = model;
                          p.threads = static_cast<int>(threads);
                          p.n_batch = n_batch;
                          p.n_seq = static_cast<int>(n_seq);
                          p.isa = isa;
                          p.attn_tile = tile;
                          p.binding = binding;
                          p.placement = placement;
                          p.kv_type = kv_type;
                          p.prefetch = prefetch != 0;
                          p.n_prompt = n_prompt;
                          p.n_gen = n_gen;
                          p.n_depth = n_depth;
                          points.push_back(p);
                        }
  return points;
}

}  // namespace cpullm
