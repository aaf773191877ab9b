// dserve_tokenizer_bench: single-thread encode throughput (MB/s) of the tokenizer on a corpus, a JSON
// list of documents (default: the strings of tests/data/tokenizer_golden.json). The corpus of
// BENCHMARKS.md is made by scripts/make_tokenizer_golden.py --bench-corpus FILE --bench-mb 8.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: dserve_tokenizer_bench --tokenizer-path DIR [--corpus FILE.json] [--repeat N] [--no-cache]\n"
               "  FILE.json: a list of strings, or the golden file (its \"encode\"[*].text)\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, corpus_path;
  int repeat = 3;
  bool no_cache = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tokenizer-path" && i + 1 < argc) dir = argv[++i];
    else if (a == "--corpus" && i + 1 < argc) corpus_path = argv[++i];
    else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-cache") no_cache = true;
    else return usage();
  }
  if (dir.empty()) return usage();
  if (corpus_path.empty()) corpus_path = std::string(DSERVE_SOURCE_DIR) + "/tests/data/tokenizer_golden.json";

  auto t_load = std::chrono::steady_clock::now();
  auto tok = ds::Tokenizer::load(dir);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "dserve_tokenizer_bench: %s\n", tok.status().message().c_str());
    return 1;
  }
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  if (no_cache) tok->set_cache_capacity(0);

  std::ifstream f(corpus_path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "dserve_tokenizer_bench: cannot read %s\n", corpus_path.c_str());
    return 1;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  std::vector<std::string> docs;
  if (j.is_array()) {
    for (const auto& d : j)
      if (d.is_string()) docs.push_back(d.get<std::string>());
  } else if (j.is_object() && j.contains("encode")) {
    for (const auto& e : j["encode"]) docs.push_back(e["text"].get<std::string>());
  }
  if (docs.empty()) {
    std::fprintf(stderr, "dserve_tokenizer_bench: %s holds no strings\n", corpus_path.c_str());
    return 1;
  }
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();

  double best = 1e30;
  size_t tokens = 0;
  for (int r = 0; r < repeat; ++r) {
    size_t n = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& d : docs) {
      auto ids = tok->encode(d, false);
      if (!ids.is_ok()) {
        std::fprintf(stderr, "dserve_tokenizer_bench: %s\n", ids.status().message().c_str());
        return 1;
      }
      n += ids->size();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    tokens = n;
  }
  std::printf("dserve tokenizer encode: %zu docs, %zu bytes, %zu tokens, best of %d %.3f s, %.2f MB/s "
              "(1 thread%s; load %.2f s)\n",
              docs.size(), bytes, tokens, repeat, best, bytes / best / 1e6, no_cache ? ", no cache" : "", load_s);
  return 0;
}
