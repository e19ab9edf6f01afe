// Double buffering of the weights (--prefetch): while layer l computes, a background thread
// maps layer l + 1's weight pages (madvise MADV_POPULATE_READ: reads what is not in the page
// cache and fills the page tables), so the compute threads find the next layer mapped instead of
// stopping at a page fault every few pages. A mapped file is only faulted in on first use, so
// this overlaps work that happens once per process and per page: the first forward pass (time
// to first token, cold or warm page cache); later tokens find every page mapped already. The
// model passes the embedding table as one more "layer" after the last, so that decode steps,
// each reading a row no step read before, do not start with a page fault either.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace cpullm {

class LayerPrefetcher {
 public:
  // ranges[l]: the byte ranges of layer l's weights inside the mapping.
  explicit LayerPrefetcher(std::vector<std::vector<std::span<const std::byte>>> ranges);
  ~LayerPrefetcher();
  LayerPrefetcher(const LayerPrefetcher&) = delete;
  LayerPrefetcher& operator=(const LayerPrefetcher&) = delete;

  // Asks for `layer` to be mapped; returns at once. Layers mapped before are skipped.
  void request(int64_t layer);
  // Bytes the thread has mapped so far (for the summary line).
  uint64_t bytes_mapped() const;

 private:
  void run();

  std::vector<std::vector<std::span<const std::byte>>> ranges_;  // (layers) ranges per layer
  std::vector<bool> mapped_;                                      // (layers) done already
  std::vector<int64_t> pending_;                                  // requested, not yet done
  uint64_t bytes_mapped_ = 0;
  bool stop_ = false;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace cpullm
