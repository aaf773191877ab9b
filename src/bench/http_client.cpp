// Asynchronous HTTP/1.1 client on Boost.Beast (see http_client.h).
#include "bench/http_client.h"

#include <deque>
#include <limits>
#include <optional>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace ds::bench {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

Result<BaseUrl> parse_base_url(const std::string& url) {
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) return error("base URL ", url, ": https is not supported (use http://)");
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  if (rest.find("://") != std::string::npos) return error("base URL ", url, ": only http:// URLs are supported");
  BaseUrl u;
  const size_t slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  if (slash != std::string::npos) u.path_prefix = rest.substr(slash);
  while (!u.path_prefix.empty() && u.path_prefix.back() == '/') u.path_prefix.pop_back();
  if (hostport.empty()) return error("base URL ", url, ": no host");
  if (hostport.front() == '[') {  // [v6]:port
    const size_t close = hostport.find(']');
    if (close == std::string::npos) return error("base URL ", url, ": unterminated IPv6 address");
    u.host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      if (hostport[close + 1] != ':') return error("base URL ", url, ": malformed host");
      u.port = hostport.substr(close + 2);
    }
  } else if (const size_t colon = hostport.rfind(':'); colon != std::string::npos) {
    u.host = hostport.substr(0, colon);
    u.port = hostport.substr(colon + 1);
  } else {
    u.host = hostport;
  }
  if (u.port.empty()) u.port = "80";
  for (char c : u.port)
    if (c < '0' || c > '9') return error("base URL ", url, ": port '", u.port, "' is not a number");
  return u;
}

struct Conn {
  explicit Conn(net::io_context& io) : stream(io) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

struct HttpClient::Impl {
  Impl(BaseUrl u, std::vector<std::pair<std::string, std::string>> h, double t)
      : url(std::move(u)), headers(std::move(h)), timeout(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                std::chrono::duration<double>(t))) {}
  net::io_context io{1};
  BaseUrl url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::steady_clock::duration timeout;
  tcp::resolver::results_type endpoints;
  std::deque<std::unique_ptr<Conn>> idle;  // keep-alive connections, most recently used at the back

  std::unique_ptr<Conn> take_idle() {
    if (idle.empty()) return nullptr;
    auto c = std::move(idle.back());
    idle.pop_back();
    return c;
  }
  void put_idle(std::unique_ptr<Conn> c) {
    c->stream.expires_never();
    idle.push_back(std::move(c));
  }
};

namespace {

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpClient::Impl* impl, http::request<http::string_body> req, HttpCallbacks cb)
      : impl_(impl), req_(std::move(req)), cb_(std::move(cb)) {}

  void start() {
    reset_parser();
    if (auto c = impl_->take_idle()) {
      conn_ = std::move(c);
      reused_ = true;
      write();
    } else {
      connect();
    }
  }

 private:
  void reset_parser() {
    parser_.emplace();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    parser_->header_limit(1u << 20);
  }

  void connect() {
    reused_ = false;
    conn_ = std::make_unique<Conn>(impl_->io);
    conn_->stream.expires_after(impl_->timeout);
    conn_->stream.async_connect(impl_->endpoints,
                                [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                                  if (ec) return self->on_error(ec, "connect");
                                  self->write();
                                });
  }

  void write() {
    conn_->stream.expires_after(impl_->timeout);
    http::async_write(conn_->stream, req_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->on_error(ec, "send");
      self->read_header();
    });
  }

  void read_header() {
    conn_->stream.expires_after(impl_->timeout);
    http::async_read_header(conn_->stream, conn_->buffer, *parser_,
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              const auto t = Clock::now();
                              if (ec) return self->on_error(ec, "read");
                              self->got_reply_ = true;
                              const auto& msg = self->parser_->get();
                              if (self->cb_.on_headers)
                                self->cb_.on_headers(static_cast<int>(msg.result_int()),
                                                     std::string(msg[http::field::content_type]));
                              self->drain(t);
                              if (self->parser_->is_done()) return self->finish();
                              self->read_some();
                            });
  }

  void read_some() {
    conn_->stream.expires_after(impl_->timeout);
    http::async_read_some(conn_->stream, conn_->buffer, *parser_,
                          [self = shared_from_this()](beast::error_code ec, std::size_t) {
                            const auto t = Clock::now();
                            if (ec) return self->on_error(ec, "read");
                            self->drain(t);
                            if (self->parser_->is_done()) return self->finish();
                            self->read_some();
                          });
  }

  // Hands over what the parser has put into the body since the last call.
  void drain(Clock::time_point t) {
    std::string& body = parser_->get().body();
    if (body.empty()) return;
    if (cb_.on_body) cb_.on_body(body, t);
    body.clear();
  }

  void finish() {
    const bool keep = parser_->keep_alive();
    if (keep) {
      impl_->put_idle(std::move(conn_));
    } else {
      close();
    }
    done(Status::ok());
  }

  void on_error(beast::error_code ec, const char* stage) {
    close();
    // A kept-alive connection may have been closed by the server while idle: the request never got an
    // answer and is safe to send again, once, on a new connection.
    if (reused_ && !got_reply_) {
      reset_parser();
      connect();
      return;
    }
    std::string what = ec == beast::error::timeout ? std::string("timed out") : ec.message();
    done(error(stage, " failed (http://", impl_->url.host, ":", impl_->url.port, "): ", what));
  }

  void close() {
    if (!conn_) return;
    beast::error_code ignored;
    conn_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    conn_->stream.close();
    conn_.reset();
  }

  void done(const Status& st) {
    if (finished_) return;
    finished_ = true;
    if (cb_.on_done) cb_.on_done(st, Clock::now());
  }

  HttpClient::Impl* impl_;
  http::request<http::string_body> req_;
  HttpCallbacks cb_;
  std::optional<http::response_parser<http::string_body>> parser_;
  std::unique_ptr<Conn> conn_;
  bool reused_ = false;
  bool got_reply_ = false;
  bool finished_ = false;
};

}  // namespace

HttpClient::HttpClient(BaseUrl url, std::vector<std::pair<std::string, std::string>> headers, double timeout_s)
    : impl_(std::make_unique<Impl>(std::move(url), std::move(headers), timeout_s)) {}

HttpClient::~HttpClient() = default;

Status HttpClient::resolve() {
  tcp::resolver resolver(impl_->io);
  beast::error_code ec;
  impl_->endpoints = resolver.resolve(impl_->url.host, impl_->url.port, ec);
  if (ec) return error("cannot resolve ", impl_->url.host, ":", impl_->url.port, ": ", ec.message());
  return Status::ok();
}

void HttpClient::request(const std::string& method, const std::string& path, std::string body, HttpCallbacks cb) {
  http::request<http::string_body> req;
  req.method(http::string_to_verb(method));
  req.target(impl_->url.path_prefix + path);
  req.version(11);
  const bool default_port = impl_->url.port == "80";
  req.set(http::field::host, default_port ? impl_->url.host : impl_->url.host + ":" + impl_->url.port);
  req.set(http::field::user_agent, "dserve-bench-serving");
  req.set(http::field::accept, "*/*");
  for (const auto& [k, v] : impl_->headers) req.set(k, v);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.keep_alive(true);
  req.prepare_payload();
  std::make_shared<Exchange>(impl_.get(), std::move(req), std::move(cb))->start();
}

void HttpClient::at(Clock::time_point t, std::function<void()> fn) {
  auto timer = std::make_shared<net::steady_timer>(impl_->io, t);
  timer->async_wait([timer, fn = std::move(fn)](beast::error_code) { fn(); });
}

void HttpClient::run() {
  impl_->io.restart();
  impl_->io.run();
}

Result<HttpResponse> HttpClient::fetch(const std::string& method, const std::string& path, std::string body) {
  HttpResponse resp;
  Status st = error("request ", method, " ", path, " did not complete");
  HttpCallbacks cb;
  cb.on_headers = [&](int status, const std::string&) { resp.status = status; };
  cb.on_body = [&](std::string_view b, Clock::time_point) { resp.body.append(b); };
  cb.on_done = [&](const Status& s, Clock::time_point) { st = s; };
  request(method, path, std::move(body), std::move(cb));
  run();
  if (!st.is_ok()) return st;
  return resp;
}

}  // namespace ds::bench
