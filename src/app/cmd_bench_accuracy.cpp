// `dserve bench-accuracy`: GSM8K-style few-shot accuracy against a running server (SGLang's
// benchmark/gsm8k/bench_sglang.py flags and output lines).
#include <cstdio>

#include "app/commands.h"
#include "app/flags.h"
#include "bench/accuracy.h"

namespace ds {

int run_bench_accuracy(int argc, char** argv) {
  Flags f;
  f.add_string("data-path", "", "GSM8K-format JSONL: {\"question\": ..., \"answer\": \"... #### N\"} per line");
  f.add_int("num-shots", 5, "few-shot examples (the first lines of the file)");
  f.add_int("num-questions", 200, "questions asked (from the start of the file)");
  f.add_int("parallel", 64, "requests in flight");
  f.add_int("max-new-tokens", 512, "generation limit per question");
  f.add_string("host", "127.0.0.1", "server host");
  f.add_int("port", 30000, "server port");
  f.add_string("base-url", "", "server base URL (overrides --host/--port)");
  f.add_string("api-key", "", "sent as 'Authorization: Bearer KEY'");
  f.add_string("result-file", "", "append one JSON line with the results");
  f.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve bench-accuracy: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = f.parse(argc, argv); !st) return fail(st);
  if (f.get_bool("help")) {
    std::printf("%s", f.usage("bench-accuracy").c_str());
    return 0;
  }
  if (f.get_string("data-path").empty()) return fail(error("--data-path is required"));
  bench::AccuracyOptions o;
  o.data_path = f.get_string("data-path");
  o.num_shots = static_cast<int>(f.get_int("num-shots"));
  o.num_questions = static_cast<int>(f.get_int("num-questions"));
  o.parallel = static_cast<int>(f.get_int("parallel"));
  o.max_new_tokens = static_cast<int>(f.get_int("max-new-tokens"));
  o.base_url = f.get_string("base-url").empty()
                   ? "http://" + f.get_string("host") + ":" + std::to_string(f.get_int("port"))
                   : f.get_string("base-url");
  o.api_key = f.get_string("api-key");
  o.result_file = f.get_string("result-file");
  auto r = bench::run_bench_accuracy(o);
  if (!r) return fail(r.status());
  return r->num_failed == r->num_questions ? 1 : 0;
}

}  // namespace ds
