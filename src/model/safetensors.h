// Safetensors checkpoints: a validating mmap reader of one file, a Checkpoint over a model directory
// (sharded via model.safetensors.index.json, or every *.safetensors file), and a writer for CPU tensors.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ds {

// One header entry. dtype_str is the header's spelling; `supported` is false for safetensors dtypes
// dserve has no DType for (F64, I8, BOOL, ...): such tensors are listed but get() refuses them.
struct TensorInfo {
  std::string name;
  std::string dtype_str;
  bool supported = false;
  DType dtype = DType::kU8;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
  int64_t numel() const;
};

// A memory-mapped .safetensors file. The mapping is private and normally writable (copy-on-write), so a
// backend may permute a returned host tensor in place without touching the file on disk (read-only only
// when the kernel refuses a writable mapping of a huge file; prefer copying over in-place edits).
class SafetensorsFile {
 public:
  // Maps and validates the file: header length, JSON header, and every entry's dtype, shape and
  // data_offsets (inside the data section, consistent with dtype x numel, no overlaps).
  static Result<std::shared_ptr<SafetensorsFile>> open(const std::string& path);
  // The same validation of a whole file's bytes already in memory (`size` bytes at `base`); `owner` keeps them
  // alive for as long as the reader or any tensor view it returns. `path` names the source in messages. open()
  // maps the file and calls this; the fuzzer hands it a buffer (no file system round trip per input).
  static Result<std::shared_ptr<SafetensorsFile>> from_memory(const std::string& path, std::shared_ptr<void> owner,
                                                              uint8_t* base, uint64_t size);

  const std::string& path() const { return path_; }
  const std::string& file_name() const { return file_name_; }  // base name, used in messages
  uint64_t file_size() const { return file_size_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const TensorInfo* info(const std::string& name) const;  // null when absent
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data-offset order
  // A zero-copy CPU view into the mapping (copied only if the data is misaligned for its dtype).
  Result<Tensor> get(const std::string& name) const;

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  SafetensorsFile() = default;

 private:
  std::string path_;
  std::string file_name_;
  uint64_t file_size_ = 0;
  std::shared_ptr<void> mapping_;  // owns the bytes (open: the mmap); every returned view holds it
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model directory.
class Checkpoint {
 public:
  // DIR/model.safetensors.index.json (weight_map: tensor -> file) when present, else every
  // DIR/*.safetensors; a tensor name may appear only once.
  static Result<Checkpoint> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const TensorInfo* info(const std::string& name) const;  // null when absent
  Result<Tensor> get(const std::string& name) const;    // error: "tensor 'x' not found in DIR"
  std::string file_of(const std::string& name) const;     // base name of its file, "" when absent
  std::vector<std::string> names() const;                 // sorted
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t> where_;  // tensor name -> index into files_
};

// Writes CPU tensors (in the given order) to `path` in safetensors format, header padded to 8 bytes.
Status save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata = {});

}  // namespace ds
