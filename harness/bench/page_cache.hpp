// Cold starts: how much of a file the page cache holds, and asking the kernel to drop it.
#pragma once
#include <string>

namespace cpullm {

// Fraction (0..1) of the file's pages resident in the page cache now (mincore on a fresh map).
double cached_fraction(const std::string& path);

// Writes back and drops the file's pages (fdatasync, then posix_fadvise DONTNEED) and returns
// the fraction still cached afterwards. The kernel keeps pages some process still maps, so
// call it after the model is unmapped; a fraction well above 0 means the drop did not work.
double drop_from_page_cache(const std::string& path);

}  // namespace cpullm
