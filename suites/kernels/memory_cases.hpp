// The memory case bench_kernels registers from its own flag: --read_file=PATH.
#pragma once
#include <string>

namespace cpullm::bench {

// memory_read_file/THREADS: memory_read over PATH's pages, mapped as the engine maps a model.
// Throws std::runtime_error naming PATH where it cannot be mapped.
void register_read_of_file(const std::string& path);

}  // namespace cpullm::bench
