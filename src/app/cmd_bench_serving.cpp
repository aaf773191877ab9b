// `dserve bench-serving`: the flags of sglang.bench_serving mapped onto ds::bench::run_bench_serving
// (src/bench), which prints SGLang's "Serving Benchmark Result" block.
#include <cstdio>
#include <limits>

#include "app/commands.h"
#include "app/flags.h"
#include "bench/bench_serving.h"

namespace ds {

int run_bench_serving(int argc, char** argv) {
  Flags f;
  f.add_string("backend", "sglang", "sglang (/generate), sglang-oai, vllm (/v1/completions), sglang-oai-chat, vllm-chat");
  f.add_string("base-url", "", "server base URL, e.g. http://127.0.0.1:30000 (overrides --host/--port)");
  f.add_string("host", "127.0.0.1", "server host");
  f.add_int("port", 0, "server port (0: 30000 for sglang backends, 8000 for vllm)");
  f.add_string("model", "", "the \"model\" of OpenAI requests (default: the first id of GET /v1/models)");
  f.add_string("tokenizer", "", "directory with tokenizer.json, to build text prompts and retokenize outputs");
  f.add_string("api-key", "", "sent as 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY)");
  f.add_string("dataset-name", "sharegpt", "sharegpt, random, random-ids or generated-shared-prefix");
  f.add_string("dataset-path", "", "ShareGPT JSON file (sharegpt; optional prompt source for random)");
  f.add_int("num-prompts", 1000, "number of requests");
  f.add_int("sharegpt-output-len", 0, "output length of every sharegpt request (default: the reply's length)");
  f.add_int("sharegpt-context-len", 0, "drop sharegpt requests whose prompt + output exceed this");
  f.add_int("random-input-len", 1024, "input tokens per request (random, random-ids)");
  f.add_int("random-output-len", 1024, "output tokens per request (random, random-ids)");
  f.add_double("random-range-ratio", 0.0, "lengths are uniform in [len * ratio, len] (at least 1)");
  f.add_int("random-ids-vocab-size", 0, "random-ids without --tokenizer: draw ids below this");
  f.add_int("gsp-num-groups", 64, "generated-shared-prefix: number of system prompts");
  f.add_int("gsp-prompts-per-group", 16, "generated-shared-prefix: questions per system prompt");
  f.add_int("gsp-system-prompt-len", 2048, "generated-shared-prefix: system prompt tokens");
  f.add_int("gsp-question-len", 128, "generated-shared-prefix: question tokens");
  f.add_int("gsp-output-len", 256, "generated-shared-prefix: output tokens");
  f.add_bool("tokenize-prompt", "send token ids instead of text (sglang/completions backends)");
  f.add_double("request-rate", std::numeric_limits<double>::infinity(),
               "requests per second, Poisson arrivals; inf sends all at once");
  f.add_int("max-concurrency", 0, "most requests in flight at once (0: not set)");
  f.add_int("warmup-requests", 1, "requests sent (at once) before the timed run");
  f.add_bool("disable-stream", "ask for whole responses (TTFT = latency)");
  f.add_bool("disable-ignore-eos", "let requests stop at EOS (default: ignore_eos true)");
  f.add_bool("return-logprob", "ask /generate for output logprobs");
  f.add_bool("flush-cache", "POST /flush_cache after the warmup");
  f.add_bool("disable-tqdm", "no progress display");
  f.add_int("seed", 1, "random seed of the dataset and the arrivals");
  f.add_string("output-file", "", "append one JSON line with all metrics (SGLang's field names)");
  f.add_bool("output-details", "add per-request lists (lengths, ttfts, itls, texts, errors) to --output-file");
  f.add_string("extra-request-body", "", "JSON object merged into every request body");
  f.add_double("timeout", 6 * 3600.0, "seconds to wait for the server at each step of a request");
  f.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve bench-serving: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = f.parse(argc, argv); !st) return fail(st);
  if (f.get_bool("help")) {
    std::printf("%s", f.usage("bench-serving").c_str());
    return 0;
  }
  bench::BenchServingOptions o;
  o.backend = f.get_string("backend");
  o.base_url = f.get_string("base-url");
  o.host = f.get_string("host");
  o.port = f.get_int("port");
  o.model = f.get_string("model");
  o.tokenizer = f.get_string("tokenizer");
  o.api_key = f.get_string("api-key");
  bench::DatasetOptions& d = o.dataset;
  d.name = f.get_string("dataset-name");
  d.path = f.get_string("dataset-path");
  d.num_prompts = f.get_int("num-prompts");
  if (f.was_set("sharegpt-output-len")) d.sharegpt_output_len = f.get_int("sharegpt-output-len");
  if (f.was_set("sharegpt-context-len")) d.sharegpt_context_len = f.get_int("sharegpt-context-len");
  d.random_input_len = f.get_int("random-input-len");
  d.random_output_len = f.get_int("random-output-len");
  d.random_range_ratio = f.get_double("random-range-ratio");
  d.random_ids_vocab_size = f.get_int("random-ids-vocab-size");
  d.gsp_num_groups = f.get_int("gsp-num-groups");
  d.gsp_prompts_per_group = f.get_int("gsp-prompts-per-group");
  d.gsp_system_prompt_len = f.get_int("gsp-system-prompt-len");
  d.gsp_question_len = f.get_int("gsp-question-len");
  d.gsp_output_len = f.get_int("gsp-output-len");
  d.tokenize_prompt = f.get_bool("tokenize-prompt");
  o.request_rate = f.get_double("request-rate");
  if (f.get_int("max-concurrency") > 0) o.max_concurrency = f.get_int("max-concurrency");
  if (f.get_int("max-concurrency") < 0) return fail(error("--max-concurrency must not be negative"));
  o.warmup_requests = f.get_int("warmup-requests");
  o.disable_stream = f.get_bool("disable-stream");
  o.disable_ignore_eos = f.get_bool("disable-ignore-eos");
  o.return_logprob = f.get_bool("return-logprob");
  o.flush_cache = f.get_bool("flush-cache");
  o.disable_tqdm = f.get_bool("disable-tqdm");
  o.seed = static_cast<uint64_t>(f.get_int("seed"));
  o.output_file = f.get_string("output-file");
  o.output_details = f.get_bool("output-details");
  o.extra_request_body = f.get_string("extra-request-body");
  o.timeout_s = f.get_double("timeout");
  if (!(o.timeout_s > 0)) return fail(error("--timeout must be positive"));
  auto r = bench::run_bench_serving(o);
  if (!r) return fail(r.status());
  if (r->metrics.completed == 0) return fail(error("no request succeeded"));
  return 0;
}

}  // namespace ds
