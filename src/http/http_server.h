// HttpServer: an asynchronous HTTP/1.1 server (Boost.Beast over Asio; the only file that includes them) with
// keep-alive, a request body cap, chunked streaming responses (SSE) and client-disconnect detection while a
// request is being answered. A few I/O threads serve every connection; each connection has a strand.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ds {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // as sent: "GET", "POST", ...
  std::string target;  // path and query as sent
  std::string path;    // target without the query, percent-decoding not applied
  std::string query;
  HttpHeaders headers;  // names lower-cased
  std::string body;
  std::string peer;  // "ip:port" of the client

  // Value of the first header with this (lower-case) name, or nullptr.
  const std::string* header(std::string_view lower_name) const;
};

// One request's reply channel. post() may be called from any thread (the engine's callbacks use it); all
// other methods must be called on the connection's strand, i.e. inside the handler or inside a posted
// function. Writes after the client went away are dropped silently.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  // Runs fn on the connection's strand (never inline). Never blocks.
  virtual void post(std::function<void()> fn) = 0;
  // Runs fn on the connection's strand after `delay` (timeouts). Call on the strand.
  virtual void post_after(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
  // A complete response with Content-Length.
  virtual void respond(int status, std::string_view content_type, std::string body,
                       const HttpHeaders& extra = {}) = 0;
  // A streamed response (chunked transfer encoding): headers now, then writes, then end.
  virtual void start_stream(int status, std::string_view content_type, const HttpHeaders& extra = {}) = 0;
  virtual void stream_write(std::string data) = 0;
  virtual void stream_end() = 0;
  // Called once on the strand if the client closes the connection (or a write fails) before the response
  // is complete. Set it before the first asynchronous step of a long request.
  virtual void set_on_disconnect(std::function<void()> fn) = 0;
  virtual bool disconnected() const = 0;
};

// Called on the connection's strand for every complete request.
using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<HttpResponder>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 30000;           // 0: pick a free port (see HttpServer::port())
  int io_threads = 4;
  size_t max_body_bytes = 32u << 20;  // larger bodies get 413 and the connection closes
  size_t max_header_bytes = 64u << 10;
  int idle_timeout_s = 300;   // keep-alive connections idle this long are closed
  int read_timeout_s = 60;    // a started request must arrive completely within this
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (errors name the address), then starts the I/O threads.
  Status start();
  int port() const;  // the bound port, after start()
  // Blocks until stop() is called (returns 0) or SIGINT/SIGTERM arrives (returns the signal number).
  int wait();
  // Stops the I/O threads (pending work is dropped). Idempotent. Objects that hold responders (pending
  // engine callbacks) must be destroyed before the HttpServer itself, which owns the I/O context.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request parsed from raw bytes with the server's own parser, limits and conversion (what a session does
// before calling the handler; the HTTP fuzz target drives it). status 0: `request` is complete and valid;
// otherwise the status the server answers before closing (400 malformed, 413 body, 431 headers) and why.
// `incomplete` (status 0, no request) means the bytes end before the request does.
struct ParsedHttpRequest {
  int status = 0;
  std::string message;
  bool incomplete = false;
  HttpRequest request;
};
ParsedHttpRequest parse_http_request(std::string_view raw, const HttpServerOptions& opts);

// Status line reason phrase ("OK", "Not Found", ...).
const char* http_reason(int status);

}  // namespace ds
