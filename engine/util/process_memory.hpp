// This process's memory as Linux reports it, for load-time and benchmark summaries.
#pragma once
#include <cstdint>

namespace cpullm {

uint64_t resident_bytes();       // VmRSS now
uint64_t peak_resident_bytes();  // VmHWM: the most resident at any time

}  // namespace cpullm
