// std::vector whose buffer starts on a 64-byte boundary (a cache line, an AVX-512 register).
// For activations the kernels load 64 bytes at a time: a load that straddles two cache lines
// costs two. (glibc's malloc starts a large std::vector<float> 16 bytes past a page boundary, so
// every such load straddled: with the 4 rows of a 4-token F16 step at 16 bytes past a line,
// bench_kernels' matvec_decode ran 14-25% slower than aligned.)
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace cpullm {

inline constexpr std::size_t kCacheLine = 64;

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kCacheLine})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{kCacheLine}); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};

template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace cpullm
