// Tests of the safetensors reader/writer and Checkpoint: byte-level format (hand-written files), round trips
// of every dtype, sharded directories, and every malformed-file error message.
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace ds {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

#define EXPECT_ERROR_HAS(msg, needle)                                           \
  do {                                                                          \
    std::string m_ = (msg);                                                     \
    EXPECT_NE(m_.find(needle), std::string::npos) << "message: '" << m_ << "'"; \
  } while (0)

// A fresh directory per test.
std::string test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path d = fs::path(::testing::TempDir()) / "dserve_st" / (std::string(info->test_suite_name()) + "." + info->name());
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// Writes a safetensors file by hand: `header_len` (default: the real length) then header then data.
void write_raw(const std::string& path, const std::string& header, const std::string& data,
               uint64_t header_len = UINT64_MAX) {
  if (header_len == UINT64_MAX) header_len = header.size();
  std::ofstream out(path, std::ios::binary);
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((header_len >> (8 * i)) & 0xff));
  out << header << data;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Tensor filled(Shape shape, DType dt, uint8_t seed) {
  Tensor t = Tensor::empty(std::move(shape), dt);
  auto* p = t.data_as<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(seed + i * 37);
  return t;
}

std::string open_error(const std::string& path) {
  auto r = SafetensorsFile::open(path);
  return r.is_ok() ? std::string("(opened fine)") : r.status().message();
}

TEST(Safetensors, ReadsHandWrittenFile) {
  // Format per the safetensors spec, written without our writer: F32 [2] then BF16 [1, 2].
  std::string dir = test_dir();
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  float a[2] = {1.5f, -2.0f};
  uint16_t b[2] = {f32_to_bf16(3.0f), f32_to_bf16(0.25f)};
  std::string data(reinterpret_cast<char*>(a), 8);
  data.append(reinterpret_cast<char*>(b), 4);
  write_raw(dir + "/m.safetensors", header, data);

  auto f = SafetensorsFile::open(dir + "/m.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->tensors().size(), 2u);
  auto ta = (*f)->get("a");
  ASSERT_TRUE(ta.is_ok());
  EXPECT_EQ(ta->dtype(), DType::kF32);
  EXPECT_EQ(ta->shape(), (Shape{2}));
  EXPECT_EQ(ta->f32()[0], 1.5f);
  EXPECT_EQ(ta->f32()[1], -2.0f);
  auto tb = (*f)->get("b");
  ASSERT_TRUE(tb.is_ok());
  EXPECT_EQ(tb->dtype(), DType::kBF16);
  EXPECT_EQ(tb->shape(), (Shape{1, 2}));
  EXPECT_EQ(bf16_to_f32(tb->data_as<uint16_t>()[0]), 3.0f);
  EXPECT_EQ(bf16_to_f32(tb->data_as<uint16_t>()[1]), 0.25f);
  EXPECT_FALSE((*f)->get("c").is_ok());
}

TEST(Safetensors, WriterProducesSpecLayout) {
  std::string dir = test_dir();
  Tensor x = filled({3}, DType::kBF16, 1), y = filled({2, 2}, DType::kF32, 2);
  ASSERT_TRUE(save_safetensors(dir + "/w.safetensors", {{"x", x}, {"y", y}}, {{"k", "v"}}).is_ok());
  std::string bytes = read_bytes(dir + "/w.safetensors");
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);  // data section stays 8-byte aligned
  ASSERT_EQ(bytes.size(), 8 + n + 6 + 16);
  json h = json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["__metadata__"]["k"], "v");
  EXPECT_EQ(h["x"]["dtype"], "BF16");
  EXPECT_EQ(h["x"]["shape"], json({3}));
  EXPECT_EQ(h["x"]["data_offsets"], json({0, 6}));
  EXPECT_EQ(h["y"]["dtype"], "F32");
  EXPECT_EQ(h["y"]["data_offsets"], json({6, 22}));
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n, x.data(), 6), 0);
  EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + 6, y.data(), 16), 0);
}

TEST(Safetensors, RoundTripsEveryDtype) {
  std::string dir = test_dir();
  const DType all[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3,
                       DType::kF8E5M2, DType::kI32, DType::kI64, DType::kU8};
  std::vector<std::pair<std::string, Tensor>> ts;
  uint8_t seed = 0;
  for (DType dt : all) ts.push_back({std::string("t_") + dtype_name(dt), filled({3, 5}, dt, seed += 11)});
  ts.push_back({"scalar", filled({}, DType::kF32, 99)});
  ts.push_back({"empty", filled({0, 4}, DType::kBF16, 0)});
  ts.push_back({"odd", filled({7}, DType::kU8, 5)});  // leaves the next tensor misaligned
  ts.push_back({"after_odd", filled({3}, DType::kF32, 6)});
  ASSERT_TRUE(save_safetensors(dir + "/rt.safetensors", ts, {{"format", "pt"}}).is_ok());

  auto f = SafetensorsFile::open(dir + "/rt.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  for (const auto& [name, t] : ts) {
    auto r = (*f)->get(name);
    ASSERT_TRUE(r.is_ok()) << name << ": " << r.status().message();
    EXPECT_EQ(r->dtype(), t.dtype()) << name;
    EXPECT_EQ(r->shape(), t.shape()) << name;
    ASSERT_EQ(r->nbytes(), t.nbytes()) << name;
    EXPECT_EQ(std::memcmp(r->data(), t.data(), t.nbytes()), 0) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r->data()) % dtype_size(t.dtype()), 0u) << name;
  }
}

TEST(Safetensors, ViewsOutliveTheCheckpoint) {
  std::string dir = test_dir();
  Tensor x = filled({64}, DType::kF32, 3);
  ASSERT_TRUE(save_safetensors(dir + "/model.safetensors", {{"x", x}}).is_ok());
  Tensor view;
  {
    auto ck = Checkpoint::open(dir);
    ASSERT_TRUE(ck.is_ok()) << ck.status().message();
    view = ck->get("x").value();
  }
  fs::remove(dir + "/model.safetensors");  // the mapping stays valid after unlink
  EXPECT_EQ(std::memcmp(view.data(), x.data(), x.nbytes()), 0);
  // The private mapping is writable and copy-on-write.
  view.f32()[0] = 42.0f;
  EXPECT_EQ(view.f32()[0], 42.0f);
}

// from_memory: the bytes of a file in a buffer give the same tensors as open() on the file, the views keep the
// buffer alive after the reader is gone, and bad bytes get the same messages (named after `path`).
TEST(Safetensors, FromMemoryMatchesOpen) {
  std::string dir = test_dir();
  const std::string path = dir + "/m.safetensors";
  ASSERT_TRUE(save_safetensors(path, {{"x", filled({3, 5}, DType::kBF16, 7)}, {"y", filled({4}, DType::kF32, 9)}}).is_ok());
  const std::string raw = read_bytes(path);
  auto from_file = SafetensorsFile::open(path);
  ASSERT_TRUE(from_file.is_ok()) << from_file.status().message();
  std::shared_ptr<uint8_t[]> buf(new uint8_t[raw.size()]);
  std::memcpy(buf.get(), raw.data(), raw.size());
  Tensor x;
  {
    auto mem = SafetensorsFile::from_memory("mem.safetensors", buf, buf.get(), raw.size());
    ASSERT_TRUE(mem.is_ok()) << mem.status().message();
    EXPECT_EQ((*mem)->file_name(), "mem.safetensors");
    EXPECT_EQ((*mem)->file_size(), raw.size());
    ASSERT_EQ((*mem)->tensors().size(), (*from_file)->tensors().size());
    for (const char* name : {"x", "y"}) {
      auto a = (*mem)->get(name);
      auto b = (*from_file)->get(name);
      ASSERT_TRUE(a.is_ok() && b.is_ok()) << name;
      EXPECT_EQ(a->shape(), b->shape()) << name;
      EXPECT_EQ(a->dtype(), b->dtype()) << name;
      EXPECT_EQ(std::memcmp(a->data(), b->data(), a->nbytes()), 0) << name;
    }
    x = (*mem)->get("x").value();
  }
  const long owners = buf.use_count();
  EXPECT_GE(owners, 2) << "the view must hold the buffer";
  buf.reset();
  Tensor want = filled({3, 5}, DType::kBF16, 7);
  EXPECT_EQ(std::memcmp(x.data(), want.data(), want.nbytes()), 0);

  std::shared_ptr<uint8_t[]> cut(new uint8_t[3]{1, 2, 3});
  auto bad = SafetensorsFile::from_memory("cut.safetensors", cut, cut.get(), 3);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_ERROR_HAS(bad.status().message(), "cut.safetensors: truncated: 3 bytes");
  std::string lying = raw;
  lying[7] = 1;  // header length >= 2^56: past the end
  auto bad2 = SafetensorsFile::from_memory("lie.safetensors", nullptr, reinterpret_cast<uint8_t*>(lying.data()),
                                           lying.size());
  ASSERT_FALSE(bad2.is_ok());
  EXPECT_ERROR_HAS(bad2.status().message(), "lie.safetensors: header length");
}

TEST(SafetensorsErrors, Truncated) {
  std::string dir = test_dir();
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << "abc";
  std::string m = open_error(dir + "/model.safetensors");
  EXPECT_ERROR_HAS(m, "model.safetensors: truncated");
}

TEST(SafetensorsErrors, HeaderLengthBeyondFile) {
  std::string dir = test_dir();
  write_raw(dir + "/model.safetensors", "{}", "", 4000000000ull);
  EXPECT_ERROR_HAS(open_error(dir + "/model.safetensors"),
                   "model.safetensors: header length 4000000000 exceeds file size 10");
}

TEST(SafetensorsErrors, BadJsonHeader) {
  std::string dir = test_dir();
  write_raw(dir + "/model.safetensors", R"({"a": {"dtype": "F32",, }})", "");
  std::string m = open_error(dir + "/model.safetensors");
  EXPECT_ERROR_HAS(m, "model.safetensors: invalid JSON header");
  EXPECT_ERROR_HAS(m, "column");
  write_raw(dir + "/model.safetensors", "[1, 2]", "");
  EXPECT_ERROR_HAS(open_error(dir + "/model.safetensors"), "header is not a JSON object");
}

TEST(SafetensorsErrors, BadEntries) {
  std::string dir = test_dir();
  std::string p = dir + "/m.safetensors";
  std::string data(16, '\0');
  auto check = [&](const std::string& entry, const std::string& needle) {
    write_raw(p, "{\"x\": " + entry + "}", data);
    EXPECT_ERROR_HAS(open_error(p), needle);
  };
  check(R"({"dtype":"F32","shape":[4],"data_offsets":[0,64]})",
        "m.safetensors: tensor 'x': data_offsets [0, 64] outside data section of 16 bytes");
  check(R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})", "tensor 'x': data_offsets [0, 16] span 16 bytes");
  check(R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", "begin > end");
  check(R"({"dtype":"Q4","shape":[4],"data_offsets":[0,16]})", "tensor 'x': unknown dtype 'Q4'");
  check(R"({"shape":[4],"data_offsets":[0,16]})", "tensor 'x': missing or non-string 'dtype'");
  check(R"({"dtype":"F32","data_offsets":[0,16]})", "tensor 'x': missing or non-array 'shape'");
  check(R"({"dtype":"F32","shape":[-4],"data_offsets":[0,16]})", "is not a list of non-negative integers");
  check(R"({"dtype":"F32","shape":[4]})", "tensor 'x': missing or malformed 'data_offsets'");
  check(R"({"dtype":"F32","shape":[4],"data_offsets":[0]})", "missing or malformed 'data_offsets'");
  check(R"(7)", "tensor 'x': header entry is not a JSON object");

  write_raw(p,
            R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
            data);
  EXPECT_ERROR_HAS(open_error(p), "tensors 'a' and 'b' overlap");
  write_raw(p, R"({"__metadata__": {"k": 3}})", data);
  EXPECT_ERROR_HAS(open_error(p), "__metadata__ value 'k' is not a string");
}

TEST(SafetensorsErrors, DataCutShort) {
  // A valid file cut short: the last tensor's offsets now reach past the end.
  std::string dir = test_dir();
  std::string p = dir + "/model.safetensors";
  ASSERT_TRUE(save_safetensors(p, {{"a", filled({4}, DType::kF32, 1)}, {"b", filled({4}, DType::kF32, 2)}}).is_ok());
  fs::resize_file(p, fs::file_size(p) - 4);
  EXPECT_ERROR_HAS(open_error(p), "tensor 'b': data_offsets [16, 32] outside data section of 28 bytes");
}

TEST(SafetensorsErrors, UnsupportedDtypeIsListedButNotReturned) {
  std::string dir = test_dir();
  std::string p = dir + "/m.safetensors";
  write_raw(p, R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", std::string(16, '\0'));
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_TRUE((*f)->has("d"));
  auto r = (*f)->get("d");
  ASSERT_FALSE(r.is_ok());
  EXPECT_ERROR_HAS(r.status().message(), "m.safetensors: tensor 'd' has unsupported dtype F64");
}

TEST(SafetensorsErrors, WriterRejectsBadInput) {
  std::string dir = test_dir();
  Tensor t = filled({2}, DType::kF32, 1);
  EXPECT_ERROR_HAS(save_safetensors(dir + "/a.safetensors", {{"x", t}, {"x", t}}).message(), "duplicate tensor name 'x'");
  EXPECT_ERROR_HAS(save_safetensors(dir + "/a.safetensors", {{"x", Tensor()}}).message(), "tensor 'x' is undefined");
  EXPECT_ERROR_HAS(save_safetensors(dir + "/missing/a.safetensors", {{"x", t}}).message(), "cannot create");
}

TEST(Checkpoint, SingleFileDirectory) {
  std::string dir = test_dir();
  Tensor a = filled({2, 3}, DType::kBF16, 1);
  ASSERT_TRUE(save_safetensors(dir + "/model.safetensors", {{"w.a", a}, {"w.b", filled({4}, DType::kF32, 2)}}).is_ok());
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"w.a", "w.b"}));
  EXPECT_TRUE(ck->has("w.a"));
  EXPECT_FALSE(ck->has("w.c"));
  EXPECT_EQ(ck->file_of("w.a"), "model.safetensors");
  EXPECT_EQ(ck->file_of("w.c"), "");
  ASSERT_NE(ck->info("w.a"), nullptr);
  EXPECT_EQ(ck->info("w.a")->shape, (Shape{2, 3}));
  auto t = ck->get("w.a");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(std::memcmp(t->data(), a.data(), a.nbytes()), 0);
  auto missing = ck->get("w.c");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_ERROR_HAS(missing.status().message(), "tensor 'w.c' not found in " + dir);
}

TEST(Checkpoint, ShardedWithIndex) {
  std::string dir = test_dir();
  Tensor a = filled({8}, DType::kF32, 1), b = filled({3, 3}, DType::kBF16, 2);
  ASSERT_TRUE(save_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", a}}).is_ok());
  ASSERT_TRUE(save_safetensors(dir + "/model-00002-of-00002.safetensors", {{"b", b}}).is_ok());
  // A stray file not named by the index is ignored.
  ASSERT_TRUE(save_safetensors(dir + "/extra.safetensors", {{"a", a}}).is_ok());
  json idx = {{"metadata", {{"total_size", 50}}},
              {"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir + "/model.safetensors.index.json") << idx.dump();
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ck->file_of("a"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(ck->file_of("b"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(ck->files().size(), 2u);
  auto tb = ck->get("b");
  ASSERT_TRUE(tb.is_ok());
  EXPECT_EQ(std::memcmp(tb->data(), b.data(), b.nbytes()), 0);
}

TEST(CheckpointErrors, IndexPointsToMissingFile) {
  std::string dir = test_dir();
  ASSERT_TRUE(save_safetensors(dir + "/model-00001-of-00002.safetensors", {{"a", filled({8}, DType::kF32, 1)}}).is_ok());
  json idx = {{"weight_map", {{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir + "/model.safetensors.index.json") << idx.dump();
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(),
                   "model.safetensors.index.json: tensor 'b' maps to missing file 'model-00002-of-00002.safetensors'");
}

TEST(CheckpointErrors, IndexNamesTensorAbsentFromItsFile) {
  std::string dir = test_dir();
  ASSERT_TRUE(save_safetensors(dir + "/s1.safetensors", {{"a", filled({8}, DType::kF32, 1)}}).is_ok());
  json idx = {{"weight_map", {{"a", "s1.safetensors"}, {"zz", "s1.safetensors"}}}};
  std::ofstream(dir + "/model.safetensors.index.json") << idx.dump();
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "tensor 'zz' is not in s1.safetensors");
}

TEST(CheckpointErrors, BadIndexJson) {
  std::string dir = test_dir();
  std::ofstream(dir + "/model.safetensors.index.json") << "{\"weight_map\": {\"a\": }";
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "model.safetensors.index.json: invalid JSON");
  std::ofstream(dir + "/model.safetensors.index.json", std::ios::trunc) << "{\"metadata\": {}}";
  ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "missing 'weight_map'");
}

TEST(CheckpointErrors, ShardErrorsNameTheShard) {
  std::string dir = test_dir();
  write_raw(dir + "/model-00002-of-00002.safetensors", "{", "");
  json idx = {{"weight_map", {{"b", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir + "/model.safetensors.index.json") << idx.dump();
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "model-00002-of-00002.safetensors: invalid JSON header");
}

TEST(CheckpointErrors, EmptyOrMissingDirectory) {
  std::string dir = test_dir();
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "no *.safetensors files");
  ck = Checkpoint::open(dir + "/nope");
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "nope: not a directory");
}

TEST(CheckpointErrors, DuplicateTensorAcrossFiles) {
  std::string dir = test_dir();
  ASSERT_TRUE(save_safetensors(dir + "/a.safetensors", {{"w", filled({2}, DType::kF32, 1)}}).is_ok());
  ASSERT_TRUE(save_safetensors(dir + "/b.safetensors", {{"w", filled({2}, DType::kF32, 1)}}).is_ok());
  auto ck = Checkpoint::open(dir);
  ASSERT_FALSE(ck.is_ok());
  EXPECT_ERROR_HAS(ck.status().message(), "tensor 'w' is in both a.safetensors and b.safetensors");
}

}  // namespace
}  // namespace ds
