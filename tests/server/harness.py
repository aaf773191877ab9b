"""Harness of the server end-to-end tests (stdlib only): starts `dserve serve` on a free loopback port (or uses
an already running server given by DSERVE_TEST_URL=http://host:port), raw HTTP helpers over http.client and
sockets, SSE parsing, and the tiny byte tokenizer + FakeEngine recurrence the tests predict outputs from."""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))

# A backend that computes in bf16 (DSERVE_TEST_SERVE_ARGS="--device cuda") matches an fp32 reference only up to
# the first near-tie, and batched decoding differs from a single sequence by rounding: the CUDA issue's
# acceptance trusts tokens whose reference top-2 margin exceeds 0.1 and logprobs within 5e-2 there (the fp32
# CPU backend: margins above 1e-3, logprobs within 5e-3).
BF16_BACKEND = "cuda" in os.environ.get("DSERVE_TEST_SERVE_ARGS", "")
MIN_MARGIN = 0.1 if BF16_BACKEND else 1e-3
LOGPROB_TOL = 5e-2 if BF16_BACKEND else 5e-3
# Logprobs of generated tokens on a bf16 backend also carry the bf16 latent cache and the decode kernels'
# rounding (absorbed attention, small-M GEMMs), step after step: they are held to the trust margin itself, 0.1.
# Measured on the v2_lite fixture, H100, 2026-11-25: max 0.057 / mean 0.014 with the small-M decode GEMMs,
# max 0.026 / mean 0.008 with cuBLASLt (same positions; each kernel is within bf16 rounding of the fp32 product
# in the GPU suite, so neither is wrong: the order of roundings differs).
GEN_LOGPROB_TOL = 0.1 if BF16_BACKEND else 5e-3
# Greedy outputs compared across two decode paths (the server's batched, possibly retracted and re-prefilled
# sequence vs `dserve generate` alone): each side's logprobs carry up to ~0.06 of that rounding, so a top-2 margin
# under about twice it may flip (seen on CUDA: a margin of 0.1087, session 21, with two kernel versions).
GEN_MIN_MARGIN = 0.15 if BF16_BACKEND else MIN_MARGIN

# scripts/sanitize.sh runs the CPU suite under ASan + UBSan (DSERVE_TEST_SANITIZED=1), where the server is an order
# of magnitude slower: load tests scale their load down and their waits up there (the sanitizer run checks memory
# and undefined behaviour; the full loads run in the normal build).
SANITIZED = os.environ.get("DSERVE_TEST_SANITIZED") == "1"


class Server:
    """A `dserve serve` child process. port 0 -> the port is read from its 'ready on' line."""

    def __init__(self, binary, args, ready_timeout=180, env=None):
        self.binary = binary
        self.args = list(args)
        self.env = env  # extra environment variables of the child (added to this process's)
        self.ready_timeout = ready_timeout
        self.proc = None
        self.host = "127.0.0.1"
        self.port = None
        self.stdout_lines = []
        self.stderr_lines = []
        self._ready = threading.Event()

    def start(self):
        # DSERVE_TEST_SERVE_ARGS (e.g. "--device cuda") runs the same tests on another backend.
        extra = os.environ.get("DSERVE_TEST_SERVE_ARGS", "").split()
        cmd = [self.binary, "serve", "--host", self.host, "--port", "0"] + self.args + extra
        env = dict(os.environ, **self.env) if self.env else None
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

        def read_out():
            for line in self.proc.stdout:
                self.stdout_lines.append(line.rstrip("\n"))
                m = re.search(r"ready on http://([0-9.]+):(\d+)", line)
                if m:
                    self.port = int(m.group(2))
                    self._ready.set()
            self._ready.set()

        def read_err():
            for line in self.proc.stderr:
                self.stderr_lines.append(line.rstrip("\n"))

        threading.Thread(target=read_out, daemon=True).start()
        threading.Thread(target=read_err, daemon=True).start()
        if not self._ready.wait(self.ready_timeout) or self.port is None:
            self.stop()
            raise RuntimeError("server did not become ready: " + " | ".join(self.stderr_lines[-20:]))
        return self

    def stop(self, timeout=15):
        """SIGTERM, then wait; returns the exit code (kills after `timeout`)."""
        if self.proc is None:
            return None
        code = self.proc.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                code = None
        else:
            code = self.proc.returncode
        time.sleep(0.05)  # let the reader threads drain the pipes
        for f in (self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass
        return code

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class ExternalServer:
    """A server that is already running (DSERVE_TEST_URL)."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.host = u.hostname
        self.port = u.port or 80
        self.stdout_lines = []
        self.stderr_lines = []

    def start(self):
        return self

    def stop(self, timeout=0):
        return None


class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "Reply(%d, %r)" % (self.status, self.body[:300])


def request(server, method, path, body=None, headers=None, timeout=120, api_key=None):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    h = {} if headers is None else dict(headers)
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        h.setdefault("Content-Type", "application/json")
    if api_key:
        h["Authorization"] = "Bearer " + api_key
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, data)


def post(server, path, body, **kw):
    return request(server, "POST", path, body, **kw)


def sse_events(body):
    """The data payloads of an SSE body, in order ('[DONE]' included). A block may name its event first (the
    Responses API's `event: <type>` line), which must be its data's "type"."""
    if isinstance(body, bytes):
        body = body.decode("utf-8")
    out = []
    for block in body.split("\n\n"):
        event = None
        if block.startswith("event: ") and "\n" in block:
            event, block = block.split("\n", 1)
            event = event[len("event: "):]
        if block.startswith("data: "):
            out.append(block[len("data: "):])
            if event is not None and json.loads(out[-1]).get("type") != event:
                raise AssertionError("SSE event %r carries data of type %r" % (event, json.loads(out[-1]).get("type")))
        elif block.strip():
            raise AssertionError("malformed SSE block: %r" % block[:200])
    return out


def stream(server, path, body, api_key=None, timeout=300):
    """POSTs a streaming request; returns (status, [parsed JSON events], saw_done)."""
    r = post(server, path, body, api_key=api_key, timeout=timeout)
    if r.status != 200:
        return r.status, [r.json()], False
    events = sse_events(r.body)
    done = bool(events) and events[-1] == "[DONE]"
    return r.status, [json.loads(e) for e in events if e != "[DONE]"], done


def raw_exchange(server, data, read_timeout=10):
    """Sends raw bytes on a fresh connection; returns everything read until the server closes or times out."""
    s = socket.create_connection((server.host, server.port), timeout=read_timeout)
    try:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            if not b:
                break
            chunks.append(b)
            if b"\r\n\r\n" in b"".join(chunks) and b"Content-Length: " in b"".join(chunks):
                head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
                m = re.search(rb"Content-Length: (\d+)", head)
                if m and len(rest) >= int(m.group(1)):
                    break
        return b"".join(chunks)
    finally:
        s.close()


def status_of(raw):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", raw)
    return int(m.group(1)) if m else None


def trusted_prefix(g, min_margin=None):
    """A reference.json generate entry's output ids before the first near-tie (top2_margin[i] is output i's own
    margin: a float-order difference may flip that token and everything after it)."""
    min_margin = MIN_MARGIN if min_margin is None else min_margin
    n = len(g["output_ids"])
    for i, m in enumerate(g.get("top2_margin", [])):
        if m < min_margin:
            n = i
            break
    return g["output_ids"][:n]


def generate_ids(server, ids, max_new, **sampling):
    """POST /generate with token ids, greedy and ignoring EOS unless `sampling` says otherwise."""
    params = {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}
    params.update(sampling)
    return post(server, "/generate", {"input_ids": ids, "sampling_params": params})


def wait_until(cond, timeout=10.0, step=0.02):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(step)
    return cond()


def engine_state(server, api_key=None):
    return request(server, "GET", "/get_server_info", api_key=api_key).json()["internal_states"][0]


# ---- the tiny tokenizer (ids 0..255 = bytes, 256 BOS, 257 EOS) and the FakeEngine recurrence ----

TINY_BOS = "<｜begin▁of▁sentence｜>"
TINY_EOS = "<｜end▁of▁sentence｜>"


def _bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tiny_tokenizer(directory):
    os.makedirs(directory, exist_ok=True)
    vocab = {ch: b for b, ch in _bytes_to_unicode().items()}
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [
            {"id": 256 + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for i, t in enumerate([TINY_BOS, TINY_EOS])],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": []},
    }
    with open(os.path.join(directory, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": TINY_BOS, "eos_token": TINY_EOS}, f,
                  ensure_ascii=False)
    return directory


FAKE_OUTPUT_VOCAB = 128  # --fake-output-vocab of the tests: every output token is one ASCII byte


def continuation(last, n, vocab=FAKE_OUTPUT_VOCAB):
    out = []
    for _ in range(n):
        last = (last * 31 + 7) % vocab
        out.append(last)
    return out


def text_of(ids):
    return bytes(ids).decode("ascii")


def tiny_encode(text, bos=True):
    return ([256] if bos else []) + list(text.encode("utf-8"))


def fake_server_args(tokenizer_dir, extra=()):
    return ["--fake-engine", "--tokenizer-path", tokenizer_dir, "--fake-vocab-size", "258",
            "--fake-output-vocab", str(FAKE_OUTPUT_VOCAB), "--fake-step-us", "1000", "--chat-template", "v3",
            "--served-model-name", "tiny"] + list(extra)


def dserve_binary(argv):
    if len(argv) > 1 and not argv[1].startswith("-"):
        return argv[1]
    return os.environ.get("DSERVE_BINARY", os.path.join(SOURCE_DIR, "build", "dserve"))
