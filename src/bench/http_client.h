// HttpClient: an asynchronous HTTP/1.1 client for bench-serving on Boost.Beast (the only bench file that
// includes it). One event loop runs on the calling thread and carries every request, timer and callback,
// so thousands of streamed requests are in flight without a thread each; response bodies are handed over
// piece by piece as they arrive, with the arrival time. Idle keep-alive connections are reused; a reused
// connection that the server closed meanwhile is retried once on a fresh one. Plain http:// only.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ds::bench {

using Clock = std::chrono::steady_clock;

struct BaseUrl {
  std::string host;
  std::string port;
  std::string path_prefix;  // e.g. "" or "/proxy" (no trailing slash)
};
// "http://host[:port][/prefix]"; errors name the URL.
Result<BaseUrl> parse_base_url(const std::string& url);

struct HttpCallbacks {
  std::function<void(int status, const std::string& content_type)> on_headers;
  std::function<void(std::string_view bytes, Clock::time_point t)> on_body;
  // Exactly once; a non-ok Status is a transport failure (connect, reset, timeout, malformed reply).
  std::function<void(const Status& transport, Clock::time_point t)> on_done;
};

struct HttpResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `headers` go on every request (e.g. Authorization). timeout_s bounds each wait for the server
  // (connect, and then the silence between two pieces of a reply).
  HttpClient(BaseUrl url, std::vector<std::pair<std::string, std::string>> headers, double timeout_s);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Resolves the host (blocking); must succeed before requests are made.
  Status resolve();
  // Starts a request (a JSON body when non-empty). Call from the loop thread or before run().
  void request(const std::string& method, const std::string& path, std::string body, HttpCallbacks callbacks);
  // Runs fn on the loop at time t (or as soon as possible when t has passed).
  void at(Clock::time_point t, std::function<void()> fn);
  // Runs the loop on this thread until no request or timer is pending.
  void run();
  // A whole request, run to completion (uses run(); not for use inside the loop).
  Result<HttpResponse> fetch(const std::string& method, const std::string& path, std::string body = "");

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::bench
