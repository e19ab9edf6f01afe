// The GGUF reader and the model loader on arbitrary bytes, as `cpullm info` and `generate` use
// them: parse, summarise every value, load the vocabulary, then load the model and run one
// token. Refusing the input with a cpullm::Error is a pass; any other exception, a crash or a
// sanitizer report is a finding.
#include <omp.h>

#include <algorithm>

#include "engine/format/gguf.hpp"
#include "engine/model/model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "fuzz/memory_file.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  omp_set_num_threads(1);  // one input at a time; threads would only add noise to coverage
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace cpullm;
  const fuzz::MemoryFile input(data, size);
  try {
    const GgufFile file(input.path());
    for (const auto& [key, value] : file.metadata()) (void)gguf_value_summary(value);
    for (const GgufTensorInfo& tensor : file.tensors()) (void)tensor.shape_string();
    const Tokenizer tokenizer = Tokenizer::from_gguf(file);
    const std::vector<int32_t> ids = tokenizer.encode("Hello world", true);
    if (file.tensors().empty()) return 0;
    Model model(input.path(), 8);
    (void)model.forward(*std::max_element(ids.begin(), ids.end()), 0);
  } catch (const Error&) {
  }
  return 0;
}
