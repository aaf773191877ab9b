// `dserve serve`: the HTTP server (SGLang/OpenAI API) over the batch engine. Listens first (answering 503
// while the model loads), then loads the tokenizer and the engine, then prints where it is ready.
#include <csignal>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "app/commands.h"
#include "app/flags.h"
#include "app/model_setup.h"
#include "core/logging.h"
#include "http/api_server.h"
#include "http/fake_engine.h"
#include "http/http_server.h"
#include "model/tp_shard.h"
#include "runner/batch_engine.h"
#include "text/tokenizer.h"

namespace ds {

namespace {

void add_serve_flags(Flags& f) {
  f.add_string("model-path", "", "Hugging Face checkpoint directory (config.json + *.safetensors)");
  f.add_string("tokenizer-path", "", "directory with tokenizer.json (default: --model-path)");
  f.add_string("host", "127.0.0.1", "address to listen on");
  f.add_int("port", 30000, "port to listen on (0: any free port)");
  f.add_string("api-key", "", "require 'Authorization: Bearer KEY' on every route except /health");
  f.add_string("served-model-name", "", "model name in the OpenAI API (default: --model-path)");
  f.add_bool("skip-tokenizer-init", "no tokenizer: requests carry input_ids, responses output_ids");
  f.add_bool("enable-metrics", "serve Prometheus metrics at /metrics");
  f.add_string("reasoning-parser", "", "split reasoning_content in chat output: deepseek-r1 or deepseek-v3");
  f.add_string("tool-call-parser", "", "parse tool calls in chat output: deepseekv3, deepseekv31 or deepseekv32");
  f.add_string("chat-template", "", "chat format (v2, v3, r1, v31, v32exp, v32); default: detected from the tokenizer");
  f.add_int("page-size", 64, "KV cache page size in tokens");
  f.add_int("max-total-tokens", 0, "KV cache capacity in tokens (0: derived from memory)");
  f.add_double("mem-fraction-static", 0, "CUDA: fraction of GPU memory for weights + KV pool (0: SGLang's default)");
  f.add_int("chunked-prefill-size", 8192, "most prompt tokens prefilled per step");
  f.add_int("max-prefill-tokens", 16384,
            "with --chunked-prefill-size -1: most prompt tokens a step (a longer prompt goes in pieces of it)");
  f.add_int("max-running-requests", 256, "most requests decoding at once");
  f.add_string("schedule-policy", "fcfs", "waiting-queue order: fcfs or lpm");
  f.add_bool("disable-radix-cache", "do not reuse KV of shared prompt prefixes");
  f.add_string("radix-eviction-policy", "lru", "which cached prefixes go first when pages run out: lru (the only one)");
  f.add_bool("enable-mixed-chunk",
             "accepted for SGLang command lines: dserve always runs decodes and prefill chunks in one step");
  f.add_int("context-length", 0, "longest prompt + output (0: the model's max_position_embeddings)");
  f.add_string("device", "auto", "cpu, cuda or auto (cuda when this build has CUDA and a GPU is visible)");
  f.add_string("load-format", "auto", "auto (safetensors) or dummy (seeded random weights)");
  f.add_string("quantization", "", "fp8: block-quantize a BF16 checkpoint's linears at load time");
  f.add_string("kv-cache-dtype", "auto", "latent cache storage: auto, bf16, fp8_e4m3 or fp8_e5m2");
  f.add_bool("disable-shared-experts-fusion",
             "run the shared experts apart, not as extra routed experts (the default; DSERVE_SHARED_EXPERTS_FUSION=1: fused)");
  f.add_bool("disable-chunked-prefix-cache",
             "MHA-form prefill over the whole context in one pass instead of chunks of at most 1 GiB of expanded keys "
             "and values merged by log-sum-exp");
  f.add_bool("disable-cuda-graph", "decode eagerly instead of replaying CUDA graphs (--device cuda)");
  f.add_bool("disable-overlap-schedule", "complete each step before planning the next (no step planned ahead)");
  f.add_bool("enable-return-hidden-states",
             "requests may set return_hidden_states: meta_info.hidden_states (the final-normed hidden state of every "
             "prompt token, then one a decode step; their prompts are computed whole, not from the prefix cache)");
  f.add_bool("enable-return-routed-experts",
             "requests may set return_routed_experts: meta_info.routed_experts (base64 of int32 [tokens - 1, layers, "
             "top_k]: every fed token's routed experts, for RL routing replay)");
  f.add_int("cuda-graph-max-bs", 0, "largest decode batch captured in a CUDA graph (0: default from GPU memory)");
  f.add_int_list("cuda-graph-bs", "",
                 "the decode batch sizes captured in CUDA graphs (a list: --cuda-graph-bs 1 2 4 8; as SGLang, its "
                 "largest replaces --cuda-graph-max-bs; default: SGLang's list up to --cuda-graph-max-bs)");
  f.add_int("seed", 0, "random seed (dummy weights; base of per-request sampling seeds)");
  f.add_int("max-queued-requests", 0, "answer 503 while this many requests wait in the engine (0: no limit)");
  f.add_int("request-timeout", 0,
            "seconds a generation request may run; then it is aborted with an error and its pages freed (0: no limit)");
  f.add_string("sampling-defaults", "model",
               "chat requests' unset temperature / top_p / top_k / min_p / repetition_penalty: model (the checkpoint's "
               "generation_config.json) or openai (1, 1, off, 0, 1)");
  f.add_string("preferred-sampling-params", "",
               "JSON object of sampling_params every /generate request takes where it gives none of that key");
  f.add_bool("log-requests", "log one line a finished request (ids, token counts, finish reason, latency, ...)");
  f.add_int("log-requests-level", 2,
            "with --log-requests: 0 counts only, 1 + sampling, 2 + text cut to 2048 bytes, 3 + the whole text");
  f.add_int("stream-interval", 1,
            "streamed responses send a chunk for the first token, then every this many tokens, and at the end");
  f.add_bool("incremental-streaming-output",
             "/generate stream chunks carry only the text and output_ids new since the previous chunk");
  f.add_int("io-threads", 4, "HTTP I/O threads");
  f.add_int("max-request-bytes", 32 << 20, "largest request body accepted (413 beyond)");
  f.add_bool("fake-engine", "testing: a deterministic fake engine instead of the model (no weights needed)");
  f.add_int("fake-vocab-size", 0, "testing: --fake-engine vocabulary (default: the tokenizer's, else 32000)");
  f.add_int("fake-step-us", 2000, "testing: --fake-engine microseconds per step");
  f.add_int("fake-output-vocab", 0, "testing: --fake-engine outputs ids below this (default: the vocabulary)");
  f.add_string("fake-output", "", "testing: --fake-engine outputs this text first (tokenized), then EOS");
  f.add_bool("help", "show flags");
  add_sglang_compat_flags(f);
}

// Without --model-path, serve the trained demo model bundled in the repository (models/dserve-demo): looked
// up from the working directory first, then next to the executable's directory (build/dserve -> ../models).
std::string bundled_model_path() {
  namespace fs = std::filesystem;
  const fs::path rel = fs::path("models") / "dserve-demo";
  std::vector<fs::path> candidates = {rel};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.insert(candidates.end(), {exe.parent_path().parent_path() / rel, exe.parent_path() / rel});
  for (const auto& c : candidates)
    if (fs::is_regular_file(c / "config.json", ec)) return c.lexically_normal().string();
  return "";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int run_serve(int argc, char** argv) {
  Flags flags;
  add_serve_flags(flags);
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve serve: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = flags.parse(argc, argv); !st) return fail(st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("serve").c_str());
    return 0;
  }
  const bool fake = flags.get_bool("fake-engine");
  std::string model_path = flags.get_string("model-path");
  if (model_path.empty() && !fake) {
    model_path = bundled_model_path();
    if (model_path.empty()) return fail(error("--model-path is required (the bundled models/dserve-demo was not found)"));
    std::fprintf(stderr, "dserve serve: no --model-path, serving the bundled demo model %s\n", model_path.c_str());
  }
  const bool skip_tok = flags.get_bool("skip-tokenizer-init");
  std::string tokenizer_path = flags.get_string("tokenizer-path");
  if (tokenizer_path.empty()) tokenizer_path = model_path;
  if (!skip_tok && tokenizer_path.empty()) return fail(error("--tokenizer-path (or --model-path) is required unless --skip-tokenizer-init"));
  const int64_t port = flags.get_int("port");
  if (port < 0 || port > 65535) return fail(error("--port must be in [0, 65535], got ", port));
  const int64_t io_threads = flags.get_int("io-threads");
  if (io_threads < 1 || io_threads > 256) return fail(error("--io-threads must be in [1, 256], got ", io_threads));
  const int64_t max_body = flags.get_int("max-request-bytes");
  if (max_body < 1024) return fail(error("--max-request-bytes must be at least 1024, got ", max_body));
  for (const char* name : {"page-size", "max-running-requests", "max-prefill-tokens", "stream-interval"})
    if (flags.get_int(name) < 1 || flags.get_int(name) > (int64_t{1} << 30))
      return fail(error("--", name, " must be a positive integer, got ", flags.get_int(name)));
  // As SGLang: -1 turns chunked prefill off (a prompt of up to --max-prefill-tokens is prefilled in one step).
  if (Status st = check_chunked_prefill_flag(flags); !st) return fail(st);
  for (const char* name : {"max-total-tokens", "context-length", "max-queued-requests", "request-timeout",
                           "cuda-graph-max-bs"})
    if (flags.get_int(name) < 0) return fail(error("--", name, " must be >= 0, got ", flags.get_int(name)));
  if (Status st = check_mem_fraction_flag(flags); !st) return fail(st);
  if (Status st = check_parallel_flags(flags, /*tp_on_cpu=*/true); !st) return fail(st);
  if (Status st = apply_log_level_flag(flags); !st) return fail(st);
  // Parallel sizes the model cannot be sharded by: refused before the server starts (the engine checks again).
  if (const int64_t tp = flags.get_int("tp-size"); tp > 1 && !fake)
    if (Result<ModelConfig> cfg = load_config_path(model_path); cfg.is_ok())
      if (Status st = check_tensor_parallel(*cfg, static_cast<int>(tp), flags.get_int("ep-size") > 1,
                                            flags.get_bool("enable-dp-attention"));
          !st)
        return fail(st);
  Result<SpeculativeSettings> spec_flags = speculative_from_flags(flags, model_path);
  if (!spec_flags) return fail(spec_flags.status());
  const SpeculativeSettings spec = *spec_flags;
  const int32_t spec_steps = spec.steps;
  // As SGLang: speculative decoding without --max-running-requests runs at most 48 requests.
  const int64_t max_running = spec_steps > 0 && !flags.was_set("max-running-requests")
                                  ? 48
                                  : flags.get_int("max-running-requests");
  if (const std::string p = flags.get_string("radix-eviction-policy"); p != "lru")
    return fail(error("--radix-eviction-policy ", p, ": only lru is built (least recently used prefixes go first)"));
  const std::vector<int64_t> graph_bs = flags.get_int_list("cuda-graph-bs");
  for (int64_t b : graph_bs)
    if (b < 1 || b > (int64_t{1} << 30)) return fail(error("--cuda-graph-bs values must be positive integers, got ", b));
  // As SGLang: a --cuda-graph-bs list's largest size is the graphs' max batch.
  const int64_t graph_max_bs =
      graph_bs.empty() ? flags.get_int("cuda-graph-max-bs") : *std::max_element(graph_bs.begin(), graph_bs.end());

  if (flags.get_int("request-timeout") > 31536000)
    return fail(error("--request-timeout must be at most 31536000 seconds, got ", flags.get_int("request-timeout")));
  ApiServerOptions ao;
  ao.model_path = model_path;
  ao.tokenizer_path = tokenizer_path;
  ao.served_model_name = flags.get_string("served-model-name");
  if (ao.served_model_name.empty()) ao.served_model_name = model_path.empty() ? "fake" : model_path;
  ao.api_key = flags.get_string("api-key");
  ao.enable_metrics = flags.get_bool("enable-metrics");
  ao.reasoning_parser = flags.get_string("reasoning-parser");
  ao.tool_call_parser = flags.get_string("tool-call-parser");
  ao.chat_template = flags.get_string("chat-template");
  ao.seed = static_cast<uint64_t>(flags.get_int("seed"));
  ao.max_queued_requests = flags.get_int("max-queued-requests");
  ao.request_timeout_ms = flags.get_int("request-timeout") * 1000;
  ao.stream_interval = flags.get_int("stream-interval");
  if (const int64_t l = flags.get_int("log-requests-level"); l < 0 || l > 3)
    return fail(error("--log-requests-level must be 0, 1, 2 or 3, got ", l));
  ao.log_requests_level = flags.get_bool("log-requests") ? static_cast<int>(flags.get_int("log-requests-level")) : -1;
  if (const std::string p = flags.get_string("preferred-sampling-params"); !p.empty()) {
    Result<Json> j = parse_preferred_sampling_params(p);
    if (!j) return fail(j.status());
    ao.preferred_sampling_params = *j;
  }
  const std::string sampling_defaults = flags.get_string("sampling-defaults");
  if (sampling_defaults != "model" && sampling_defaults != "openai")
    return fail(error("--sampling-defaults must be model or openai, got '", sampling_defaults, "'"));
  if (const std::string gen = model_path + "/generation_config.json";
      sampling_defaults == "model" && !model_path.empty() && std::filesystem::is_regular_file(gen)) {
    std::ifstream in(gen);
    std::stringstream text;
    text << in.rdbuf();
    Result<SamplingDefaults> d = parse_sampling_defaults(text.str(), gen);
    if (!d) return fail(error(d.status().message(), " (--sampling-defaults openai ignores the file)"));
    ao.chat_sampling_defaults = *d;
    if (!d->empty())
      std::fprintf(stderr, "dserve serve: chat requests default to %s's sampling: %s\n", gen.c_str(),
                   d->describe().c_str());
  }
  ao.incremental_streaming_output = flags.get_bool("incremental-streaming-output");
  {
    auto& a = ao.server_args;
    a["model_path"] = model_path;
    a["tokenizer_path"] = tokenizer_path;
    a["served_model_name"] = ao.served_model_name;
    a["host"] = flags.get_string("host");
    a["port"] = port;
    a["skip_tokenizer_init"] = skip_tok;
    a["enable_metrics"] = ao.enable_metrics;
    a["reasoning_parser"] = ao.reasoning_parser.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ao.reasoning_parser);
    a["tool_call_parser"] = ao.tool_call_parser.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ao.tool_call_parser);
    a["chat_template"] = ao.chat_template.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(ao.chat_template);
    a["page_size"] = flags.get_int("page-size");
    a["max_total_tokens"] = flags.get_int("max-total-tokens");
    a["chunked_prefill_size"] = flags.get_int("chunked-prefill-size");
    a["max_running_requests"] = max_running;
    a["max_prefill_tokens"] = flags.get_int("max-prefill-tokens");
    a["schedule_policy"] = flags.get_string("schedule-policy");
    a["disable_radix_cache"] = flags.get_bool("disable-radix-cache");
    a["context_length"] = flags.get_int("context-length");
    a["device"] = resolve_device(flags.get_string("device"));
    a["load_format"] = flags.get_string("load-format");
    a["quantization"] = flags.get_string("quantization");
    a["kv_cache_dtype"] = flags.get_string("kv-cache-dtype");
    a["disable_shared_experts_fusion"] = flags.get_bool("disable-shared-experts-fusion");
    a["disable_chunked_prefix_cache"] = flags.get_bool("disable-chunked-prefix-cache");
    a["enable_return_hidden_states"] = flags.get_bool("enable-return-hidden-states");
    a["enable_return_routed_experts"] = flags.get_bool("enable-return-routed-experts");
    if (const std::string m = flags.get_string("expert-distribution-recorder-mode"); !m.empty())
      a["expert_distribution_recorder_mode"] = m;
    else
      a["expert_distribution_recorder_mode"] = nullptr;
    a["random_seed"] = flags.get_int("seed");
    a["tp_size"] = flags.get_int("tp-size");
    a["dp_size"] = flags.get_int("dp-size");
    a["pp_size"] = flags.get_int("pp-size");
    a["ep_size"] = flags.get_int("ep-size");
    a["enable_dp_attention"] = flags.get_bool("enable-dp-attention");
    a["request_timeout"] = flags.get_int("request-timeout");
    a["stream_interval"] = ao.stream_interval;
    a["sampling_defaults"] = sampling_defaults;
    a["preferred_sampling_params"] =
        ao.preferred_sampling_params.empty() ? nlohmann::ordered_json(nullptr) : ao.preferred_sampling_params;
    a["incremental_streaming_output"] = ao.incremental_streaming_output;
    a["cuda_graph_max_bs"] = graph_max_bs;
    a["cuda_graph_bs"] = graph_bs.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(graph_bs);
    a["api_key_set"] = !ao.api_key.empty();
    a["fake_engine"] = fake;
    a["speculative_algorithm"] = spec_steps > 0 ? nlohmann::ordered_json(spec.algorithm) : nlohmann::ordered_json(nullptr);
    a["speculative_num_steps"] = spec_steps > 0 ? nlohmann::ordered_json(spec_steps) : nlohmann::ordered_json(nullptr);
    a["speculative_eagle_topk"] = spec_steps > 0 ? nlohmann::ordered_json(1) : nlohmann::ordered_json(nullptr);
    a["speculative_num_draft_tokens"] =
        spec_steps > 0 ? nlohmann::ordered_json(spec_steps + 1) : nlohmann::ordered_json(nullptr);
  }
  ApiServer api(ao);
  if (Status st = api.init(); !st) return fail(st);

  HttpServerOptions ho;
  ho.host = flags.get_string("host");
  ho.port = static_cast<int>(port);
  ho.io_threads = static_cast<int>(io_threads);
  ho.max_body_bytes = static_cast<size_t>(max_body);
  // Declared before the engine: destroyed after it (see HttpServer::stop()).
  HttpServer server(ho, [&api](HttpRequest req, std::shared_ptr<HttpResponder> out) {
    api.handle(std::move(req), std::move(out));
  });
  if (Status st = server.start(); !st) return fail(st);
  const std::string url = "http://" + (ho.host.find(':') != std::string::npos ? "[" + ho.host + "]" : ho.host) + ":" +
                          std::to_string(server.port());
  std::fprintf(stderr, "dserve serve: listening on %s (503 until the model is loaded)\n", url.c_str());

  // Load in a thread so that SIGINT/SIGTERM during a long load still ends the process.
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Engine> engine;
  Status load_status;
  std::atomic<bool> loaded{false};
  std::atomic<bool> engine_failed{false};  // an engine step failed: shut down and exit non-zero
  std::thread loader([&] {
    if (!skip_tok) {
      std::fprintf(stderr, "dserve serve: loading the tokenizer from %s\n", tokenizer_path.c_str());
      auto t = Tokenizer::load(tokenizer_path);
      if (!t) {
        load_status = error("--tokenizer-path: ", t.status().message());
        server.stop();
        return;
      }
      tokenizer = std::make_unique<Tokenizer>(std::move(t.value()));
    }
    if (fake) {
      FakeEngineOptions fo;
      fo.vocab_size = flags.get_int("fake-vocab-size");
      if (fo.vocab_size <= 0) fo.vocab_size = tokenizer ? tokenizer->vocab_size() : 32000;
      if (tokenizer && tokenizer->eos_id()) fo.eos_token_ids = {*tokenizer->eos_id()};
      if (flags.get_int("context-length") > 0) fo.context_length = flags.get_int("context-length");
      if (flags.get_int("max-total-tokens") > 0) fo.max_total_tokens = flags.get_int("max-total-tokens");
      fo.step_us = static_cast<int>(flags.get_int("fake-step-us"));
      fo.output_vocab = flags.get_int("fake-output-vocab");
      fo.expert_recorder = !flags.get_string("expert-distribution-recorder-mode").empty();
      fo.return_hidden_states = flags.get_bool("enable-return-hidden-states");
      fo.return_routed_experts = flags.get_bool("enable-return-routed-experts");
      if (const std::string script = flags.get_string("fake-output"); !script.empty()) {
        if (!tokenizer) {
          load_status = error("--fake-output needs a tokenizer");
          server.stop();
          return;
        }
        auto ids = tokenizer->encode(script, false);
        if (!ids) {
          load_status = error("--fake-output: ", ids.status().message());
          server.stop();
          return;
        }
        fo.script = ids.value();
        if (!fo.eos_token_ids.empty()) fo.script.push_back(fo.eos_token_ids[0]);
      }
      engine = std::make_unique<FakeEngine>(fo);
      std::fprintf(stderr, "dserve serve: fake engine (vocab %lld)\n", static_cast<long long>(fo.vocab_size));
    } else {
      BatchEngineOptions eo;
      eo.model_path = model_path;
      eo.device = resolve_device(flags.get_string("device"));
      eo.load_format = flags.get_string("load-format");
      eo.seed = static_cast<uint64_t>(flags.get_int("seed"));
      eo.page_size = static_cast<int32_t>(flags.get_int("page-size"));
      eo.max_total_tokens = flags.get_int("max-total-tokens");
      eo.mem_fraction_static = flags.get_double("mem-fraction-static");
      eo.chunked_prefill_size = static_cast<int32_t>(flags.get_int("chunked-prefill-size"));
      eo.max_running_requests = static_cast<int32_t>(max_running);
      eo.speculative_num_steps = spec_steps;
      eo.speculative_ngram = spec.ngram;
      eo.ngram = spec.ngram_options;
      eo.tp_size = static_cast<int32_t>(flags.get_int("tp-size"));
      eo.base_gpu_id = static_cast<int32_t>(flags.get_int("base-gpu-id"));
      eo.gpu_id_step = static_cast<int32_t>(flags.get_int("gpu-id-step"));
      eo.ep_size = static_cast<int32_t>(flags.get_int("ep-size"));
      eo.dp_size = static_cast<int32_t>(flags.get_int("dp-size"));
      eo.max_prefill_tokens = static_cast<int32_t>(flags.get_int("max-prefill-tokens"));
      eo.schedule_policy = flags.get_string("schedule-policy");
      eo.disable_radix_cache = flags.get_bool("disable-radix-cache");
      eo.context_length = flags.get_int("context-length");
      eo.quantization = flags.get_string("quantization");
      eo.kv_cache_dtype = flags.get_string("kv-cache-dtype");
      eo.disable_shared_experts_fusion = flags.get_bool("disable-shared-experts-fusion");
      eo.disable_chunked_prefix_cache = flags.get_bool("disable-chunked-prefix-cache");
      eo.expert_recorder_mode = flags.get_string("expert-distribution-recorder-mode");
      eo.enable_return_hidden_states = flags.get_bool("enable-return-hidden-states");
      eo.enable_return_routed_experts = flags.get_bool("enable-return-routed-experts");
      eo.disable_cuda_graph = flags.get_bool("disable-cuda-graph");
      eo.disable_overlap_schedule = flags.get_bool("disable-overlap-schedule");
      eo.cuda_graph_max_bs = static_cast<int32_t>(graph_max_bs);
      if (!graph_bs.empty()) {
        if (flags.was_set("cuda-graph-max-bs") && flags.get_int("cuda-graph-max-bs") != graph_max_bs)
          std::fprintf(stderr, "dserve serve: --cuda-graph-max-bs %lld replaced by --cuda-graph-bs's largest, %lld\n",
                       static_cast<long long>(flags.get_int("cuda-graph-max-bs")), static_cast<long long>(graph_max_bs));
        eo.cuda_graph_bs.assign(graph_bs.begin(), graph_bs.end());
      }
      eo.verbose = true;
      eo.on_fatal = [&engine_failed](const std::string& why) {
        std::fprintf(stderr, "dserve serve: fatal engine error, shutting down: %s\n", why.c_str());
        engine_failed = true;
        ::kill(::getpid(), SIGTERM);  // wakes server.wait() like a signal: the drain below flushes the errors
      };
      auto e = make_batch_engine(eo);
      if (!e) {
        load_status = e.status();
        server.stop();
        return;
      }
      engine = std::move(e.value());
    }
    if (Status st = api.set_backend(engine.get(), tokenizer.get()); !st) {
      load_status = st;
      server.stop();
      return;
    }
    loaded = true;
    std::string curl;
    const std::string auth = ao.api_key.empty() ? "" : " -H 'Authorization: Bearer <api-key>'";
    if (skip_tok) {
      curl = "curl " + url + "/generate -H 'Content-Type: application/json'" + auth +
             " -d '{\"input_ids\": [1, 2, 3], \"sampling_params\": {\"max_new_tokens\": 16}}'";
    } else {
      std::string body = "{\"model\": \"" + ao.served_model_name +
                         "\", \"messages\": [{\"role\": \"user\", \"content\": \"Hello!\"}], \"max_tokens\": 64}";
      curl = "curl " + url + "/v1/chat/completions -H 'Content-Type: application/json'" + auth + " -d " +
             shell_quote(body);
    }
    std::printf("dserve serve: ready on %s\n  %s\n", url.c_str(), curl.c_str());
    std::fflush(stdout);
  });

  const int sig = server.wait();
  if (sig != 0 && !loaded) {
    std::fprintf(stderr, "dserve serve: interrupted while loading\n");
    std::fflush(stderr);
    std::_Exit(128 + sig);
  }
  loader.join();
  if (!load_status.is_ok()) return fail(load_status);
  std::fprintf(stderr, "dserve serve: shutting down\n");
  api.set_shutting_down();
  if (engine) engine->shutdown();  // pending requests finish (reason abort); their last events flush below
  api.wait_admin_idle();            // a weight update inside the engine has returned (the engine's shutdown ended it)
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  server.stop();
  if (engine_failed) {
    // The engine's device state may be broken (a CUDA error): releasing it could hit a second failure and
    // abort. Every client has its error by now; the OS takes the memory back.
    std::fflush(nullptr);
    std::_Exit(1);
  }
  engine.reset();
  return 0;
}

}  // namespace ds
