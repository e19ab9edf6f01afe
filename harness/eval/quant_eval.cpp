#include "harness/eval/quant_eval.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include "engine/run/session.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/quant/sparsify.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// out (n) = log softmax(logits), in double so KL of nearly equal distributions stays exact.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(v - max);
  const double log_sum = std::log(sum);
  out.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - max - log_sum;
}

struct Candidate {
  QuantEvalResult result;
  std::unique_ptr<Session> session;
  double nll_sum = 0, kl_sum = 0;
  int64_t agreements = 0;
};

}  // namespace

QuantizeOptions quantize_options_for(std::string_view format) {
  const std::size_t plus = format.find('+');
  std::string_view type = format.substr(0, plus), sparsity = plus == std::string_view::npos ? "" : format.substr(plus + 1);
  if (plus == std::string_view::npos &&
      (format.starts_with("sparse") || format.starts_with("block") || format.find(':') != std::string_view::npos))
    type = "", sparsity = format;
  QuantizeOptions options;
  options.type = type.empty() ? std::nullopt : std::optional(quantize_type_from_name(type));
  if (!sparsity.empty()) options.sparsity = parse_sparsity_name(sparsity);
  return options;
}

std::vector<QuantEvalResult> evaluate_quantization(const std::string& model_path, std::string_view text,
                                                   const QuantEvalOptions& options) {
  if (options.window < 2) fail("eval-quant: --window must be at least 2 tokens");
  std::filesystem::create_directories(options.work_dir);

  // The source and one quantized copy per format, each with a context of one window.
  const auto session_for = [&](const std::string& path, const std::string& kv_type) {
    RunConfig run = options.run;
    run.model = path;
    run.kv_type = kv_type;
    run.context = options.window;
    run.sequences = 1;
    return std::make_unique<Session>(run);
  };
  std::vector<Candidate> candidates;
  const uint64_t source_bytes = std::filesystem::file_size(model_path);
  const std::string& kv_type = options.run.kv_type;
  candidates.push_back({{.format = "source", .kv_type = kv_type, .file_bytes = source_bytes}, session_for(model_path, kv_type)});
  for (const std::string& format : options.formats) {
    QuantizeOptions quantize = quantize_options_for(format);
    quantize.keep = options.keep;
    quantize.progress = false;
    const std::string path = (std::filesystem::path(options.work_dir) / (format + ".gguf")).string();
    quantize_model(model_path, path, quantize);
    candidates.push_back({{.format = format, .kv_type = kv_type, .file_bytes = std::filesystem::file_size(path)},
                          session_for(path, kv_type)});
  }
  for (const std::string& other : options.kv_types)
    candidates.push_back({{.format = "source", .kv_type = other, .file_bytes = source_bytes}, session_for(model_path, other)});

  const Tokenizer tokenizer = Tokenizer::from_gguf(candidates.front().session->model().file());
  if (tokenizer.bos() < 0) fail("{}: eval-quant starts each window with BOS, and the vocabulary has none", model_path);
  const std::vector<int32_t> text_tokens = tokenizer.encode(text, false);
  if (text_tokens.size() < 2) fail("eval-quant: the text gives {} tokens; at least 2 are needed", text_tokens.size());

  // Windows of BOS + (window - 1) text tokens; position p predicts the window's token p + 1.
  std::vector<double> source_log_probs, log_probs;
  std::vector<std::vector<double>> window_source;  // (positions, vocab) the source's log-probabilities
  for (std::size_t start = 0; start + 1 < text_tokens.size(); start += options.window - 1) {
    std::vector<int32_t> window = {tokenizer.bos()};
    const std::size_t end = std::min(text_tokens.size(), start + options.window - 1);
    window.insert(window.end(), text_tokens.begin() + start, text_tokens.begin() + end);
    const int64_t positions = static_cast<int64_t>(window.size()) - 1;

    window_source.resize(positions);
    for (Candidate& c : candidates) {
      const bool source = &c == &candidates.front();
      // Token by token through the decode loop, each step fed the text's token (teacher
      // forcing): step p + 1 scores the logits of position p against the window's token p + 1.
      DecodeLoop loop;
      loop.steps = positions + 1;
      loop.run_last = false;  // the last step only scores
      loop.choose = [&](int64_t step, int32_t, std::span<const float> logits) {
        if (step == 0) return window[0];
        const int64_t pos = step - 1;
        log_softmax(logits, source ? window_source[pos] : log_probs);
        const std::vector<double>& lp = source ? window_source[pos] : log_probs;
        c.nll_sum -= lp[window[pos + 1]];
        if (!source) {
          const std::vector<double>& reference = window_source[pos];
          double kl = 0;
          for (std::size_t i = 0; i < lp.size(); ++i) kl += std::exp(reference[i]) * (reference[i] - lp[i]);
          c.kl_sum += kl;
          c.agreements += std::max_element(lp.begin(), lp.end()) - lp.begin() ==
                          std::max_element(reference.begin(), reference.end()) - reference.begin();
        }
        return window[pos + 1];
      };
      c.session->decode(loop);
      c.result.positions += positions;
    }
  }

  std::vector<QuantEvalResult> results;
  for (Candidate& c : candidates) {
    const double n = static_cast<double>(c.result.positions);
    c.result.perplexity = std::exp(c.nll_sum / n);
    c.result.mean_kl = c.kl_sum / n;
    c.result.top1_agreement = &c == &candidates.front() ? 1.0 : c.agreements / n;
    c.result.run = c.session->describe();
    results.push_back(c.result);
  }
  return results;
}

}  // namespace cpullm
