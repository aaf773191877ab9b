// Helpers of the HTTP tests: a tiny byte-level BPE tokenizer (ids 0..255 are the bytes, 256/257 are BOS/EOS,
// no merges) whose decoding the tests can predict, and a blocking loopback HTTP/1.1 client on POSIX sockets.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ds::testing {

inline std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

inline constexpr const char* kTinyBos = "<｜begin▁of▁sentence｜>";
inline constexpr const char* kTinyEos = "<｜end▁of▁sentence｜>";

// tokenizer.json of the tiny tokenizer: GPT-2's byte alphabet, token id = byte value.
inline std::string tiny_tokenizer_json() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<uint32_t> cs(bs.begin(), bs.end());
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + n++);
    }
  }
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t i = 0; i < bs.size(); ++i) vocab[utf8_of(cs[i])] = bs[i];
  nlohmann::ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = nlohmann::ordered_json::array();
  int id = 256;
  for (const char* t : {kTinyBos, kTinyEos}) {
    j["added_tokens"].push_back({{"id", id++}, {"content", t}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["post_processor"] = nullptr;
  j["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  j["model"] = {{"type", "BPE"},         {"dropout", nullptr},        {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", false},
                {"byte_fallback", false}, {"vocab", vocab},           {"merges", nlohmann::ordered_json::array()}};
  return j.dump();
}

inline std::string tiny_tokenizer_config_json() {
  nlohmann::ordered_json c;
  c["add_bos_token"] = true;
  c["add_eos_token"] = false;
  c["bos_token"] = kTinyBos;
  c["eos_token"] = kTinyEos;
  return c.dump();
}

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
  bool ok = false;                             // a complete response was read
};

// One blocking connection to 127.0.0.1:port.
class TestConnection {
 public:
  explicit TestConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    timeval tv{20, 0};
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~TestConnection() { close(); }
  bool connected() const { return fd_ >= 0; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  bool send_raw(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  bool send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::vector<std::string>& headers = {"Content-Type: application/json"}) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n";
    for (const auto& h : headers) req += h + "\r\n";
    if (!body.empty() || method == "POST" || method == "PUT") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    return send_raw(req);
  }
  // Reads one response (Content-Length, chunked, or until close).
  HttpReply read_reply() {
    HttpReply r;
    std::string line;
    if (!read_line(&line)) return r;
    if (line.size() < 12) return r;
    r.status = std::atoi(line.c_str() + 9);
    while (read_line(&line) && !line.empty()) {
      auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string k = line.substr(0, colon);
      for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      r.headers[k] = v;
    }
    if (r.status == 100) return read_reply();
    if (r.headers.count("transfer-encoding")) {
      for (;;) {
        if (!read_line(&line)) return r;
        const size_t size = std::strtoul(line.c_str(), nullptr, 16);
        if (size == 0) {
          read_line(&line);
          break;
        }
        std::string chunk;
        if (!read_n(size, &chunk)) return r;
        r.body += chunk;
        read_line(&line);
      }
    } else if (r.headers.count("content-length")) {
      if (!read_n(std::stoul(r.headers["content-length"]), &r.body)) return r;
    } else {
      char buf[4096];
      for (;;) {
        if (!buf_.empty()) {
          r.body += buf_;
          buf_.clear();
        }
        ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
        if (n <= 0) break;
        r.body.append(buf, static_cast<size_t>(n));
      }
    }
    r.ok = true;
    return r;
  }
  // Reads response headers only (for streams read piecewise with read_some()).
  int read_status_and_headers() {
    std::string line;
    if (!read_line(&line) || line.size() < 12) return 0;
    int status = std::atoi(line.c_str() + 9);
    while (read_line(&line) && !line.empty()) {
    }
    return status;
  }
  // Reads whatever bytes are available (at least one), or "" on close/timeout.
  std::string read_some() {
    if (!buf_.empty()) {
      std::string s;
      s.swap(buf_);
      return s;
    }
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

 private:
  bool fill() {
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    buf_.append(buf, static_cast<size_t>(n));
    return true;
  }
  bool read_line(std::string* line) {
    for (;;) {
      auto p = buf_.find("\r\n");
      if (p != std::string::npos) {
        *line = buf_.substr(0, p);
        buf_.erase(0, p + 2);
        return true;
      }
      if (!fill()) return false;
    }
  }
  bool read_n(size_t n, std::string* out) {
    while (buf_.size() < n)
      if (!fill()) return false;
    *out = buf_.substr(0, n);
    buf_.erase(0, n);
    return true;
  }
  int fd_ = -1;
  std::string buf_;
};

inline HttpReply http_call(int port, const std::string& method, const std::string& path, const std::string& body = "",
                           const std::vector<std::string>& headers = {"Content-Type: application/json"}) {
  TestConnection c(port);
  if (!c.connected() || !c.send_request(method, path, body, headers)) return HttpReply{};
  return c.read_reply();
}

// The JSON payloads of an SSE body ("data: ...\n\n" events), "[DONE]" included as a string.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

}  // namespace ds::testing
