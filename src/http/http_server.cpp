// HttpServer on Boost.Beast: accept loop, per-connection sessions on strands, keep-alive, 100-continue, body
// cap (413), chunked streaming, and a pending read while a request is answered to notice clients leaving.
#include "http/http_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/resource.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/logging.h"

namespace ds {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

namespace {

// The error answer to a failed read: 413, 431 or 400 with its message; 0 when the connection just ends
// (end of stream, timeout, reset).
int read_error_status(const beast::error_code& ec, const HttpServerOptions& opts, std::string* message) {
  if (ec == bhttp::error::body_limit) {
    *message = "request body exceeds " + std::to_string(opts.max_body_bytes) + " bytes";
    return 413;
  }
  if (ec == bhttp::error::header_limit) {
    *message = "request headers exceed " + std::to_string(opts.max_header_bytes) + " bytes";
    return 431;
  }
  if (&ec.category() == &bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
      ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    *message = "malformed HTTP request: " + ec.message();
    return 400;
  }
  return 0;
}

HttpRequest request_from_message(bhttp::request<bhttp::string_body>& msg, const std::string& peer) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  auto q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  for (const auto& f : msg) {
    std::string name(f.name_string());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    req.headers.emplace_back(std::move(name), std::string(f.value()));
  }
  req.body = std::move(msg.body());
  req.peer = peer;
  return req;
}

constexpr size_t kWatchBufferCap = 64u << 10;     // pipelined bytes buffered while a request runs
constexpr size_t kMaxQueuedOutput = 64u << 20;    // a client this far behind counts as gone
constexpr size_t kDrainCap = 256u << 20;          // bytes read and dropped before closing after an error

class Responder;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, const HttpServerOptions& opts, const HttpHandler& handler)
      : stream_(std::move(socket)), opts_(opts), handler_(handler) {
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  // ---- called by Responder, on the strand ----
  void send_full(int status, std::string_view content_type, std::string body, const HttpHeaders& extra) {
    std::string head = status_line(status);
    if (!content_type.empty()) append_header(head, "Content-Type", content_type);
    append_header(head, "Content-Length", std::to_string(body.size()));
    append_common(head, extra);
    head += "\r\n";
    head += body;
    enqueue(std::move(head));
    finish_response();
  }
  void send_stream_head(int status, std::string_view content_type, const HttpHeaders& extra) {
    std::string head = status_line(status);
    append_header(head, "Content-Type", content_type);
    append_header(head, "Cache-Control", "no-cache");
    if (chunked_) {
      append_header(head, "Transfer-Encoding", "chunked");
    } else {
      keep_alive_ = false;  // HTTP/1.0: the body ends when the connection closes
    }
    append_common(head, extra);
    head += "\r\n";
    enqueue(std::move(head));
  }
  void send_stream_data(std::string data) {
    if (data.empty()) return;
    if (!chunked_) {
      enqueue(std::move(data));
      return;
    }
    char size[24];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    std::string chunk = size;
    chunk += data;
    chunk += "\r\n";
    enqueue(std::move(chunk));
  }
  void send_stream_end() {
    if (chunked_) enqueue("0\r\n\r\n");
    finish_response();
  }
  void release_responder() { current_.reset(); }

 private:
  std::string status_line(int status) const {
    return "HTTP/1." + std::to_string(chunked_ ? 1 : 0) + " " + std::to_string(status) + " " +
           http_reason(status) + "\r\n";
  }
  static void append_header(std::string& out, std::string_view name, std::string_view value) {
    out.append(name);
    out += ": ";
    out.append(value);
    out += "\r\n";
  }
  void append_common(std::string& head, const HttpHeaders& extra) {
    for (const auto& [k, v] : extra) append_header(head, k, v);
    append_header(head, "Server", "dserve");
    append_header(head, "Connection", keep_alive_ ? "keep-alive" : "close");
  }

  void do_read() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(opts_.max_header_bytes));
    parser_->body_limit(opts_.max_body_bytes);
    stream_.expires_after(std::chrono::seconds(opts_.idle_timeout_s));
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto& msg = parser_->get();
    auto expect = msg[bhttp::field::expect];
    if (!expect.empty() && beast::iequals(expect, "100-continue")) {
      // curl waits for this before sending bodies over 1 KiB.
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      stream_.expires_after(std::chrono::seconds(opts_.read_timeout_s));
      net::async_write(stream_, net::buffer(*cont),
                       [self = shared_from_this(), cont](beast::error_code wec, size_t) {
                         if (wec) return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(std::chrono::seconds(opts_.read_timeout_s));
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_read_error(beast::error_code ec) {
    std::string message;
    if (const int status = read_error_status(ec, opts_, &message); status != 0) {
      keep_alive_ = false;
      chunked_ = true;
      return send_error_and_close(status, message);
    }
    close();  // end of stream, timeout, reset
  }

  void send_error_and_close(int status, const std::string& message) {
    drain_ = true;
    std::string body = R"({"error":{"message":")" + message + R"(","type":"invalid_request_error","param":null,"code":null}})";
    std::string head = status_line(status);
    append_header(head, "Content-Type", "application/json");
    append_header(head, "Content-Length", std::to_string(body.size()));
    append_header(head, "Connection", "close");
    head += "\r\n" + body;
    stream_.expires_never();
    enqueue(std::move(head));
    finish_response();
  }

  void on_body(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto msg = parser_->release();
    parser_.reset();
    keep_alive_ = msg.keep_alive();
    chunked_ = msg.version() >= 11;
    HttpRequest req = request_from_message(msg, peer_);
    stream_.expires_never();  // generation may take long; the pending read below notices a departed client
    auto responder = make_responder();
    start_watch();
    handler_(std::move(req), responder);
  }

  std::shared_ptr<HttpResponder> make_responder();

  // While a request is answered, keep one read pending: it completes with an error when the client leaves.
  // Bytes that arrive (a pipelined next request) stay in buffer_ for the next parse.
  void start_watch() {
    if (watching_ || closed_ || buffer_.size() >= kWatchBufferCap) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (closed_) return;
    if (!ec || ec == net::error::operation_aborted) {
      if (!ec) buffer_.commit(n);
      if (current_ || writing_ || response_pending_) {
        if (!ec) start_watch();
        return;
      }
      want_read_ = false;
      return do_read();
    }
    peer_gone();
  }

  void peer_gone();

  void enqueue(std::string data) {
    if (closed_) return;
    queued_bytes_ += data.size();
    out_.push_back(std::move(data));
    if (queued_bytes_ > kMaxQueuedOutput) {
      DS_WARN("http: client ", peer_, " is not reading its response; closing the connection");
      return peer_gone();
    }
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    inflight_.swap(out_);
    out_.clear();
    std::vector<net::const_buffer> bufs;
    bufs.reserve(inflight_.size());
    for (const auto& s : inflight_) bufs.push_back(net::buffer(s));
    net::async_write(stream_, bufs, [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_write(ec, n);
    });
  }

  void on_write(beast::error_code ec, size_t n) {
    writing_ = false;
    queued_bytes_ -= std::min(queued_bytes_, n);
    inflight_.clear();
    if (closed_) return;
    if (ec) return peer_gone();
    if (!out_.empty()) return do_write();
    if (response_pending_) {
      response_pending_ = false;
      after_response();
    }
  }

  void finish_response() {
    current_.reset();
    response_pending_ = true;
    if (!writing_ && out_.empty()) {
      response_pending_ = false;
      after_response();
    }
  }

  void after_response() {
    if (closed_) return;
    if (!keep_alive_) return graceful_close();
    if (watching_) {
      // The watch read is still pending: cancel it; its handler starts the next read.
      want_read_ = true;
      beast::error_code ec;
      stream_.socket().cancel(ec);
      return;
    }
    do_read();
  }

  void graceful_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (!drain_ || ec || watching_) return close();
    // Read (and drop) what the client still sends, so it sees our error response instead of a reset.
    stream_.expires_after(std::chrono::seconds(2));
    drain_some();
  }

  void drain_some() {
    stream_.async_read_some(net::buffer(drain_buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kDrainCap) return self->close();
      self->drain_some();
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    out_.clear();
  }

  beast::tcp_stream stream_;
  const HttpServerOptions& opts_;
  const HttpHandler& handler_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<Responder> current_;
  std::deque<std::string> out_;
  std::deque<std::string> inflight_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool watching_ = false;
  bool want_read_ = false;
  bool response_pending_ = false;  // the response is queued; start the next read once it is written
  bool keep_alive_ = true;
  bool chunked_ = true;
  bool closed_ = false;
  bool drain_ = false;
  size_t drained_ = 0;
  char drain_buf_[16384];
};

class Responder : public HttpResponder {
 public:
  Responder(std::shared_ptr<Session> session, net::any_io_executor ex)
      : session_(std::move(session)), ex_(std::move(ex)) {}

  void post(std::function<void()> fn) override { net::post(ex_, std::move(fn)); }
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    auto timer = std::make_shared<net::steady_timer>(ex_, delay);
    timer->async_wait([timer, fn = std::move(fn)](beast::error_code) { fn(); });
  }

  void respond(int status, std::string_view content_type, std::string body, const HttpHeaders& extra) override {
    DS_CHECK(!complete_ && !streaming_, "respond() after the response started");
    complete_ = true;
    on_disconnect_ = nullptr;  // it may own the caller's state, which owns this responder
    if (auto s = std::move(session_)) s->send_full(status, content_type, std::move(body), extra);
  }
  void start_stream(int status, std::string_view content_type, const HttpHeaders& extra) override {
    DS_CHECK(!complete_ && !streaming_, "start_stream() after the response started");
    streaming_ = true;
    if (auto s = session_) s->send_stream_head(status, content_type, extra);
  }
  void stream_write(std::string data) override {
    DS_CHECK(streaming_ && !complete_, "stream_write() outside a stream");
    if (auto s = session_) s->send_stream_data(std::move(data));
  }
  void stream_end() override {
    DS_CHECK(streaming_ && !complete_, "stream_end() outside a stream");
    complete_ = true;
    on_disconnect_ = nullptr;
    if (auto s = std::move(session_)) s->send_stream_end();
  }
  void set_on_disconnect(std::function<void()> fn) override { on_disconnect_ = std::move(fn); }
  bool disconnected() const override { return gone_; }

  // The session saw the client leave before the response completed.
  void client_gone() {
    if (gone_ || complete_) return;
    gone_ = true;
    session_.reset();  // nothing more will be written; breaks the session <-> responder cycle
    // Deferred: this can run inside one of our own write calls.
    if (auto fn = std::move(on_disconnect_)) net::post(ex_, std::move(fn));
  }

 private:
  std::shared_ptr<Session> session_;  // reset once the response is complete (or the client left)
  net::any_io_executor ex_;
  std::function<void()> on_disconnect_;
  bool complete_ = false;
  bool streaming_ = false;
  bool gone_ = false;
};

std::shared_ptr<HttpResponder> Session::make_responder() {
  current_ = std::make_shared<Responder>(shared_from_this(), stream_.get_executor());
  return current_;
}

void Session::peer_gone() {
  auto r = std::move(current_);
  close();
  if (r) r->client_gone();
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opts;
  HttpHandler handler;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  net::signal_set signals{ioc};
  std::vector<std::thread> threads;
  int port = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;
  int signal = 0;

  void do_accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
        // E.g. out of file descriptors: back off instead of spinning.
        DS_WARN("http: accept failed: ", ec.message());
        auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(100));
        timer->async_wait([this, timer](beast::error_code) { do_accept(); });
        return;
      } else {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Session>(std::move(socket), opts, handler)->start();
      }
      do_accept();
    });
  }
};

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(options);
  impl_->handler = std::move(handler);
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::start() {
  Impl& m = *impl_;
  beast::error_code ec;
  auto addr = net::ip::make_address(m.opts.host, ec);
  if (ec) return error("--host '", m.opts.host, "' is not an IP address");
  if (m.opts.port < 0 || m.opts.port > 65535) return error("--port ", m.opts.port, " is out of range");
  tcp::endpoint ep(addr, static_cast<unsigned short>(m.opts.port));
  const std::string where = m.opts.host + ":" + std::to_string(m.opts.port);
  m.acceptor.open(ep.protocol(), ec);
  if (ec) return error("cannot open a socket for ", where, ": ", ec.message());
  m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  m.acceptor.bind(ep, ec);
  if (ec) return error("cannot bind ", where, ": ", ec.message());
  m.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return error("cannot listen on ", where, ": ", ec.message());
  m.port = m.acceptor.local_endpoint().port();
  // One descriptor per connection: allow as many as the hard limit permits.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  m.signals.add(SIGINT, ec);
  m.signals.add(SIGTERM, ec);
  m.signals.async_wait([&m](beast::error_code sec, int sig) {
    if (sec) return;
    std::lock_guard<std::mutex> lock(m.mu);
    m.signal = sig;
    m.stopped = true;
    m.cv.notify_all();
  });
  m.do_accept();
  const int n = std::max(1, m.opts.io_threads);
  for (int i = 0; i < n; ++i) m.threads.emplace_back([&m] { m.ioc.run(); });
  return Status::ok();
}

int HttpServer::port() const { return impl_->port; }

ParsedHttpRequest parse_http_request(std::string_view raw, const HttpServerOptions& opts) {
  ParsedHttpRequest out;
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(opts.max_header_bytes));
  parser.body_limit(opts.max_body_bytes);
  parser.eager(true);
  beast::error_code ec;
  size_t used = 0;
  while (used < raw.size() && !parser.is_done()) {
    const size_t n = parser.put(net::buffer(raw.data() + used, raw.size() - used), ec);
    if (ec == bhttp::error::need_more) break;
    if (ec) {
      out.status = read_error_status(ec, opts, &out.message);
      if (out.status == 0) out.incomplete = true;
      return out;
    }
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_done()) {
    // The connection ends here: Beast reports a partial message as end of stream (the server just closes).
    out.incomplete = true;
    return out;
  }
  auto msg = parser.release();
  out.request = request_from_message(msg, "");
  return out;
}

int HttpServer::wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->stopped; });
  return impl_->signal;
}

void HttpServer::stop() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.stopped = true;
    m.cv.notify_all();
  }
  m.ioc.stop();
  for (auto& t : m.threads)
    if (t.joinable()) t.join();
  m.threads.clear();
  beast::error_code ec;  // no I/O thread runs now
  m.acceptor.close(ec);
  m.signals.cancel(ec);
}

}  // namespace ds
