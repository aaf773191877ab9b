"""A tiny SGLang/OpenAI-compatible HTTP server for testing `dserve bench-serving` (Python stdlib only).

Streams SSE over chunked HTTP/1.1 with keep-alive, counts completion tokens like a real server, and
records every request so the test can check the benchmark's totals against what the server saw.
Routes: GET /v1/models, /get_server_info, /stats; POST /generate, /v1/completions, /v1/chat/completions.
"""
import http.server
import json
import sys
import threading
import time


class State:
    def __init__(self, fail_every=0, token_delay=0.002, api_key="", accept_length=None, ids_only=False):
        self.lock = threading.Lock()
        self.fail_every = fail_every  # every k-th request (by arrival) answers HTTP 500
        self.token_delay = token_delay
        self.api_key = api_key
        self.accept_length = accept_length
        self.ids_only = ids_only  # like --skip-tokenizer-init: empty text, output_ids only
        self.seq = 0
        self.live = 0
        self.peak_live = 0
        self.records = []  # one per generation request, in arrival order


def make_handler(state):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _chunk(self, data):
            b = data.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()

        def _authorized(self):
            if not state.api_key:
                return True
            if self.headers.get("Authorization") == "Bearer " + state.api_key:
                return True
            self._json(401, {"error": {"message": "bad api key"}})
            return False

        def do_GET(self):
            if self.path != "/stats" and not self._authorized():
                return
            if self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": "fake-model", "object": "model"}]})
            elif self.path == "/get_server_info":
                st = {} if state.accept_length is None else {"avg_spec_accept_length": state.accept_length}
                self._json(200, {"internal_states": [st]})
            elif self.path == "/stats":
                with state.lock:
                    self._json(200, {"records": state.records, "peak_live": state.peak_live})
            else:
                self._json(404, {"error": "no route"})

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(n) or b"{}")
            if not self._authorized():
                return
            if self.path == "/flush_cache":
                self._json(200, {})
                return
            if self.path not in ("/generate", "/v1/completions", "/v1/chat/completions"):
                self._json(404, {"error": "no route"})
                return
            native = self.path == "/generate"
            chat = self.path == "/v1/chat/completions"
            if native:
                sp = req.get("sampling_params", {})
                max_new = sp.get("max_new_tokens", 128)
                ignore_eos = sp.get("ignore_eos", False)
                prompt = req.get("input_ids", req.get("text"))
            else:
                max_new = req.get("max_completion_tokens", req.get("max_tokens", 16))
                ignore_eos = req.get("ignore_eos", False)
                prompt = req["messages"][0]["content"] if chat else req.get("prompt")
            prompt_len = len(prompt) if isinstance(prompt, list) else len(prompt.split())
            stream = bool(req.get("stream", False))
            # Without ignore_eos the fake model "stops" after half the tokens.
            produced = max_new if ignore_eos else max(1, max_new // 2)
            with state.lock:
                state.seq += 1
                seq = state.seq
                fail = state.fail_every > 0 and seq % state.fail_every == 0
                state.live += 1
                state.peak_live = max(state.peak_live, state.live)
                rec = {"seq": seq, "route": self.path, "prompt_len": prompt_len, "max_new": max_new,
                       "ignore_eos": ignore_eos, "stream": stream, "failed": fail,
                       "completion_tokens": 0 if fail else produced, "extra": req.get("bench_tag"),
                       "include_usage": (req.get("stream_options") or {}).get("include_usage", False)}
                state.records.append(rec)
            try:
                if fail:
                    self._json(500, {"error": {"message": "injected failure %d" % seq}})
                    return
                self._answer(native, chat, stream, prompt_len, produced, req)
            finally:
                with state.lock:
                    state.live -= 1

        def _answer(self, native, chat, stream, prompt_len, produced, req):
            words = ["w%d " % i for i in range(produced)]
            if not stream:
                time.sleep(state.token_delay * produced)
                text = "".join(words)
                if native:
                    self._json(200, {"text": "" if state.ids_only else text, "output_ids": list(range(produced)),
                                     "meta_info": {"prompt_tokens": prompt_len, "completion_tokens": produced}})
                else:
                    choice = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
                    self._json(200, {"choices": [choice], "usage": {"prompt_tokens": prompt_len,
                                                                   "completion_tokens": produced}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(produced):
                time.sleep(state.token_delay)
                if native:
                    text = "" if state.ids_only else "".join(words[: i + 1])
                    ev = {"text": text, "output_ids": [i],
                          "meta_info": {"prompt_tokens": prompt_len, "completion_tokens": i + 1}}
                elif chat:
                    ev = {"choices": [{"index": 0, "delta": {"content": words[i]}}]}
                else:
                    ev = {"choices": [{"index": 0, "text": words[i]}]}
                self._chunk("data: " + json.dumps(ev) + "\n\n")
            if not native and (req.get("stream_options") or {}).get("include_usage"):
                self._chunk("data: " + json.dumps({"choices": [], "usage": {
                    "prompt_tokens": prompt_len, "completion_tokens": produced}}) + "\n\n")
            self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


class FakeServer:
    def __init__(self, **kwargs):
        self.state = State(**kwargs)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(self.state))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.httpd.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":  # manual use: python3 fake_server.py [port]
    srv = FakeServer()
    if len(sys.argv) > 1:
        srv.httpd.server_close()
        srv.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), make_handler(srv.state))
    print(srv.url, flush=True)
    srv.httpd.serve_forever()
