#!/usr/bin/env python3
"""Issue 5 acceptance on the CPU: `dserve serve` with no --model-path serves the bundled demo model, and
`dserve bench-accuracy --num-shots 5` on 200 fresh arithmetic questions scores >= 95%.

Usage: bench_accuracy_test.py DSERVE_BINARY
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SOURCE_DIR, Server  # noqa: E402

DSERVE = sys.argv[1]
failures = []

with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "arith.jsonl")
    with open(data, "w") as f:
        subprocess.run([sys.executable, os.path.join(SOURCE_DIR, "scripts", "make_arithmetic_questions.py"),
                        "--num", "205", "--seed", "20261122"], stdout=f, check=True)
    server = Server(DSERVE, [])  # no --model-path: the bundled models/dserve-demo
    server.start()
    try:
        p = subprocess.run([DSERVE, "bench-accuracy", "--data-path", data, "--num-shots", "5", "--num-questions", "200",
                            "--parallel", "32", "--port", str(server.port)], capture_output=True, text=True, timeout=1200)
    finally:
        server.stop()
    print(p.stdout)
    m = re.search(r"^Accuracy: ([0-9.]+)$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        failures.append(f"bench-accuracy exited {p.returncode}: {p.stderr.strip()[-500:]}")
    elif float(m.group(1)) < 0.95:
        failures.append(f"accuracy {m.group(1)} < 0.95")
    for line in ("Invalid: ", "Latency: ", "Output throughput: "):
        if line not in p.stdout:
            failures.append(f"missing line {line!r}")
    if not any("models/dserve-demo" in l for l in server.stderr_lines + server.stdout_lines):
        failures.append("the server did not report serving models/dserve-demo")

for f in failures:
    print("FAIL:", f)
print(f"{5 - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
