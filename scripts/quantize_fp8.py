#!/usr/bin/env python3
# Writes a block-FP8 copy of a BF16 DeepSeek checkpoint in DeepSeek-V3's published FP8 format
# (float8_e4m3fn weights + float32 weight_scale_inv per 128x128 block, quantization_config as V3).
"""Block-FP8 quantization of a DeepSeek V3-family checkpoint, in pure Python (no numpy or torch needed).

    python3 scripts/quantize_fp8.py models/dserve-demo models/dserve-demo-fp8

Quantized (spec 2.5): every attention linear, the dense MLP, routed and shared experts, the MTP block's
attention and MoE. Kept as they are: embeddings, lm_head, shared_head.head, norms, router, correction bias,
eh_proj. Per 128x128 block (zero-padded at ragged edges): s = amax / 448 (1 when the block is all zero),
q = e4m3(clamp(w / s, -448, 448)) with round-to-nearest-even; float32 arithmetic as torch does, so the output
equals torch's `(w / s).clamp(-448, 448).to(torch.float8_e4m3fn)` bit for bit. Shards and the index are
mirrored; config.json gains quantization_config; generation and tokenizer files are copied.
"""

import array
import json
import math
import os
import re
import shutil
import struct
import sys

BLOCK = 128
FP8_MAX = 448.0
QUANT_RE = re.compile(r"\.(self_attn\.(q_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)"
                      r"|mlp\.(experts\.\d+\.|shared_experts\.)?(gate_proj|up_proj|down_proj))\.weight$")
COPY_FILES = ("generation_config.json", "tokenizer.json", "tokenizer_config.json")
QUANT_CONFIG = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                "weight_block_size": [BLOCK, BLOCK]}
_F32 = struct.Struct("<f")


def f32(x):
    """Round a Python float to the nearest float32 (ties to even), as float32 arithmetic would."""
    return _F32.unpack(_F32.pack(x))[0]


def e4m3(v):
    """float (|v| <= 448) -> float8_e4m3fn byte, round to nearest even. Subnormals below 2^-6 in steps of 2^-9."""
    sign = 0x80 if math.copysign(1.0, v) < 0 else 0
    a = abs(v)
    if a == 0.0:
        return sign
    e = max(math.frexp(a)[1] - 1, -6)      # a in [2^e, 2^(e+1)), or subnormal
    step = math.ldexp(1.0, e - 3)
    q = round(a / step)                    # exact quotient (power of two); round() is half-to-even
    if q == 0:
        return sign
    val = q * step
    e2 = math.frexp(val)[1] - 1
    if e2 < -6:
        return sign | int(val / math.ldexp(1.0, -9))
    return sign | ((e2 + 7) << 3) | (int(val / math.ldexp(1.0, e2 - 3)) - 8)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    return header, data, meta


def bf16_to_floats(raw):
    h = array.array("H")
    h.frombytes(raw)
    if sys.byteorder != "little":
        h.byteswap()
    w = array.array("I", (x << 16 for x in h))
    return array.array("f", w.tobytes())


def quantize(values, rows, cols):
    """values: float32 row-major [rows, cols] -> (fp8 bytes, float32 scales [ceil(rows/128), ceil(cols/128)])."""
    rb, cb = -(-rows // BLOCK), -(-cols // BLOCK)
    q = bytearray(rows * cols)
    scales = array.array("f", [0.0] * (rb * cb))
    for bi in range(rb):
        r0, r1 = bi * BLOCK, min(rows, bi * BLOCK + BLOCK)
        for bj in range(cb):
            c0, c1 = bj * BLOCK, min(cols, bj * BLOCK + BLOCK)
            amax = 0.0
            for r in range(r0, r1):
                seg = values[r * cols + c0:r * cols + c1]
                m = max(max(seg), -min(seg))
                if m > amax:
                    amax = m
            s = f32(amax / FP8_MAX)
            if not s > 0:
                s = 1.0
            scales[bi * cb + bj] = s
            for r in range(r0, r1):
                base = r * cols
                for c in range(c0, c1):
                    x = f32(values[base + c] / s)
                    if x > FP8_MAX:
                        x = FP8_MAX
                    elif x < -FP8_MAX:
                        x = -FP8_MAX
                    q[base + c] = e4m3(x)
    return bytes(q), scales


def write_safetensors(path, tensors, meta):
    """tensors: name -> (dtype, shape, bytes), written in name order with 8-byte aligned header."""
    header, off = {}, 0
    for k in sorted(tensors):
        dt, shape, b = tensors[k]
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    if meta is not None:
        header["__metadata__"] = meta
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for k in sorted(tensors):
            f.write(tensors[k][2])
    return off


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = argv[1], argv[2]
    assert sys.byteorder == "little", "safetensors data is little-endian; this script assumes the host is too"
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    if config.get("quantization_config"):
        print(f"quantize_fp8: {src} is already quantized", file=sys.stderr)
        return 1
    shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    if not shards:
        print(f"quantize_fp8: no .safetensors in {src}", file=sys.stderr)
        return 1
    os.makedirs(dst, exist_ok=True)
    weight_map, total, n_q = {}, 0, 0
    for shard in shards:
        header, data, meta = read_safetensors(os.path.join(src, shard))
        out = {}
        for name, h in header.items():
            a, b = h["data_offsets"]
            raw = data[a:b]
            if QUANT_RE.search(name) and h["dtype"] == "BF16" and len(h["shape"]) == 2:
                rows, cols = h["shape"]
                q, s = quantize(bf16_to_floats(raw), rows, cols)
                sb = s.tobytes()
                out[name] = ("F8_E4M3", [rows, cols], q)
                out[name + "_scale_inv"] = ("F32", [-(-rows // BLOCK), -(-cols // BLOCK)], sb)
                n_q += 1
            else:
                out[name] = (h["dtype"], h["shape"], raw)
        total += write_safetensors(os.path.join(dst, shard), out, meta)
        weight_map.update({k: shard for k in out})
        print(f"quantize_fp8: {shard}: {len(out)} tensors", flush=True)
    if os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
            f.write("\n")
    config["quantization_config"] = QUANT_CONFIG
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    for name in COPY_FILES:
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
    print(f"quantize_fp8: wrote {dst}: {n_q} block-FP8 weights, {total / 1e6:.1f} MB of tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
