// Tests of the bench-serving HTTP client against a small blocking socket server in the test: chunked SSE
// delivered piece by piece with arrival times, keep-alive reuse, a silently closed idle connection
// retried once, close-delimited bodies, refused connections, and many concurrent requests on one thread.
#include "bench/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

class TestServer {
 public:
  explicit TestServer(bool close_after_each = false) : close_after_each_(close_after_each) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(fd_, 256), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~TestServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    accept_thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : conns_) t.join();
  }
  int port() const { return port_; }
  int connections() const { return accepted_.load(); }

 private:
  void accept_loop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      ++accepted_;
      std::lock_guard<std::mutex> lock(mu_);
      conns_.emplace_back([this, c] { serve(c); });
    }
  }
  static bool send_all(int c, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  void serve(int c) {
    std::string buf;
    char tmp[4096];
    for (;;) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) return (void)::close(c);
        buf.append(tmp, static_cast<size_t>(n));
      }
      const std::string head = buf.substr(0, end);
      size_t body_len = 0;
      if (auto p = head.find("Content-Length: "); p != std::string::npos) body_len = std::stoul(head.substr(p + 16));
      while (buf.size() < end + 4 + body_len) {
        ssize_t n = ::recv(c, tmp, sizeof(tmp), 0);
        if (n <= 0) return (void)::close(c);
        buf.append(tmp, static_cast<size_t>(n));
      }
      const std::string path = head.substr(head.find(' ') + 1, head.find(' ', head.find(' ') + 1) - head.find(' ') - 1);
      const std::string body = buf.substr(end + 4, body_len);
      buf.erase(0, end + 4 + body_len);
      if (path == "/sse") {
        send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        for (int i = 1; i <= 3; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(30));
          const std::string ev = "data: " + std::to_string(i) + "\n\n";
          char size[16];
          std::snprintf(size, sizeof(size), "%zx\r\n", ev.size());
          send_all(c, size + ev + "\r\n");
        }
        send_all(c, "0\r\n\r\n");
      } else if (path == "/close") {  // no length: the body ends when the connection does
        send_all(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbye");
        ::close(c);
        return;
      } else {  // echo
        send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size() + path.size()) + "\r\n\r\n" + path + body);
      }
      if (close_after_each_) {  // like a server whose keep-alive timeout expired: no Connection: close
        ::close(c);
        return;
      }
    }
  }

  int fd_ = -1;
  int port_ = 0;
  bool close_after_each_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> conns_;
};

HttpClient make_client(int port) {
  auto url = parse_base_url("http://127.0.0.1:" + std::to_string(port));
  EXPECT_TRUE(url.is_ok());
  return HttpClient(*url, {}, 10.0);
}

TEST(BenchHttpClient, ParseBaseUrl) {
  auto u = parse_base_url("http://example.com:8000/api/");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->path_prefix, "/api");
  u = parse_base_url("http://[::1]:30000");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(parse_base_url("localhost")->port, "80");
  EXPECT_FALSE(parse_base_url("https://x").is_ok());
  EXPECT_FALSE(parse_base_url("http://x:abc").is_ok());
}

TEST(BenchHttpClient, StreamsChunksAsTheyArrive) {
  TestServer srv;
  auto url = parse_base_url("http://127.0.0.1:" + std::to_string(srv.port()));
  HttpClient client(*url, {{"Authorization", "Bearer k"}}, 10.0);
  ASSERT_TRUE(client.resolve().is_ok());
  std::vector<std::pair<std::string, Clock::time_point>> pieces;
  int status = 0;
  std::string ctype;
  bool done = false;
  HttpCallbacks cb;
  cb.on_headers = [&](int s, const std::string& ct) { status = s, ctype = ct; };
  cb.on_body = [&](std::string_view b, Clock::time_point t) { pieces.emplace_back(std::string(b), t); };
  cb.on_done = [&](const Status& st, Clock::time_point) {
    EXPECT_TRUE(st.is_ok()) << st.message();
    done = true;
  };
  client.request("POST", "/sse", "{}", cb);
  client.run();
  ASSERT_TRUE(done);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(ctype, "text/event-stream");
  ASSERT_EQ(pieces.size(), 3u);  // one delivery per chunk: the server pauses 30 ms between them
  std::string all;
  for (const auto& p : pieces) all += p.first;
  EXPECT_EQ(all, "data: 1\n\ndata: 2\n\ndata: 3\n\n");
  for (size_t i = 1; i < pieces.size(); ++i)
    EXPECT_GE(pieces[i].second - pieces[i - 1].second, std::chrono::milliseconds(20));
}

TEST(BenchHttpClient, KeepAliveReuseAndCloseDelimited) {
  TestServer srv;
  HttpClient client = make_client(srv.port());
  ASSERT_TRUE(client.resolve().is_ok());
  for (int i = 0; i < 3; ++i) {
    auto r = client.fetch("POST", "/echo", "{\"i\":" + std::to_string(i) + "}");
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->body, "/echo{\"i\":" + std::to_string(i) + "}");
  }
  EXPECT_EQ(srv.connections(), 1);  // one kept-alive connection served all three
  auto r = client.fetch("GET", "/close");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->body, "bye");
  r = client.fetch("GET", "/echo");  // the closed connection is not reused
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(srv.connections(), 2);
}

TEST(BenchHttpClient, RetriesOnceWhenAnIdleConnectionWasClosed) {
  TestServer srv(/*close_after_each=*/true);
  HttpClient client = make_client(srv.port());
  ASSERT_TRUE(client.resolve().is_ok());
  for (int i = 0; i < 3; ++i) {
    auto r = client.fetch("POST", "/echo", "x");
    ASSERT_TRUE(r.is_ok()) << "request " << i << ": " << r.status().message();
    EXPECT_EQ(r->body, "/echox");
  }
  EXPECT_EQ(srv.connections(), 3);
}

TEST(BenchHttpClient, ConnectionRefused) {
  int port = 0;
  {
    TestServer srv;  // a port that was just free
    port = srv.port();
  }
  HttpClient client = make_client(port);
  ASSERT_TRUE(client.resolve().is_ok());
  auto r = client.fetch("GET", "/x");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("connect failed"), std::string::npos) << r.status().message();
}

TEST(BenchHttpClient, ManyConcurrentStreamsOnOneThread) {
  TestServer srv;
  HttpClient client = make_client(srv.port());
  ASSERT_TRUE(client.resolve().is_ok());
  const int n = 40;
  int ok = 0;
  std::vector<std::string> bodies(n);
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    HttpCallbacks cb;
    cb.on_body = [&bodies, i](std::string_view b, Clock::time_point) { bodies[i].append(b); };
    cb.on_done = [&ok](const Status& st, Clock::time_point) { ok += st.is_ok(); };
    client.request("POST", "/sse", "{}", cb);
  }
  client.run();
  EXPECT_EQ(ok, n);
  for (const auto& b : bodies) EXPECT_EQ(b, "data: 1\n\ndata: 2\n\ndata: 3\n\n");
  // Concurrent, not one after another: 40 x 90 ms serially would take 3.6 s.
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(2000));
}

TEST(BenchHttpClient, TimersRunInOrder) {
  TestServer srv;
  HttpClient client = make_client(srv.port());
  std::vector<int> order;
  const auto now = Clock::now();
  client.at(now + std::chrono::milliseconds(30), [&] { order.push_back(2); });
  client.at(now + std::chrono::milliseconds(10), [&] { order.push_back(1); });
  client.at(now - std::chrono::milliseconds(10), [&] { order.push_back(0); });  // already due
  client.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace ds::bench
