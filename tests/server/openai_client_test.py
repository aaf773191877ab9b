#!/usr/bin/env python3
"""Runs openai_client_test.mjs (the official openai npm client) against `dserve serve` with the fake engine and
the tiny byte tokenizer. Installs tests/server/node_modules with `npm install` the first time (needs the npm
registry). Usage: openai_client_test.py [path/to/dserve]. DSERVE_TEST_URL=http://host:port (with DSERVE_MODEL,
DSERVE_API_KEY) runs the client against an already running server instead, without exact-text checks."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def ensure_node_modules():
    if os.path.isfile(os.path.join(H.HERE, "node_modules", "openai", "package.json")):
        return
    print("openai_client_test: npm install into tests/server/node_modules", flush=True)
    subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"], cwd=H.HERE, check=True)


def main():
    ensure_node_modules()
    env = dict(os.environ)
    external = os.environ.get("DSERVE_TEST_URL")
    if external:
        server = H.ExternalServer(external)
        env.setdefault("DSERVE_MODEL", "default")
        env["OPENAI_API_KEY"] = os.environ.get("DSERVE_API_KEY", "none")
        env["DSERVE_EXPECT_TEXT"] = "0"
    else:
        tok = H.write_tiny_tokenizer(os.path.join(tempfile.mkdtemp(prefix="dserve_openai_test_"), "tok"))
        server = H.Server(H.dserve_binary(sys.argv),
                          H.fake_server_args(tok, ["--api-key", "test-key", "--context-length", "1000000"])).start()
        env["DSERVE_MODEL"] = "tiny"
        env["OPENAI_API_KEY"] = "test-key"
        env["DSERVE_EXPECT_TEXT"] = "1"
    env["OPENAI_BASE_URL"] = "http://%s:%d/v1" % (server.host, server.port)
    try:
        rc = subprocess.run(["node", os.path.join(H.HERE, "openai_client_test.mjs")], cwd=H.HERE, env=env,
                            timeout=600).returncode
        if not external:
            # Every aborted stream must have been released by the engine.
            ok = H.wait_until(lambda: H.engine_state(server, api_key="test-key")["num_running_reqs"] == 0, 5)
            if not ok:
                print("FAIL engine still has running requests after the client aborted its stream")
                rc = rc or 1
    finally:
        code = server.stop()
        if not external and code != 0:
            print("server exit code %r; stderr tail:\n%s" % (code, "\n".join(server.stderr_lines[-20:])))
            rc = rc or 1
    sys.exit(rc)


if __name__ == "__main__":
    main()
