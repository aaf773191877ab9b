// The placement policy of the CUDA-graph capture arena (ops/cuda/cuda_runtime.cpp): offsets in one region, with
// blocks reused only in the order of the stream that freed them. No device calls: the CUDA side maps offsets to
// addresses; this file is tested on the CPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace ds {

// A region of `capacity` bytes handed out as blocks of kAlign-rounded sizes. A freed block is tagged with the
// stream (an opaque key) its last use was ordered on and is handed again only to an allocation on that stream, so
// a later writer is ordered after the earlier readers exactly as with a stream-ordered allocator; untagged blocks
// (never used, or released once no work is in flight) go to any stream. Best fit among the candidates, then the
// unused tail; adjacent free blocks of the same tag merge.
class StreamArena {
 public:
  static constexpr size_t kAlign = 512;
  static constexpr uint64_t kAnyStream = 0;

  explicit StreamArena(size_t capacity) : capacity_(capacity) {}

  // The offset of a new block of `bytes` (0 bytes take one kAlign unit) for work on `stream` (not kAnyStream),
  // or nullopt when nothing free or left in the region fits.
  std::optional<size_t> alloc(size_t bytes, uint64_t stream);
  // Frees the block at `offset` (from alloc, still live) with its last use on `stream`; false if no live block
  // starts there.
  bool free(size_t offset, uint64_t stream);
  // Every free block becomes untagged: call when no work that used them is in flight or still to be launched
  // apart from what is ordered after this point on every stream (the end of a graph capture).
  void release_tags();

  size_t capacity() const { return capacity_; }
  size_t high_water() const { return tail_; }  // bytes of the region ever handed out
  size_t live_bytes() const { return live_bytes_; }
  int64_t live_blocks() const { return live_blocks_; }
  // SIZE_MAX (never fits) where rounding would overflow.
  static size_t round_up(size_t bytes) {
    if (bytes > SIZE_MAX - kAlign) return SIZE_MAX;
    return bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  }

 private:
  struct Block {
    size_t size = 0;
    bool live = false;
    uint64_t stream = kAnyStream;  // free blocks: the stream their reuse must be ordered on
  };
  void merge_with_next(std::map<size_t, Block>::iterator it);

  size_t capacity_;
  size_t tail_ = 0;                 // blocks_ cover [0, tail_)
  std::map<size_t, Block> blocks_;  // offset -> block
  size_t live_bytes_ = 0;
  int64_t live_blocks_ = 0;
};

}  // namespace ds
