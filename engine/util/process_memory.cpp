#include "engine/util/process_memory.hpp"

#include <cstdio>
#include <cstring>

namespace cpullm {
namespace {

uint64_t status_kib(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  const std::size_t length = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, length) == 0 && line[length] == ':') {
      std::sscanf(line + length + 1, "%lu", &kib);
      break;
    }
  std::fclose(f);
  return kib * 1024;
}

}  // namespace

uint64_t resident_bytes() { return status_kib("VmRSS"); }
uint64_t peak_resident_bytes() { return status_kib("VmHWM"); }

}  // namespace cpullm
