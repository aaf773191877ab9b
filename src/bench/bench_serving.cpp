// bench-serving driver (see bench_serving.h): setup, warmup, the timed run on one event loop, report.
#include "bench/bench_serving.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/backend.h"
#include "bench/http_client.h"
#include "bench/progress.h"
#include "bench/report.h"

namespace ds::bench {

namespace {

using json = nlohmann::json;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration to_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Many simultaneous connections need many descriptors (SGLang raises the soft limit the same way).
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  const rlim_t want = rl.rlim_max == RLIM_INFINITY ? 65535 : std::min<rlim_t>(rl.rlim_max, 65535);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// Sends one request; `done` gets the finished output (on the loop thread).
void send_request(HttpClient& client, Backend backend, const DatasetRow& row, int64_t output_len,
                  const RequestOptions& ro, Clock::time_point bench_start,
                  std::function<void(RequestOutput)> done) {
  auto reader = std::make_shared<ResponseReader>(backend, output_len);
  const auto sent = Clock::now();
  const int64_t prompt_len = row.prompt_len;
  HttpCallbacks cb;
  cb.on_headers = [reader](int status, const std::string& ct) { reader->on_headers(status, ct); };
  cb.on_body = [reader, sent](std::string_view bytes, Clock::time_point t) {
    reader->on_bytes(bytes, seconds(t - sent));
  };
  cb.on_done = [reader, sent, bench_start, prompt_len, done = std::move(done)](const Status& st, Clock::time_point t) {
    RequestOutput out = reader->finish(seconds(t - sent), st);
    out.start_time = seconds(sent - bench_start);
    out.prompt_len = prompt_len;
    done(std::move(out));
  };
  client.request("POST", api_path(backend), build_request_body(backend, row, output_len, ro), std::move(cb));
}

Result<json> get_json(HttpClient& client, const std::string& path) {
  auto r = client.fetch("GET", path);
  if (!r) return r.status();
  if (r->status != 200) return error("GET ", path, " returned HTTP ", r->status);
  json j = json::parse(r->body, nullptr, false);
  if (j.is_discarded()) return error("GET ", path, " did not return JSON");
  return j;
}

std::optional<double> server_accept_length(const json& info) {
  const json* s = &info;
  if (s->contains("decode") && (*s)["decode"].is_array() && !(*s)["decode"].empty()) s = &(*s)["decode"][0];
  if (!s->is_object() || !s->contains("internal_states")) return std::nullopt;
  const json& states = (*s)["internal_states"];
  if (!states.is_array() || states.empty() || !states[0].is_object()) return std::nullopt;
  auto it = states[0].find("avg_spec_accept_length");
  if (it == states[0].end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

Result<Tokenizer> load_tokenizer(const BenchServingOptions& o, bool* loaded) {
  *loaded = false;
  std::string dir = o.tokenizer;
  if (dir.empty() && !o.model.empty() && std::filesystem::exists(std::filesystem::path(o.model) / "tokenizer.json"))
    dir = o.model;
  if (dir.empty()) return error("no tokenizer");
  auto tok = Tokenizer::load(dir);
  if (!tok) return error("--tokenizer ", dir, ": ", tok.status().message());
  *loaded = true;
  return tok;
}

}  // namespace

Result<BenchServingResult> run_bench_serving(const BenchServingOptions& o) {
  auto backend_r = parse_backend(o.backend);
  if (!backend_r) return backend_r.status();
  const Backend backend = *backend_r;
  if (o.max_concurrency && *o.max_concurrency <= 0) return error("--max-concurrency must be positive");
  if (!(o.request_rate > 0)) return error("--request-rate must be positive (or inf)");
  if (o.warmup_requests < 0) return error("--warmup-requests must not be negative");

  const std::string base =
      o.base_url.empty() ? "http://" + o.host + ":" + std::to_string(o.port > 0 ? o.port : default_port(backend))
                         : o.base_url;
  auto url = parse_base_url(base);
  if (!url) return url.status();
  std::vector<std::pair<std::string, std::string>> headers;
  std::string api_key = o.api_key;
  if (api_key.empty())
    if (const char* env = std::getenv("OPENAI_API_KEY")) api_key = env;
  if (!api_key.empty()) headers.emplace_back("Authorization", "Bearer " + api_key);
  HttpClient client(*url, headers, o.timeout_s);
  DS_RETURN_IF_ERROR(client.resolve());
  raise_fd_limit();

  RequestOptions ro;
  ro.stream = !o.disable_stream;
  ro.ignore_eos = !o.disable_ignore_eos;
  ro.return_logprob = o.return_logprob;
  if (!o.extra_request_body.empty()) {
    ro.extra_body = json::parse(o.extra_request_body, nullptr, false);
    if (ro.extra_body.is_discarded() || !ro.extra_body.is_object())
      return error("--extra-request-body must be a JSON object, got '", o.extra_request_body, "'");
  }

  // The model name for OpenAI requests: --model, else what the server lists first.
  ro.model = o.model;
  if (ro.model.empty()) {
    auto models = get_json(client, "/v1/models");
    if (models && models->contains("data") && (*models)["data"].is_array() && !(*models)["data"].empty() &&
        (*models)["data"][0].contains("id") && (*models)["data"][0]["id"].is_string()) {
      ro.model = (*models)["data"][0]["id"].get<std::string>();
    } else if (!is_native(backend)) {
      return error("no --model given and none could be read from ", base, "/v1/models",
                   models ? std::string("") : ": " + models.status().message());
    }
  }

  bool have_tok = false;
  auto tok = load_tokenizer(o, &have_tok);
  if (!have_tok && !o.tokenizer.empty()) return tok.status();
  const Tokenizer* tokp = have_tok ? &tok.value() : nullptr;

  DatasetOptions dopt = o.dataset;
  dopt.need_text = is_chat(backend);
  std::mt19937_64 rng(o.seed);
  auto dataset = make_dataset(dopt, tokp, rng);
  if (!dataset) return dataset.status();
  std::vector<DatasetRow>& rows = dataset->rows;
  if (rows.empty()) return error("the dataset is empty");

  std::printf("benchmark_args=backend=%s base_url=%s model=%s tokenizer=%s dataset_name=%s num_prompts=%zu "
              "request_rate=%s max_concurrency=%s seed=%llu\n",
              backend_name(backend).c_str(), base.c_str(), ro.model.empty() ? "(none)" : ro.model.c_str(),
              tokp ? (o.tokenizer.empty() ? o.model.c_str() : o.tokenizer.c_str()) : "(none)", dopt.name.c_str(),
              rows.size(), python_float_repr(o.request_rate).c_str(),
              o.max_concurrency ? std::to_string(*o.max_concurrency).c_str() : "not set",
              static_cast<unsigned long long>(o.seed));
  for (const auto& note : dataset->notes) std::printf("%s\n", note.c_str());
  if (!tokp)
    std::printf("No --tokenizer: \"Total generated tokens (retokenized)\" is 0 (nothing to retokenize with).\n");

  // Warmup: the first prompt, at most 32 output tokens, all warmup requests at once.
  std::printf("Starting warmup with %lld sequences...\n", static_cast<long long>(o.warmup_requests));
  std::fflush(stdout);
  if (o.warmup_requests > 0) {
    std::vector<RequestOutput> warm;
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < o.warmup_requests; ++i)
      send_request(client, backend, rows[0], std::min<int64_t>(rows[0].output_len, 32), ro, t0,
                   [&warm](RequestOutput out) { warm.push_back(std::move(out)); });
    client.run();
    bool any = false;
    for (const auto& w : warm) any = any || w.success;
    if (!any)
      return error("Warmup failed - Please make sure benchmark arguments are correctly specified. Error: ",
                   warm.empty() ? std::string("no response") : warm[0].error);
  }
  std::printf("Warmup completed with %lld sequences. Starting main benchmark run...\n",
              static_cast<long long>(o.warmup_requests));
  std::fflush(stdout);
  if (o.flush_cache) {
    auto r = client.fetch("POST", "/flush_cache");
    if (!r || r->status != 200) std::fprintf(stderr, "bench-serving: POST /flush_cache failed\n");
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // as SGLang: let the warmup settle

  // Arrival times: all at 0 for an infinite rate, else a Poisson process (exponential gaps).
  const size_t n = rows.size();
  std::vector<double> arrivals(n, 0.0);
  if (std::isfinite(o.request_rate)) {
    std::exponential_distribution<double> gap(o.request_rate);
    for (size_t i = 1; i < n; ++i) arrivals[i] = arrivals[i - 1] + gap(rng);
  }

  BenchServingResult result;
  result.outputs.resize(n);
  Progress progress(static_cast<int64_t>(n), !o.disable_tqdm, isatty(STDERR_FILENO) == 1);
  std::deque<size_t> waiting;
  size_t next_arrival = 0;
  int64_t in_flight = 0, done = 0, failed = 0;
  const auto start = Clock::now();
  Clock::time_point end = start;

  std::function<void()> start_waiting = [&]() {
    while (!waiting.empty() && (!o.max_concurrency || in_flight < *o.max_concurrency)) {
      const size_t idx = waiting.front();
      waiting.pop_front();
      ++in_flight;
      send_request(client, backend, rows[idx], rows[idx].output_len, ro, start, [&, idx](RequestOutput out) {
        if (!out.success) ++failed;
        result.outputs[idx] = std::move(out);
        --in_flight;
        ++done;
        const auto now = Clock::now();
        progress.update(done, failed, seconds(now - start));
        if (done == static_cast<int64_t>(n)) {
          end = now;
        } else {
          start_waiting();
        }
      });
    }
  };
  std::function<void()> arrive = [&]() {
    const auto now = Clock::now();
    while (next_arrival < n && start + to_duration(arrivals[next_arrival]) <= now) waiting.push_back(next_arrival++);
    start_waiting();
    if (next_arrival < n) client.at(start + to_duration(arrivals[next_arrival]), arrive);
  };
  std::function<void()> tick = [&]() {
    if (done == static_cast<int64_t>(n)) return;
    progress.update(done, failed, seconds(Clock::now() - start));
    client.at(Clock::now() + std::chrono::milliseconds(250), tick);
  };
  arrive();
  client.at(start + std::chrono::milliseconds(250), tick);
  client.run();
  progress.close(done, failed, seconds(end - start));
  result.duration_s = seconds(end - start);

  // Speculative decoding: SGLang reads the server's average accept length; otherwise the per-request stats.
  json server_info = nullptr;
  if (backend_name(backend).find("sglang") != std::string::npos) {
    if (auto info = get_json(client, "/get_server_info")) {
      server_info = *info;
      result.accept_length = server_accept_length(server_info);
    }
  }
  if (!result.accept_length) result.accept_length = accept_length_from_outputs(result.outputs);

  if (tokp) {
    for (auto& out : result.outputs) {
      if (!out.success) continue;
      auto ids = tokp->encode(out.generated_text, false);
      out.retokenized_len = ids ? static_cast<int64_t>(ids->size()) : 0;
    }
  }
  result.metrics = compute_metrics(result.outputs, result.duration_s);

  if (failed > 0) {
    std::string first;
    for (const auto& out : result.outputs)
      if (!out.success) {
        first = out.error;
        break;
      }
    std::fprintf(stderr, "bench-serving: %lld of %zu requests failed; first error: %s\n",
                 static_cast<long long>(failed), n, first.c_str());
  }

  ReportHeader header;
  header.backend = backend_name(backend);
  header.request_rate = o.request_rate;
  header.max_concurrency = o.max_concurrency;
  header.duration_s = result.duration_s;
  std::printf("\n%s", format_report(header, result.metrics, result.accept_length).c_str());
  std::fflush(stdout);

  if (!o.output_file.empty()) {
    ResultArgs a;
    a.backend = header.backend;
    a.dataset_name = dopt.name;
    a.request_rate = o.request_rate;
    a.max_concurrency = o.max_concurrency;
    a.sharegpt_output_len = dopt.sharegpt_output_len;
    a.random_input_len = dopt.random_input_len;
    a.random_output_len = dopt.random_output_len;
    a.random_range_ratio = dopt.random_range_ratio;
    a.server_info = server_info;
    a.accept_length = result.accept_length;
    a.duration_s = result.duration_s;
    auto j = result_json(a, result.metrics);
    if (o.output_details) add_result_details(j, result.outputs);
    std::ofstream f(o.output_file, std::ios::app);
    if (!f) return error("--output-file ", o.output_file, ": cannot open for appending");
    f << result_json_line(j) << "\n";
    if (!f) return error("--output-file ", o.output_file, ": write failed");
  }
  return result;
}

}  // namespace ds::bench
