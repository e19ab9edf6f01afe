// Rows of a parallel loop handed out as equal static shares that finishing threads can take
// from: the static split's one sequential stream per thread, without its waits.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>

#include "engine/util/error.hpp"

namespace cpullm {

// Each thread's share of rows [0, rows) (the static split OpenMP would make) and the part of it
// still unclaimed, [front, back) in one word, so that one compare-and-swap claims a chunk. The
// owner takes its share's chunks from the front, in order, so its reads stay one sequential
// stream; a thread done with its own share then takes chunks from the back of the others'. A
// static split can leave one decode thread waiting for another (a host's other tenants slow one
// vCPU, not all); fully dynamic chunks, which interleave the threads' reads, are slower than the
// static split (bench_kernels matvec_decode; docs/kernels-decode.md, "Row shares").
//
//   RowShares shares(rows, parallel_threads(), chunk);   // on the calling thread
//   on_every_thread([shares, run](int thread, int) mutable {  // parallel.hpp
//     for (int64_t begin, end; shares.next(thread, begin, end);) run(begin, end);
//   });
//
// Every row is claimed exactly once, by whichever thread; the shares of threads OpenMP did not
// grant are taken by the others. The shares live in a buffer of the constructing thread, reused
// from call to call: one RowShares per thread at a time.
class RowShares {
 public:
  RowShares(int64_t rows, int threads, int64_t chunk) : count_(threads), chunk_(std::max<int64_t>(chunk, 1)) {
    if (rows < 0 || rows > int64_t{0xffffffff} || threads < 1)
      fail("RowShares: {} rows over {} threads: rows must be 0..2^32-1, threads at least 1", rows, threads);
    thread_local std::unique_ptr<Share[]> buffer;
    thread_local int capacity = 0;
    if (capacity < threads) {
      buffer = std::make_unique<Share[]>(static_cast<std::size_t>(threads));
      capacity = threads;
    }
    shares_ = buffer.get();
    for (int i = 0; i < threads; ++i)
      shares_[i].range.store(pack(rows * i / threads, rows * (i + 1) / threads), std::memory_order_relaxed);
  }

  // The next rows [begin, end) for `thread` (0..threads-1): from the front of its own share,
  // then from the back of the others'; false when none are left.
  bool next(int thread, int64_t& begin, int64_t& end) {
    if (take(thread, true, begin, end)) return true;
    for (int other = 1; other < count_; ++other)
      if (take((thread + other) % count_, false, begin, end)) return true;
    return false;
  }

 private:
  struct alignas(64) Share {  // a cache line each: an owner's claims never contend with another's
    std::atomic<uint64_t> range;
  };
  static uint64_t pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
  }
  bool take(int owner, bool from_front, int64_t& begin, int64_t& end) {
    if (owner < 0 || owner >= count_) return false;
    std::atomic<uint64_t>& range = shares_[owner].range;
    uint64_t seen = range.load(std::memory_order_relaxed);
    for (;;) {
      const auto front = static_cast<int64_t>(seen >> 32), back = static_cast<int64_t>(seen & 0xffffffffu);
      if (front >= back) return false;
      begin = from_front ? front : std::max(front, back - chunk_);
      end = from_front ? std::min(back, front + chunk_) : back;
      // Relaxed: the claim only decides who computes which rows; the loop's join publishes them.
      if (range.compare_exchange_weak(seen, from_front ? pack(end, back) : pack(front, begin), std::memory_order_relaxed))
        return true;
    }
  }

  int count_;       // the threads the rows were split for
  int64_t chunk_;   // rows per claim
  Share* shares_;   // (count_) in the constructing thread's buffer
};

}  // namespace cpullm
