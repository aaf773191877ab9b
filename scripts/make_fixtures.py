#!/usr/bin/env python3
# Writes the tiny random DeepSeek test checkpoints (tests/fixtures/<name>/) in the official Hugging Face
# layout, plus reference.json computed by transformers in float32 from the files just written.
# Needs torch, transformers (5.x) and safetensors; see tests/fixtures/README.md for the format.
"""Generate tests/fixtures/{v2_lite,v2,v3,v3_fp8,v32,v3_fp8_h256,v3_fp8_mla128}.

Usage:  python3 scripts/make_fixtures.py --out tests/fixtures [--tar-dir DIR] [--only v3,v32] [--fp8-gpu]

Each checkpoint is written the way DeepSeek publishes it (per-expert tensors, bf16, F32 router bias,
block-FP8 + weight_scale_inv, MTP layer at model.layers.{num_hidden_layers}); transformers fuses the
experts itself on load. Every reference number comes from the model loaded back from those files.
"""

import argparse
import json
import math
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

TOP_K = 5
SCORE_LENS = [1, 5, 33, 130, 530]  # the last one passes original_max_position_embeddings (512)
GEN_LENS = [8, 70]
MAX_NEW_TOKENS = 24
MTP_PROMPTS = [2, 3]  # indices into the score prompts (lengths 33 and 130)
LOGIT_STD_TARGET = 3.0  # lm_head is rescaled so the mean per-position logit std is this
FP8_MAX = 448.0
BLOCK = 128
EOS_ID = 1

# Init std per tensor role: attention q/kv up-projections are a bit larger so attention is not flat.
STD_DEFAULT = 0.06
STD_QK = 0.10
STD_EMBED = 0.5
NORM_NOISE = 0.1
BIAS_RANGE = 0.05


# ----------------------------------------------------------------------------------------------
# Configs (official config.json layout, cf. /work/shared/configs/*.json)
# ----------------------------------------------------------------------------------------------

def _common(model_type, arch):
    return {
        "architectures": [arch],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "first_k_dense_replace": 1,
        "hidden_act": "silu",
        "hidden_size": 192,
        "initializer_range": 0.02,
        "intermediate_size": 256,
        "kv_lora_rank": 64,
        "max_position_embeddings": 2048,
        "model_type": model_type,
        "moe_intermediate_size": 64,
        "moe_layer_freq": 1,
        "n_routed_experts": 16,
        "num_attention_heads": 4,
        "num_experts_per_tok": 4,
        "num_hidden_layers": 3,
        "num_key_value_heads": 4,
        "q_lora_rank": 96,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "rms_norm_eps": 1e-06,
        "rope_theta": 10000,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "v_head_dim": 32,
        "vocab_size": 1024,
    }


def _yarn(mscale):
    return {
        "type": "yarn",
        "factor": 4,
        "original_max_position_embeddings": 512,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale": mscale,
        "mscale_all_dim": mscale,
    }


def make_config(name):
    if name == "v2_lite":
        c = _common("deepseek_v2", "DeepseekV2ForCausalLM")
        c.update(q_lora_rank=None, n_group=1, topk_group=1, topk_method="greedy", scoring_func="softmax",
                 norm_topk_prob=False, routed_scaling_factor=1.0, n_shared_experts=2, rope_scaling=_yarn(0.707))
    elif name == "v2":
        c = _common("deepseek_v2", "DeepseekV2ForCausalLM")
        c.update(n_group=4, topk_group=2, topk_method="group_limited_greedy", scoring_func="softmax",
                 norm_topk_prob=False, routed_scaling_factor=4.0, n_shared_experts=2, rope_scaling=_yarn(0.707))
    elif name in ("v3", "v3_fp8"):
        c = _common("deepseek_v3", "DeepseekV3ForCausalLM")
        c.update(ep_size=1, n_group=4, topk_group=2, topk_method="noaux_tc", scoring_func="sigmoid",
                 norm_topk_prob=True, routed_scaling_factor=2.5, n_shared_experts=1, num_nextn_predict_layers=1,
                 rope_scaling=_yarn(1.0))
        if name == "v3_fp8":
            c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                        "weight_block_size": [BLOCK, BLOCK]}
    elif name == "v3_fp8_h256":
        # FP8 with every MLP dimension a multiple of 128 (hidden 256, experts 128 wide, dense FFN 384): the
        # experts, shared expert and dense MLP run natively in e4m3 on CUDA (ops/fp8.h fp8_mlp_is_native).
        c = _common("deepseek_v3", "DeepseekV3ForCausalLM")
        c.update(ep_size=1, n_group=4, topk_group=2, topk_method="noaux_tc", scoring_func="sigmoid",
                 norm_topk_prob=True, routed_scaling_factor=2.5, n_shared_experts=1, num_nextn_predict_layers=0,
                 rope_scaling=_yarn(1.0), hidden_size=256, intermediate_size=384, moe_intermediate_size=128)
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [BLOCK, BLOCK]}
    elif name == "v3_fp8_mla128":
        # v3_fp8_h256 with MLA dimensions of 128 multiples (nope 128, v 128, kv_lora 256): kv_b_proj's W_UK / W_UV
        # run as FP8 products in the absorbed (decode) form (ops/fp8.h split_absorbed_fp8).
        c = _common("deepseek_v3", "DeepseekV3ForCausalLM")
        c.update(ep_size=1, n_group=4, topk_group=2, topk_method="noaux_tc", scoring_func="sigmoid",
                 norm_topk_prob=True, routed_scaling_factor=2.5, n_shared_experts=1, num_nextn_predict_layers=0,
                 rope_scaling=_yarn(1.0), hidden_size=256, intermediate_size=384, moe_intermediate_size=128,
                 qk_nope_head_dim=128, v_head_dim=128, kv_lora_rank=256)
        c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                    "weight_block_size": [BLOCK, BLOCK]}
    elif name == "v32":
        c = _common("deepseek_v32", "DeepseekV32ForCausalLM")
        c.update(ep_size=1, n_group=4, topk_group=2, topk_method="noaux_tc", scoring_func="sigmoid",
                 norm_topk_prob=True, routed_scaling_factor=2.5, n_shared_experts=1, num_nextn_predict_layers=0,
                 index_n_heads=16, index_head_dim=32, index_topk=64, rope_scaling=_yarn(1.0))
    else:
        raise ValueError(name)
    return c


FIXTURES = ["v2_lite", "v2", "v3", "v3_fp8", "v32", "v3_fp8_h256", "v3_fp8_mla128"]
SEEDS = {"v2_lite": 1001, "v2": 1002, "v3": 1003, "v3_fp8": 1003, "v32": 1005,
         "v3_fp8_h256": 1006, "v3_fp8_mla128": 1007}  # v3_fp8 = v3's weights
SHARDED = {"v2"}


# ----------------------------------------------------------------------------------------------
# Official tensor list: name -> (shape, role)
#   role: linear (block-FP8 in FP8 checkpoints), linear_bf16 (never FP8), norm, ln_bias, bias_f32,
#         embed, head
# ----------------------------------------------------------------------------------------------

def _layer_tensors(t, p, c, moe):
    d, H = c["hidden_size"], c["num_attention_heads"]
    dn, dr, dv = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    dc, dq = c["kv_lora_rank"], c["q_lora_rank"]
    t[p + "input_layernorm.weight"] = ((d,), "norm")
    t[p + "post_attention_layernorm.weight"] = ((d,), "norm")
    a = p + "self_attn."
    if dq is None:
        t[a + "q_proj.weight"] = ((H * (dn + dr), d), "linear_qk")
    else:
        t[a + "q_a_proj.weight"] = ((dq, d), "linear")
        t[a + "q_a_layernorm.weight"] = ((dq,), "norm")
        t[a + "q_b_proj.weight"] = ((H * (dn + dr), dq), "linear_qk")
    t[a + "kv_a_proj_with_mqa.weight"] = ((dc + dr, d), "linear")
    t[a + "kv_a_layernorm.weight"] = ((dc,), "norm")
    t[a + "kv_b_proj.weight"] = ((H * (dn + dv), dc), "linear_qk")
    t[a + "o_proj.weight"] = ((d, H * dv), "linear")
    if c["model_type"] == "deepseek_v32":
        ih, idim = c["index_n_heads"], c["index_head_dim"]
        x = a + "indexer."
        t[x + "wq_b.weight"] = ((ih * idim, dq), "linear_qk_bf16")
        t[x + "wk.weight"] = ((idim, d), "linear_bf16")
        t[x + "k_norm.weight"] = ((idim,), "norm")
        t[x + "k_norm.bias"] = ((idim,), "ln_bias")
        t[x + "weights_proj.weight"] = ((ih, d), "linear_bf16")
    m = p + "mlp."
    if not moe:
        I = c["intermediate_size"]
        t[m + "gate_proj.weight"] = ((I, d), "linear")
        t[m + "up_proj.weight"] = ((I, d), "linear")
        t[m + "down_proj.weight"] = ((d, I), "linear")
        return
    E, I = c["n_routed_experts"], c["moe_intermediate_size"]
    t[m + "gate.weight"] = ((E, d), "linear_bf16")
    if c["model_type"] != "deepseek_v2":
        t[m + "gate.e_score_correction_bias"] = ((E,), "bias_f32")
    for e in range(E):
        t[m + f"experts.{e}.gate_proj.weight"] = ((I, d), "linear")
        t[m + f"experts.{e}.up_proj.weight"] = ((I, d), "linear")
        t[m + f"experts.{e}.down_proj.weight"] = ((d, I), "linear")
    S = I * c["n_shared_experts"]
    t[m + "shared_experts.gate_proj.weight"] = ((S, d), "linear")
    t[m + "shared_experts.up_proj.weight"] = ((S, d), "linear")
    t[m + "shared_experts.down_proj.weight"] = ((d, S), "linear")


def official_tensors(c):
    t = {}
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    t["model.embed_tokens.weight"] = ((V, d), "embed")
    for l in range(L):
        _layer_tensors(t, f"model.layers.{l}.", c, moe=l >= c["first_k_dense_replace"])
    t["model.norm.weight"] = ((d,), "norm")
    t["lm_head.weight"] = ((V, d), "head")
    for k in range(c.get("num_nextn_predict_layers", 0) or 0):
        p = f"model.layers.{L + k}."
        t[p + "embed_tokens.weight"] = ((V, d), "embed")  # copy of the main embedding, as DeepSeek ships it
        t[p + "enorm.weight"] = ((d,), "norm")
        t[p + "hnorm.weight"] = ((d,), "norm")
        t[p + "eh_proj.weight"] = ((d, 2 * d), "linear_bf16")
        _layer_tensors(t, p, c, moe=True)
        t[p + "shared_head.norm.weight"] = ((d,), "norm")
        t[p + "shared_head.head.weight"] = ((V, d), "head")  # copy of lm_head
    return t


def is_fp8_role(role):
    return role in ("linear", "linear_qk")


# ----------------------------------------------------------------------------------------------
# Weights
# ----------------------------------------------------------------------------------------------

def bf16_round(x):
    return x.to(torch.bfloat16).to(torch.float32)


def init_master(c, seed):
    """float32 master weights in the official layout (before bf16 rounding / FP8 quantisation)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    L = c["num_hidden_layers"]
    for name, (shape, role) in official_tensors(c).items():
        if role == "norm":
            w = 1.0 + NORM_NOISE * torch.randn(shape, generator=g)
        elif role == "ln_bias":
            w = NORM_NOISE * torch.randn(shape, generator=g)
        elif role == "bias_f32":
            w = (torch.rand(shape, generator=g) * 2 - 1) * BIAS_RANGE
        elif role == "embed":
            w = STD_EMBED * torch.randn(shape, generator=g)
        elif role in ("linear_qk", "linear_qk_bf16"):
            w = STD_QK * torch.randn(shape, generator=g)
        else:  # linear, linear_bf16, head
            w = STD_DEFAULT * torch.randn(shape, generator=g)
        out[name] = w.float()
    for k in range(c.get("num_nextn_predict_layers", 0) or 0):
        p = f"model.layers.{L + k}."
        out[p + "embed_tokens.weight"] = out["model.embed_tokens.weight"].clone()
        out[p + "shared_head.head.weight"] = out["lm_head.weight"].clone()
    return out


def fp8_quantize(w):
    """Block-wise (128x128) e4m3 quantisation; ragged edge blocks are zero-padded for the amax."""
    rows, cols = w.shape
    rb, cb = -(-rows // BLOCK), -(-cols // BLOCK)
    pad = torch.zeros(rb * BLOCK, cb * BLOCK, dtype=torch.float32)
    pad[:rows, :cols] = w
    blocks = pad.view(rb, BLOCK, cb, BLOCK)
    amax = blocks.abs().amax(dim=(1, 3))
    scale = amax / FP8_MAX
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = (blocks / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    q = q.view(rb * BLOCK, cb * BLOCK)[:rows, :cols].contiguous()
    return q, scale.float().contiguous()


def fp8_dequantize(q, s):
    rows, cols = q.shape
    full = s.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:rows, :cols]
    return q.to(torch.float32) * full


def storage_tensors(c, master, fp8):
    """What goes into the safetensors files, and the float32 weights the model effectively uses."""
    store, eff = {}, {}
    for name, (shape, role) in official_tensors(c).items():
        w = master[name]
        if role == "bias_f32":
            store[name] = w.float().contiguous()
            eff[name] = w.float()
        elif fp8 and is_fp8_role(role):
            q, s = fp8_quantize(w)
            store[name] = q
            store[name + "_scale_inv"] = s
            eff[name] = fp8_dequantize(q, s)
        else:
            store[name] = w.to(torch.bfloat16).contiguous()
            eff[name] = bf16_round(w)
    return store, eff


def read_checkpoint(d):
    """All tensors of a checkpoint directory, float32, FP8 weights dequantised (W = q * scale)."""
    raw = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), framework="pt") as fh:
                for k in fh.keys():
                    raw[k] = fh.get_tensor(k)
    eff, dtypes = {}, {}
    for k, v in raw.items():
        if k.endswith("_scale_inv"):
            continue
        dtypes[k] = str(v.dtype).replace("torch.", "")
        s = raw.get(k + "_scale_inv")
        eff[k] = fp8_dequantize(v, s) if s is not None else v.to(torch.float32)
    return eff, dtypes, raw


def to_hf_layout(sd, c, prefix="", drop_mtp=True):
    """Official per-expert names -> transformers 5 internal names (fused 3-D expert tensors)."""
    L = c["num_hidden_layers"]
    out, experts = {}, {}
    for k, v in sd.items():
        m = re.match(r"model\.layers\.(\d+)\.", k)
        if drop_mtp and m and int(m.group(1)) >= L:
            continue
        m = re.match(r"(.*mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$", k)
        if m:
            experts.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = v
            continue
        out[k] = v
    for p, dct in experts.items():
        E = 1 + max(e for e, _ in dct)
        out[p + ".gate_up_proj"] = torch.stack([torch.cat([dct[(e, "gate")], dct[(e, "up")]], 0) for e in range(E)])
        out[p + ".down_proj"] = torch.stack([dct[(e, "down")] for e in range(E)])
    return out


def write_checkpoint(d, c, store, sharded):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=2, sort_keys=True)
        f.write("\n")
    meta = {"format": "pt"}
    if not sharded:
        save_file(store, os.path.join(d, "model.safetensors"), metadata=meta)
        return
    # Shard 1: embeddings and the first two layers; shard 2: the rest (last layer, norm, lm_head).
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    parts = [{}, {}]
    for k, v in store.items():
        m = re.match(r"model\.layers\.(\d+)\.", k)
        first = k == "model.embed_tokens.weight" or (m is not None and int(m.group(1)) < 2)
        parts[0 if first else 1][k] = v
    weight_map, total = {}, 0
    for name, part in zip(names, parts):
        save_file(part, os.path.join(d, name), metadata=meta)
        for k, v in part.items():
            weight_map[k] = name
            total += v.numel() * v.element_size()
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def hf_config_from_dict(c):
    """A transformers config object for the dict, parsed the way from_pretrained parses config.json."""
    tmp = tempfile.mkdtemp(prefix="cfg_")
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(c, f)
    cfg = AutoConfig.from_pretrained(tmp)
    shutil.rmtree(tmp)
    return cfg


def build_inmemory(c, eff):
    cfg = hf_config_from_dict({k: v for k, v in c.items() if k != "quantization_config"})
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").float().eval()
    missing, unexpected = model.load_state_dict(to_hf_layout(eff, c), strict=True)
    return model


def load_from_files(d, c, name):
    """transformers' own loader on the written files; FP8 is read and dequantised into a temp F32 copy."""
    if "quantization_config" in c:
        eff, _, _ = read_checkpoint(d)
        tmp = tempfile.mkdtemp(prefix="deq_")
        write_checkpoint(tmp, {k: v for k, v in c.items() if k != "quantization_config"},
                         {k: v.contiguous() for k, v in eff.items()}, sharded=False)
        src = tmp
    else:
        src = d
    model, info = AutoModelForCausalLM.from_pretrained(
        src, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    model = model.float().eval()
    L = c["num_hidden_layers"]
    mtp = re.compile(rf"^model\.layers\.{L}\.")
    missing = list(info.get("missing_keys", []))
    unexpected = [k for k in info.get("unexpected_keys", []) if not mtp.match(k)]
    mism = list(info.get("mismatched_keys", []))
    errs = list(info.get("error_msgs", []))
    n_mtp = len([k for k in info.get("unexpected_keys", []) if mtp.match(k)])
    extra = {k: v for k, v in info.items()
             if k not in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs") and v}
    print(f"  [{name}] loading info: missing={missing} unexpected(non-MTP)={unexpected} mismatched={mism} "
          f"errors={errs} MTP keys reported unexpected={n_mtp} other={extra}")
    assert not missing and not unexpected and not mism and not errs, "load-back reported problems"
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr(), "lm_head tied"
    if src != d:
        shutil.rmtree(src)
    return model


# ----------------------------------------------------------------------------------------------
# Reference computations
# ----------------------------------------------------------------------------------------------

def rnd(x):
    return round(float(x), 6)


def topk_list(lp):
    v, i = lp.topk(TOP_K)
    return [[rnd(a), int(b)] for a, b in zip(v.tolist(), i.tolist())]


@torch.inference_mode()
def logprobs(model, ids):
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return torch.log_softmax(out.logits[0].float(), dim=-1)


@torch.inference_mode()
def score_entry(model, ids):
    lp = logprobs(model, ids)
    tok = [None] + [rnd(lp[i - 1, ids[i]]) for i in range(1, len(ids))]
    top = [None] + [topk_list(lp[i - 1]) for i in range(1, len(ids))]
    return {"input_ids": list(ids), "token_logprobs": tok, "top_logprobs": top}, topk_list(lp[-1]), lp


@torch.inference_mode()
def greedy(model, ids, n_new):
    seq = list(ids)
    out_ids, out_lp, margins = [], [], []
    for _ in range(n_new):
        lp = logprobs(model, seq)[-1]
        v, i = lp.topk(2)
        out_ids.append(int(i[0]))
        out_lp.append(rnd(v[0]))
        margins.append(rnd(v[0] - v[1]))
        seq.append(int(i[0]))
    return {"input_ids": list(ids), "max_new_tokens": n_new, "output_ids": out_ids,
            "output_logprobs": out_lp, "top2_margin": margins}


def rms_norm(x, w, eps):
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))


@torch.inference_mode()
def mtp_entries(model, c, eff, prompts):
    """Spec section 5: x_i = eh_proj([enorm(embed(t_{i+1})), hnorm(h_i)]), z = layer(x) at positions
    0..n-2 with causal attention, logits = shared_head.head(shared_head.norm(z))."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer
    L, eps = c["num_hidden_layers"], c["rms_norm_eps"]
    p = f"model.layers.{L}."
    layer = DeepseekV3DecoderLayer(model.config, layer_idx=L).float().eval()
    layer_sd = {k[len(p):]: v for k, v in eff.items() if k.startswith(p)
                and not re.match(r"(enorm|hnorm|eh_proj|shared_head|embed_tokens)\.", k[len(p):])}
    layer.load_state_dict(to_hf_layout(layer_sd, c, drop_mtp=False), strict=True)
    W = lambda n: eff[p + n]  # noqa: E731
    res = []
    for ids in prompts:
        n = len(ids)
        t = torch.tensor([ids], dtype=torch.long)
        h = model.model(input_ids=t, use_cache=False).last_hidden_state  # after model.norm
        e = torch.nn.functional.embedding(t[:, 1:], W("embed_tokens.weight"))
        x = torch.cat([rms_norm(e, W("enorm.weight"), eps), rms_norm(h[:, :n - 1], W("hnorm.weight"), eps)], -1)
        x = x @ W("eh_proj.weight").T
        pos = torch.arange(n - 1)[None]
        cos_sin = model.model.rotary_emb(x, pos)
        mask = torch.full((n - 1, n - 1), torch.finfo(torch.float32).min).triu(1)[None, None]
        z = layer(x, attention_mask=mask, position_ids=pos, position_embeddings=cos_sin)
        z = z[0] if isinstance(z, tuple) else z
        logits = rms_norm(z, W("shared_head.norm.weight"), eps) @ W("shared_head.head.weight").T
        lp = torch.log_softmax(logits[0].float(), -1)
        res.append({"input_ids": list(ids),
                    "draft_top": [topk_list(lp[i]) for i in range(n - 1)],
                    "draft_logprob_next_next": [rnd(lp[i, ids[i + 2]]) for i in range(n - 2)]})
        print(f"  [mtp] n={n} mean draft top1 prob={lp.max(-1).values.exp().mean():.3f} "
              f"mean logprob(next-next)={sum(res[-1]['draft_logprob_next_next']) / max(1, n - 2):.3f}")
    return res


def logit_stats(lp_list, name):
    stds, top1, ent = [], [], []
    for lp in lp_list:
        logits = lp  # log-softmax shifts each row by a constant: std is the logit std
        stds.append(logits.std(-1))
        p = lp.exp()
        top1.append(p.max(-1).values)
        ent.append(-(p * lp).sum(-1))
    s = torch.cat(stds)
    t = torch.cat(top1)
    e = torch.cat(ent)
    st = {"logit_std_mean": rnd(s.mean()), "logit_std_min": rnd(s.min()), "logit_std_max": rnd(s.max()),
          "top1_prob_mean": rnd(t.mean()), "top1_prob_max": rnd(t.max()), "entropy_mean": rnd(e.mean()),
          "entropy_uniform": rnd(math.log(lp_list[0].shape[-1]))}
    print(f"  [{name}] logit stats: {st}")
    return st


@torch.inference_mode()
def routing_stats(model, ids, name):
    """Expert-usage histogram per MoE layer and, for noaux_tc, how often the bias changes the selection."""
    hooks, recs = [], []

    def hook(mod, inp, out):
        idx = out[2]
        rec = {"hist": torch.bincount(idx.flatten(), minlength=mod.num_experts).tolist()}
        if hasattr(mod, "e_score_correction_bias"):
            saved = mod.e_score_correction_bias.clone()
            mod.e_score_correction_bias.zero_()
            idx0 = mod.forward(inp[0])[2]
            mod.e_score_correction_bias.copy_(saved)
            rec["bias_changed_frac"] = rnd((idx.sort(-1).values != idx0.sort(-1).values).any(-1).float().mean())
        recs.append(rec)

    for mname, mod in model.named_modules():
        if type(mod).__name__.endswith("TopkRouter"):
            hooks.append(mod.register_forward_hook(hook))
    model(input_ids=torch.tensor([ids]), use_cache=False)
    for h in hooks:
        h.remove()
    for i, r in enumerate(recs):
        print(f"  [{name}] router {i}: {r}")
    return recs


@torch.inference_mode()
def calibrate_head(c, master):
    """Rescale lm_head (and the MTP head copy) so the mean per-position logit std is LOGIT_STD_TARGET."""
    _, eff = storage_tensors(c, master, fp8=False)
    model = build_inmemory(c, eff)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(2, c["vocab_size"], (1, 130), generator=g)
    h = model.model(input_ids=ids, use_cache=False).last_hidden_state[0]
    std = (h @ eff["lm_head.weight"].T).std(-1).mean().item()
    f = LOGIT_STD_TARGET / std
    print(f"  calibration: logit std before {std:.4f}, lm_head scaled by {f:.4f}")
    master["lm_head.weight"] *= f
    L = c["num_hidden_layers"]
    for k in range(c.get("num_nextn_predict_layers", 0) or 0):
        master[f"model.layers.{L + k}.shared_head.head.weight"] = master["lm_head.weight"].clone()


_MASTERS = {}


def get_master(name, c):
    seed = SEEDS[name]
    if seed not in _MASTERS:
        m = init_master(c, seed)
        calibrate_head(c, m)
        _MASTERS[seed] = m
    return {k: v.clone() for k, v in _MASTERS[seed].items()}


def check_scaling(model, c):
    rp = model.config.rope_parameters
    print(f"  rope_parameters: {rp}")
    assert rp.get("rope_type") == "yarn", rp
    ms = c["rope_scaling"]["mscale_all_dim"]
    m = 0.1 * ms * math.log(c["rope_scaling"]["factor"]) + 1.0
    want = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5 * m * m
    got = model.model.layers[0].self_attn.scaling
    att = model.model.rotary_emb.attention_scaling
    print(f"  softmax scale {got:.7f} (expected {want:.7f}), rope attention_scaling {att}")
    assert abs(got - want) < 1e-6 and abs(att - 1.0) < 1e-6


def make_fixture(name, out_dir, summary):
    t0 = time.time()
    c = make_config(name)
    fp8 = "quantization_config" in c
    print(f"=== {name} ({c['model_type']}{', fp8' if fp8 else ''})")
    master = get_master(name, c)
    store, eff_mem = storage_tensors(c, master, fp8)
    d = os.path.join(out_dir, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    write_checkpoint(d, c, store, sharded=name in SHARDED)
    info = {"files": {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}}

    # What is on disk must be exactly what the in-memory model uses.
    eff_file, dtypes, raw = read_checkpoint(d)
    assert set(eff_file) == set(eff_mem), set(eff_file) ^ set(eff_mem)
    wdiff = max((eff_file[k] - eff_mem[k]).abs().max().item() for k in eff_mem)
    dt_count = {}
    for k, v in raw.items():
        dt_count[str(v.dtype)] = dt_count.get(str(v.dtype), 0) + 1
    print(f"  tensors on disk: {len(raw)} by dtype {dt_count}; file-vs-memory weight max diff {wdiff}")
    assert wdiff == 0.0
    if fp8:
        for k in ("model.layers.1.self_attn.kv_a_proj_with_mqa.weight", "model.layers.1.mlp.experts.0.down_proj.weight"):
            print(f"  {k}: {tuple(raw[k].shape)} {raw[k].dtype}, scale {tuple(raw[k + '_scale_inv'].shape)}")
        qerr = max(((eff_mem[k] - master[k]).abs().max() / master[k].abs().max()).item()
                   for k in eff_mem if k + "_scale_inv" in raw)
        print(f"  fp8 max quantisation error relative to each tensor's amax: {qerr:.4f}")

    mem_model = build_inmemory(c, eff_mem)
    model = load_from_files(d, c, name)
    check_scaling(model, c)

    g = torch.Generator().manual_seed(SEEDS[name] * 10 + 1)
    prompts = [torch.randint(2, c["vocab_size"], (n,), generator=g).tolist() for n in SCORE_LENS]

    # Load-back check: logits of the files' model vs the in-memory model.
    ldiff = 0.0
    with torch.inference_mode():
        for ids in prompts[2:]:
            t = torch.tensor([ids])
            a = mem_model(input_ids=t, use_cache=False).logits
            b = model(input_ids=t, use_cache=False).logits
            ldiff = max(ldiff, (a - b).abs().max().item())
    print(f"  load-back logits max abs diff (in-memory vs from_pretrained): {ldiff}")
    assert ldiff < 1e-4
    info["loadback_logit_max_abs_diff"] = ldiff
    del mem_model

    ref = {"fixture": name, "model_type": c["model_type"], "transformers_version": transformers.__version__,
           "compute_dtype": "float32", "top_k": TOP_K, "score": [], "next_top": [], "generate": []}
    lps = []
    for ids in prompts:
        entry, nxt, lp = score_entry(model, ids)
        ref["score"].append(entry)
        ref["next_top"].append(nxt)
        lps.append(lp)
    info["logit_stats"] = logit_stats(lps, name)

    # Context sensitivity: change the first token of the 130-token prompt, see the last position move.
    alt = list(prompts[3])
    alt[0] = 2 + (alt[0] - 2 + 1) % (c["vocab_size"] - 2)
    dlp = (logprobs(model, alt)[-1] - lps[3][-1]).abs().mean().item()
    print(f"  context sensitivity (mean |d logprob| at pos 129 after changing token 0): {dlp:.4f}")
    info["ctx_sensitivity"] = rnd(dlp)
    info["routing"] = routing_stats(model, prompts[3], name)

    gg = torch.Generator().manual_seed(SEEDS[name] * 10 + 2)
    for n in GEN_LENS:
        for attempt in range(10):
            ids = torch.randint(2, c["vocab_size"], (n,), generator=gg).tolist()
            ge = greedy(model, ids, MAX_NEW_TOKENS)
            if EOS_ID not in ge["output_ids"]:
                break
            print(f"  generate n={n}: attempt {attempt} produced EOS, new prompt")
        ref["generate"].append(ge)
        print(f"  generate n={n}: out={ge['output_ids'][:8]}... min top2 margin {min(ge['top2_margin']):.4f}")

    if c.get("num_nextn_predict_layers"):
        ref["mtp"] = mtp_entries(model, c, eff_file, [prompts[i] for i in MTP_PROMPTS])

    if c["model_type"] == "deepseek_v32":
        info["sparsity_check"] = sparsity_check(model, c, prompts)

    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    info["files"]["reference.json"] = os.path.getsize(os.path.join(d, "reference.json"))
    info["total_bytes"] = sum(info["files"].values())
    info["seconds"] = round(time.time() - t0, 1)
    print(f"  files: {info['files']} total {info['total_bytes'] / 1e6:.2f} MB, {info['seconds']} s")
    summary[name] = info
    del model


@torch.inference_mode()
def sparsity_check(model, c, prompts):
    """Prompts longer than index_topk must differ from the dense (index_topk >= length) result."""
    idx = [m for m in model.modules() if type(m).__name__.endswith("Indexer")]
    assert len(idx) == c["num_hidden_layers"], len(idx)
    res = {}
    for ids in prompts:
        sparse = logprobs(model, ids)
        for m in idx:
            m.index_topk = 1 << 20
        dense = logprobs(model, ids)
        for m in idx:
            m.index_topk = c["index_topk"]
        diff = (sparse - dense).abs().max().item()
        res[str(len(ids))] = diff
        print(f"  [v32] n={len(ids)}: max |logprob(index_topk={c['index_topk']}) - logprob(dense)| = {diff:.6f}")
        if len(ids) <= c["index_topk"]:
            assert diff == 0.0
        else:
            assert diff > 1e-3, "the indexer's top-k did not change the output"
    return res


@torch.inference_mode()
def fp8_direct_load(out_dir):
    """Nice to have: load the FP8 directory with transformers' own FP8 path on the GPU."""
    d = os.path.join(out_dir, "v3_fp8")
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    try:
        model, info = AutoModelForCausalLM.from_pretrained(d, device_map="cuda", dtype=torch.bfloat16,
                                                           attn_implementation="eager", output_loading_info=True)
        print(f"  fp8 direct load info: { {k: (v if len(v) < 8 else f'{len(v)} keys') for k, v in info.items()} }")
        q = model.model.layers[1].self_attn.q_a_proj
        print(f"  q_a_proj module {type(q).__name__}, weight {q.weight.dtype} {tuple(q.weight.shape)}, "
              f"scale {getattr(q, 'weight_scale_inv', None) is not None}")
        for e in ref["score"][2:4]:
            ids = e["input_ids"]
            lp = torch.log_softmax(model(input_ids=torch.tensor([ids], device="cuda")).logits[0].float(), -1).cpu()
            tok = torch.tensor([x for x in e["token_logprobs"][1:]])
            got = lp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
            top1 = [t[0][1] for t in e["top_logprobs"][1:]]
            agree = (lp[:-1].argmax(-1) == torch.tensor(top1)).float().mean().item()
            print(f"  fp8 direct n={len(ids)}: max |token logprob - reference| {(got - tok).abs().max():.4f}, "
                  f"mean {(got - tok).abs().mean():.4f}, top1 agreement {agree:.3f}")
        return "ok"
    except Exception as ex:  # report, never fail the run
        tb = traceback.format_exc().strip().splitlines()
        print("  fp8 direct load FAILED: " + "\n    ".join(tb[-12:]))
        return f"failed: {type(ex).__name__}: {ex}"[:500]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures", help="directory that receives <name>/ folders")
    ap.add_argument("--only", default="", help="comma-separated subset of " + ",".join(FIXTURES))
    ap.add_argument("--tar-dir", default="", help="also write <name>.tar.gz here (one per fixture)")
    ap.add_argument("--fp8-gpu", action="store_true", help="try transformers' own FP8 load of v3_fp8 on CUDA")
    ap.add_argument("--summary", default="", help="write a JSON summary of the checks here")
    a = ap.parse_args()

    torch.set_num_threads(min(16, os.cpu_count() or 1))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, threads {torch.get_num_threads()}")
    names = [n for n in a.only.split(",") if n] or FIXTURES
    os.makedirs(a.out, exist_ok=True)
    summary, failed = {}, []
    for n in names:
        try:
            make_fixture(n, a.out, summary)
            if a.tar_dir:
                os.makedirs(a.tar_dir, exist_ok=True)
                with tarfile.open(os.path.join(a.tar_dir, f"{n}.tar.gz"), "w:gz") as tf:
                    tf.add(os.path.join(a.out, n), arcname=n)
        except Exception:
            traceback.print_exc()
            failed.append(n)
        sys.stdout.flush()
    if a.fp8_gpu and "v3_fp8" in summary:
        summary["fp8_direct_load"] = fp8_direct_load(a.out)
    if a.summary:
        with open(a.summary, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"done; failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
