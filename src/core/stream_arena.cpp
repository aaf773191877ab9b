// StreamArena (stream_arena.h): best-fit placement with per-stream reuse.
#include "core/stream_arena.h"

#include <limits>

namespace ds {

std::optional<size_t> StreamArena::alloc(size_t bytes, uint64_t stream) {
  const size_t need = round_up(bytes);
  auto best = blocks_.end();
  size_t best_size = std::numeric_limits<size_t>::max();
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    const Block& b = it->second;
    if (b.live || b.size < need || (b.stream != stream && b.stream != kAnyStream)) continue;
    if (b.size < best_size) {
      best = it;
      best_size = b.size;
    }
  }
  size_t offset;
  if (best != blocks_.end()) {
    offset = best->first;
    Block& b = best->second;
    if (b.size > need) {  // the rest stays free, with the same tag
      blocks_[offset + need] = Block{b.size - need, false, b.stream};
      b.size = need;
    }
  } else {
    if (need > capacity_ || tail_ > capacity_ - need) return std::nullopt;
    offset = tail_;
    tail_ += need;
    blocks_[offset] = Block{need, false, kAnyStream};
  }
  Block& b = blocks_[offset];
  b.live = true;
  b.stream = stream;
  live_bytes_ += need;
  ++live_blocks_;
  return offset;
}

void StreamArena::merge_with_next(std::map<size_t, Block>::iterator it) {
  auto next = std::next(it);
  if (next == blocks_.end() || next->second.live || next->second.stream != it->second.stream) return;
  it->second.size += next->second.size;
  blocks_.erase(next);
}

bool StreamArena::free(size_t offset, uint64_t stream) {
  auto it = blocks_.find(offset);
  if (it == blocks_.end() || !it->second.live) return false;
  it->second.live = false;
  it->second.stream = stream;
  live_bytes_ -= it->second.size;
  --live_blocks_;
  merge_with_next(it);
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (!prev->second.live && prev->second.stream == stream) merge_with_next(prev);
  }
  return true;
}

void StreamArena::release_tags() {
  for (auto& [offset, b] : blocks_)
    if (!b.live) b.stream = kAnyStream;
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it)
    if (!it->second.live)
      while (std::next(it) != blocks_.end() && !std::next(it)->second.live) merge_with_next(it);
}

}  // namespace ds
