// The per-GPU dispatch tables (`dserve tune-gemm` / `tune-moe` JSON) as files: where one is found and how it is
// loaded. Shared by the CUDA ops and the benchmarks, so both take the same table.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/status.h"

namespace ds {

// The file named by `env`, else the committed configs/<subdir>/<GPU name>.json next to the binary's parent
// directory, when there is one; "" when neither.
std::string tuning_path(const char* env, const char* subdir, int device_index);

// An unreadable or invalid table is an operator error: say so and stop rather than run a different dispatch.
template <class T>
T load_tuning(const std::string& path, Result<T> (*parse)(const std::string&), const char* what) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  Result<T> t = f ? parse(text.str()) : Result<T>(error("cannot read the file"));
  if (!t.is_ok()) {
    std::fprintf(stderr, "dserve: %s table %s: %s\n", what, path.c_str(), t.status().message().c_str());
    std::exit(1);
  }
  return std::move(t).value();
}

}  // namespace ds
