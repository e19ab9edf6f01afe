#include "engine/model/layer_prefetcher.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace cpullm {
namespace {

// Maps [data, data + size): MADV_POPULATE_READ (Linux 5.14+); where the kernel lacks it,
// MADV_WILLNEED at least starts reading the pages into the page cache.
void populate(std::span<const std::byte> range) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGE_SIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(range.data()) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(range.data() + range.size());
  void* start = reinterpret_cast<void*>(begin);
  if (madvise(start, end - begin, MADV_POPULATE_READ) != 0) madvise(start, end - begin, MADV_WILLNEED);
}

}  // namespace

LayerPrefetcher::LayerPrefetcher(std::vector<std::vector<std::span<const std::byte>>> ranges)
    : ranges_(std::move(ranges)), mapped_(ranges_.size(), false), thread_([this] { run(); }) {}

LayerPrefetcher::~LayerPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void LayerPrefetcher::request(int64_t layer) {
  {
    std::lock_guard lock(mutex_);
    if (layer < 0 || layer >= static_cast<int64_t>(ranges_.size()) || mapped_[layer]) return;
    if (std::find(pending_.begin(), pending_.end(), layer) != pending_.end()) return;
    pending_.push_back(layer);
  }
  wake_.notify_one();
}

uint64_t LayerPrefetcher::bytes_mapped() const {
  std::lock_guard lock(mutex_);
  return bytes_mapped_;
}

void LayerPrefetcher::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || !pending_.empty(); });
    if (stop_) return;
    const int64_t layer = pending_.front();
    pending_.erase(pending_.begin());
    mapped_[layer] = true;
    lock.unlock();
    uint64_t bytes = 0;
    for (std::span<const std::byte> range : ranges_[layer]) {
      populate(range);
      bytes += range.size();
    }
    lock.lock();
    bytes_mapped_ += bytes;
  }
}

}  // namespace cpullm
