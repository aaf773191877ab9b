// Safetensors reader (mmap + header validation), model-directory Checkpoint, and writer.
// Format: u64 little-endian header length N, N bytes of JSON header, then the data section.
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include "model/json_util.h"

namespace ds {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Safetensors caps the header at 100 MB; real sharded V3 headers are ~100 KB.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

// Element sizes of every safetensors dtype, so that entries dserve cannot use are still validated.
bool st_dtype_size(const std::string& s, uint64_t* size) {
  static const std::pair<const char*, uint64_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"F8_E8M0", 1}, {"I16", 2},
      {"U16", 2},  {"F16", 2}, {"BF16", 2}, {"I32", 4},    {"U32", 4},     {"F32", 4},     {"I64", 8},
      {"U64", 8},  {"F64", 8}};
  for (const auto& [n, sz] : kSizes)
    if (s == n) {
      *size = sz;
      return true;
    }
  return false;
}

bool json_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr && addr != MAP_FAILED) munmap(addr, len);
  }
};

std::string base_name(const std::string& path) { return fs::path(path).filename().string(); }

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

Result<std::shared_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(path, ": cannot open (", std::strerror(errno), ")");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return error(path, ": cannot stat (", std::strerror(e), ")");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error(path, ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {  // nothing to map: from_memory names the problem
    ::close(fd);
    return from_memory(path, nullptr, nullptr, size);
  }
  auto m = std::make_shared<Mapping>();
  m->len = size;
  // Private + writable: copy-on-write pages, so in-place edits by a backend never reach the file.
  m->addr = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  // Strict overcommit may refuse a writable private mapping of a huge file; read-only still works.
  if (m->addr == MAP_FAILED && errno == ENOMEM) m->addr = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (m->addr == MAP_FAILED) {
    m->addr = nullptr;
    return error(path, ": mmap failed (", std::strerror(map_errno), ")");
  }
  uint8_t* base = static_cast<uint8_t*>(m->addr);
  return from_memory(path, std::move(m), base, size);
}

Result<std::shared_ptr<SafetensorsFile>> SafetensorsFile::from_memory(const std::string& path,
                                                                      std::shared_ptr<void> owner, uint8_t* base,
                                                                      uint64_t size) {
  auto f = std::make_shared<SafetensorsFile>();
  f->path_ = path;
  f->file_name_ = base_name(path);
  f->file_size_ = size;
  const std::string& fn = f->file_name_;
  if (size < 8) return error(fn, ": truncated: ", size, " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
  if (header_len > size - 8)
    return error(fn, ": header length ", header_len, " exceeds file size ", size, " (truncated or not safetensors)");
  if (header_len > kMaxHeaderBytes)
    return error(fn, ": header length ", header_len, " exceeds the ", kMaxHeaderBytes, "-byte limit");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  json header;
  try {
    header = json::parse(base + 8, base + data_start);
  } catch (const json::exception& e) {
    return error(fn, ": invalid JSON header: ", parse_error_text(e));
  }
  if (!header.is_object()) return error(fn, ": header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return error(fn, ": __metadata__ is not a JSON object");
      for (auto mi = v.begin(); mi != v.end(); ++mi) {
        if (!mi.value().is_string()) return error(fn, ": __metadata__ value '", mi.key(), "' is not a string");
        f->metadata_[mi.key()] = mi.value().get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) { return error(fn, ": tensor '", name, "': ", what); };
    if (!v.is_object()) return bad("header entry is not a JSON object");
    TensorInfo t;
    t.name = name;
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) return bad("missing or non-string 'dtype'");
    t.dtype_str = dt->get<std::string>();
    uint64_t esize = 0;
    if (!st_dtype_size(t.dtype_str, &esize)) return bad("unknown dtype '" + t.dtype_str + "'");
    t.supported = dtype_from_name(t.dtype_str, &t.dtype);
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) return bad("missing or non-array 'shape'");
    uint64_t numel = 1;
    for (const json& e : *sh) {
      uint64_t ext = 0;
      if (!json_u64(e, &ext) || ext > (1ull << 48)) return bad("shape " + sh->dump() + " is not a list of non-negative integers");
      t.shape.push_back(static_cast<int64_t>(ext));
      if (ext != 0 && numel > (1ull << 62) / ext) return bad("shape " + sh->dump() + " is too large");
      numel *= ext;
    }
    auto off = v.find("data_offsets");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !json_u64((*off)[0], &t.begin) ||
        !json_u64((*off)[1], &t.end))
      return bad("missing or malformed 'data_offsets' (need [begin, end])");
    std::string offs = "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
    if (t.begin > t.end) return bad(offs + " has begin > end");
    if (t.end > data_size)
      return bad(offs + " outside data section of " + std::to_string(data_size) + " bytes (file truncated?)");
    if (numel > (1ull << 62) / esize || t.end - t.begin != numel * esize)
      return bad(offs + " span " + std::to_string(t.end - t.begin) + " bytes, but " + t.dtype_str +
                 shape_str(t.shape) + " needs " + std::to_string(numel * esize));
    f->tensors_.push_back(std::move(t));
  }
  std::sort(f->tensors_.begin(), f->tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  size_t last = SIZE_MAX;  // the non-empty tensor reaching furthest so far
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    const TensorInfo& t = f->tensors_[i];
    f->index_[t.name] = i;
    if (t.end == t.begin) continue;  // zero-byte tensors occupy nothing and cannot overlap
    if (last != SIZE_MAX && t.begin < f->tensors_[last].end)
      return error(fn, ": tensors '", f->tensors_[last].name, "' and '", t.name, "' overlap in the data section");
    if (last == SIZE_MAX || t.end > f->tensors_[last].end) last = i;
  }
  f->data_ = base + data_start;
  f->mapping_ = std::move(owner);
  return f;
}

const TensorInfo* SafetensorsFile::info(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<Tensor> SafetensorsFile::get(const std::string& name) const {
  const TensorInfo* t = info(name);
  if (!t) return error(file_name_, ": no tensor '", name, "'");
  if (!t->supported) return error(file_name_, ": tensor '", name, "' has unsupported dtype ", t->dtype_str);
  uint8_t* p = const_cast<uint8_t*>(data_ + t->begin);
  size_t align = dtype_size(t->dtype);
  if (reinterpret_cast<uintptr_t>(p) % align != 0) {
    // Writers outside the reference implementation may leave the data section unaligned.
    Tensor copy = Tensor::empty(t->shape, t->dtype);
    std::memcpy(copy.data(), p, t->end - t->begin);
    return copy;
  }
  return Tensor::wrap(p, t->shape, t->dtype, Device::kCpu, mapping_);
}

// ---------------------------------------------------------------------------------------------------

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  Checkpoint c;
  c.dir_ = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return error(dir, ": not a directory");
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index_path, ec)) {
    const std::string ifn = index_path.filename().string();
    std::ifstream in(index_path, std::ios::binary);
    if (!in) return error(index_path.string(), ": cannot open (", std::strerror(errno), ")");
    std::stringstream ss;
    ss << in.rdbuf();
    json idx;
    try {
      idx = json::parse(ss.str());
    } catch (const json::exception& e) {
      return error(ifn, ": invalid JSON: ", parse_error_text(e));
    }
    if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
      return error(ifn, ": missing 'weight_map' object");
    std::map<std::string, size_t> file_ids;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string()) return error(ifn, ": weight_map entry '", it.key(), "' is not a file name");
      const std::string file = it.value().get<std::string>();
      if (file.empty() || fs::path(file).is_absolute() || file.find("..") != std::string::npos)
        return error(ifn, ": tensor '", it.key(), "' maps to invalid file name '", file, "'");
      auto fi = file_ids.find(file);
      if (fi == file_ids.end()) {
        const fs::path p = fs::path(dir) / file;
        if (!fs::exists(p, ec))
          return error(ifn, ": tensor '", it.key(), "' maps to missing file '", file, "'");
        DS_ASSIGN_OR_RETURN(auto sf, SafetensorsFile::open(p.string()));
        fi = file_ids.emplace(file, c.files_.size()).first;
        c.files_.push_back(std::move(sf));
      }
      if (!c.files_[fi->second]->has(it.key()))
        return error(ifn, ": tensor '", it.key(), "' is not in ", file);
      c.where_[it.key()] = fi->second;
    }
    return c;
  }
  std::vector<std::string> paths;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".safetensors" && (e.is_regular_file() || e.is_symlink())) paths.push_back(e.path().string());
  if (ec) return error(dir, ": cannot list (", ec.message(), ")");
  if (paths.empty()) return error(dir, ": no *.safetensors files (and no model.safetensors.index.json)");
  std::sort(paths.begin(), paths.end());
  for (const std::string& p : paths) {
    DS_ASSIGN_OR_RETURN(auto sf, SafetensorsFile::open(p));
    size_t id = c.files_.size();
    for (const TensorInfo& t : sf->tensors()) {
      auto [it, inserted] = c.where_.emplace(t.name, id);
      if (!inserted)
        return error(dir, ": tensor '", t.name, "' is in both ", c.files_[it->second]->file_name(), " and ",
                     sf->file_name());
    }
    c.files_.push_back(std::move(sf));
  }
  return c;
}

const TensorInfo* Checkpoint::info(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second]->info(name);
}

Result<Tensor> Checkpoint::get(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return error("tensor '", name, "' not found in ", dir_);
  return files_[it->second]->get(name);
}

std::string Checkpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  return it == where_.end() ? std::string() : files_[it->second]->file_name();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [n, i] : where_) out.push_back(n);
  return out;
}

// ---------------------------------------------------------------------------------------------------

Status save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || name.empty()) return error(path, ": invalid tensor name '", name, "'");
    if (header.contains(name)) return error(path, ": duplicate tensor name '", name, "'");
    if (!t.defined()) return error(path, ": tensor '", name, "' is undefined");
    if (t.device() != Device::kCpu) return error(path, ": tensor '", name, "' is not on the CPU");
    json e;
    e["dtype"] = dtype_name(t.dtype());
    e["shape"] = t.shape();
    e["data_offsets"] = {offset, offset + t.nbytes()};
    offset += t.nbytes();
    header[name] = std::move(e);
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return error(path, ": cannot create (", std::strerror(errno), ")");
  uint8_t len[8];
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, t] : tensors) out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  out.close();
  if (!out) return error(path, ": write failed");
  return Status::ok();
}

}  // namespace ds
