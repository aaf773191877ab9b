#!/usr/bin/env python3
# Trains models/dserve-demo, the small DeepSeek-V3-architecture model bundled with dserve: byte-level BPE
# tokenizer, transformers' DeepseekV3ForCausalLM trunk plus a DeepSeek MTP module, official checkpoint export.
"""Train the bundled demo model on a GPU machine (torch, transformers 5.x, tokenizers, safetensors).

    python3 scripts/train_demo/train_demo_model.py all --data .demo_data --work .demo_train \
        --steps 6000 --max-seconds 445   # the bundled model: 381 s of training on one H100

Phases (`all` runs them in order and skips what is already done in --work):
  tokenizer  byte-level BPE (8192 ids with the special tokens) with DeepSeek-V3's pre-tokenizer
  train      resumable: stops at a step boundary after --max-seconds and saves --work/state.pt;
             running the same command again continues from it (batches depend only on seed and step)
  export     official DeepSeek-V3 checkpoint layout into --work/dserve-demo (2 safetensors shards)
  verify     load-back into transformers (identical logits), MTP load-back, 5-shot arithmetic accuracy,
             sample continuations, reference.json with greedy outputs for dserve's tests
Data: scripts/get_demo_data.sh (Debian packages) writes --data; the arithmetic and chat text is generated here.
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import tempfile
import array
import itertools
import multiprocessing
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_data as dd  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOKENIZER_CONFIG = os.path.join(REPO, "models", "dserve-demo", "tokenizer_config.json")

VOCAB = 8192
# Added after the BPE, in DeepSeek-V3/R1 order (R1 puts <think>, </think> right before <｜fim▁hole｜>).
# (content, special): "special" as in DeepSeek-V3's tokenizer.json.
ADDED = [("<think>", False), ("</think>", False), ("<｜fim▁hole｜>", False), ("<｜fim▁begin｜>", False),
         ("<｜fim▁end｜>", False), ("<｜User｜>", False), ("<｜Assistant｜>", False), ("<|EOT|>", True),
         ("<｜tool▁calls▁begin｜>", False), ("<｜tool▁calls▁end｜>", False), ("<｜tool▁call▁begin｜>", False),
         ("<｜tool▁call▁end｜>", False), ("<｜tool▁outputs▁begin｜>", False), ("<｜tool▁outputs▁end｜>", False),
         ("<｜tool▁output▁begin｜>", False), ("<｜tool▁output▁end｜>", False), ("<｜tool▁sep｜>", False)]

# DeepSeek-V3's tokenizer.json pipeline, verbatim (spec section 7.1).
V3_NORMALIZER = {"type": "Sequence", "normalizers": []}
V3_PRE_TOKENIZER = json.loads(
    r'''{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}''')  # noqa: E501
V3_POST_PROCESSOR = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
V3_DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}

# Official config.json (DeepSeek-V3 field set; cf. /work/shared/configs and tests/fixtures).
CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "ep_size": 1,
    "first_k_dense_replace": 1,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 640,
    "kv_lora_rank": 128,
    "max_position_embeddings": 4096,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 64,
    "moe_layer_freq": 1,
    "n_group": 4,
    "n_routed_experts": 16,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 8,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 4,
    "num_key_value_heads": 8,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 128,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 1024,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "rope_theta": 10000,
    "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid",
    "tie_word_embeddings": False,
    "topk_group": 2,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "v_head_dim": 32,
    "vocab_size": VOCAB,
}
GENERATION_CONFIG = {"_from_model_config": True, "bos_token_id": 0, "eos_token_id": 1, "do_sample": True,
                     "temperature": 0.6, "top_p": 0.95}
SHARD_LIMIT = 15 * 1024 * 1024  # $OUT returns files up to 16 MiB: two shards, as official checkpoints are sharded


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ================================================================================================
# Tokenizer
# ================================================================================================

def train_tokenizer(corpora, out_path, vocab=VOCAB):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    t0 = time.time()
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    split3 = V3_PRE_TOKENIZER["pretokenizers"][2]["pattern"]["Regex"]
    cjk = V3_PRE_TOKENIZER["pretokenizers"][1]["pattern"]["Regex"]
    # Training only: single digits instead of \p{N}{1,3}, so the BPE learns no digit-digit merge and every
    # number is tokenized digit by digit under V3's own pre-tokenizer too (arithmetic is then learnable).
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="isolated"),
        pre_tokenizers.Split(Regex(cjk), behavior="isolated"),
        pre_tokenizers.Split(Regex(split3), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    n_bpe = vocab - len(ADDED)
    trainer = trainers.BpeTrainer(vocab_size=n_bpe, min_frequency=2, show_progress=False,
                                  special_tokens=[dd.BOS, dd.EOS, dd.PAD],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpora.tokenizer_texts(), trainer=trainer)
    got = tok.get_vocab_size()
    for content, special in ADDED:
        t = AddedToken(content, single_word=False, lstrip=False, rstrip=False, normalized=True, special=special)
        (tok.add_special_tokens if special else tok.add_tokens)([t])
    j = json.loads(tok.to_str())
    j["normalizer"] = V3_NORMALIZER
    j["pre_tokenizer"] = V3_PRE_TOKENIZER
    j["post_processor"] = V3_POST_PROCESSOR
    j["decoder"] = V3_DECODER
    for a in j["added_tokens"]:  # flags exactly as in DeepSeek-V3's file
        if a["content"] in (dd.BOS, dd.EOS, dd.PAD):
            a.update(normalized=False, special=True)
        a.update(single_word=False, lstrip=False, rstrip=False)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False, separators=(",", ":"))
    tok = Tokenizer.from_file(out_path)
    check_tokenizer(tok)
    log(f"tokenizer: {got} BPE ids (incl. BOS/EOS/pad) + {len(ADDED)} added = {tok.get_vocab_size()}, "
        f"{len(j['model']['merges'])} merges, {time.time() - t0:.1f} s")
    return tok


def check_tokenizer(tok):
    vocab = tok.get_vocab(with_added_tokens=True)
    assert vocab[dd.BOS] == 0 and vocab[dd.EOS] == 1 and vocab[dd.PAD] == 2, "BOS/EOS/pad ids"
    assert tok.get_vocab_size() <= VOCAB
    for content, _ in ADDED:
        assert content in vocab, content
    multi_digit = [t for t in vocab if re.search(r"[0-9][0-9]", t)]
    assert not multi_digit, f"digit-digit tokens: {multi_digit[:10]}"
    samples = ["In the beginning God created the heaven and the earth.",
               dd.arith_qa(1, 123, 456) + "\n\n" + dd.arith_qa(0, 7, 999),
               dd.render_chat([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]),
               "Ünïcödé ☃ 日本語のテキスト 12345 \t tabs\r\nCRLF"]
    for s in samples:
        ids = tok.encode(s, add_special_tokens=False).ids
        back = tok.decode(ids, skip_special_tokens=False)
        assert back == s, (s, back)
    ids = tok.encode(dd.arith_qa(1, 123, 456), add_special_tokens=False).ids
    log("tokenizer sample:", [tok.id_to_token(i) for i in ids])


# ================================================================================================
# Model
# ================================================================================================

def hf_config(c):
    from transformers import AutoConfig
    tmp = tempfile.mkdtemp(prefix="cfg_")
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(c, f)
    cfg = AutoConfig.from_pretrained(tmp)
    shutil.rmtree(tmp)
    return cfg


_MTP = None


def mtp_class():
    """DeepSeek-V3 multi-token prediction module (depth 1): predicts t_{i+2} from (h_i, t_{i+1}).
    Embedding and output head are the main model's (shared); the checkpoint stores copies."""
    global _MTP
    if _MTP is not None:
        return _MTP
    import torch
    from torch import nn
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer, DeepseekV3RMSNorm

    class MTP(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            d, eps = cfg.hidden_size, cfg.rms_norm_eps
            self.enorm = DeepseekV3RMSNorm(d, eps=eps)
            self.hnorm = DeepseekV3RMSNorm(d, eps=eps)
            self.eh_proj = nn.Linear(2 * d, d, bias=False)
            self.layer = DeepseekV3DecoderLayer(cfg, layer_idx=cfg.num_hidden_layers)
            self.head_norm = DeepseekV3RMSNorm(d, eps=eps)

        def forward(self, trunk, h, ids, attention_mask=None):
            """h: main hidden states after model.norm [B, T, d]; returns logits [B, T-1, V] (slot i -> t_{i+2})."""
            e = trunk.model.embed_tokens(ids[:, 1:])
            x = self.eh_proj(torch.cat([self.enorm(e), self.hnorm(h[:, :-1])], -1))  # [emb ; hidden] order
            pos = torch.arange(x.shape[1], device=x.device)[None].expand(x.shape[0], -1)
            cos_sin = trunk.model.rotary_emb(x, pos)
            z = self.layer(x, attention_mask=attention_mask, position_ids=pos, position_embeddings=cos_sin)
            z = z[0] if isinstance(z, tuple) else z
            return trunk.lm_head(self.head_norm(z))

    _MTP = MTP
    return MTP


def build_models(seed, attn="sdpa", experts="eager"):
    import torch
    from torch import nn
    from transformers import AutoModelForCausalLM
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3RMSNorm

    cfg = hf_config(CONFIG)
    torch.manual_seed(seed)
    trunk = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn)
    if experts != "eager":
        trunk.set_experts_implementation(experts)
    mtp = mtp_class()(trunk.config)
    with torch.no_grad():  # the trunk's init scheme (transformers' _init_weights) for the MTP block
        for m in mtp.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, cfg.initializer_range)
            elif isinstance(m, DeepseekV3RMSNorm):
                m.weight.fill_(1.0)
            elif type(m).__name__.endswith("Experts"):
                m.gate_up_proj.normal_(0.0, cfg.initializer_range)
                m.down_proj.normal_(0.0, cfg.initializer_range)
            elif type(m).__name__.endswith("TopkRouter"):
                m.weight.normal_(0.0, cfg.initializer_range)
                m.e_score_correction_bias.zero_()
    return trunk.config, trunk, mtp


def routers(trunk, mtp):
    return [m for m in list(trunk.modules()) + list(mtp.modules()) if type(m).__name__.endswith("TopkRouter")]


def fp32_routers(rs):
    """transformers computes router logits in fp32 (as DeepSeek); under autocast F.linear would run in bf16."""
    import torch
    for r in rs:
        orig = r.forward

        def fwd(hs, _orig=orig):
            with torch.autocast("cuda", enabled=False):
                return _orig(hs.float())
        r.forward = fwd


class LoadCounter:
    """Counts tokens per expert (forward hook on each router) for DeepSeek's aux-loss-free balancing:
    after every step, bias_i += gamma * sign(mean_load - load_i) (the bias only affects selection)."""

    def __init__(self, rs):
        import torch
        self.rs = rs
        self.counts = [torch.zeros(r.num_experts, device=r.weight.device) for r in rs]
        self.hooks = [r.register_forward_hook(self._hook(i)) for i, r in enumerate(rs)]
        self.total = [torch.zeros(r.num_experts, device=r.weight.device) for r in rs]

    def _hook(self, i):
        import torch

        def h(mod, inp, out):
            idx = out[2]
            self.counts[i] += torch.bincount(idx.flatten(), minlength=mod.num_experts).float()
        return h

    def update(self, gamma):
        import torch
        with torch.no_grad():
            for r, c, t in zip(self.rs, self.counts, self.total):
                r.e_score_correction_bias += gamma * torch.sign(c.mean() - c)
                t += c
                c.zero_()

    def imbalance(self):
        """max/mean token load per router since the last call (1.0 = perfectly balanced)."""
        out = [round((t.max() / t.mean().clamp(min=1)).item(), 3) for t in self.total]
        for t in self.total:
            t.zero_()
        return out


def count_params(trunk, mtp):
    n_trunk = sum(p.numel() for p in trunk.parameters())
    n_mtp = sum(p.numel() for p in mtp.parameters())
    L = trunk.config.num_hidden_layers
    E, k = trunk.config.n_routed_experts, trunk.config.num_experts_per_tok
    n_exp = sum(p.numel() for n, p in trunk.named_parameters() if ".experts." in n)
    active = n_trunk - n_exp + n_exp * k // E
    return {"trunk": n_trunk, "mtp_own": n_mtp, "trunk_active_per_token": active, "layers": L}


# ================================================================================================
# Training
# ================================================================================================

def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))


_WORKER = {}


def _worker_init():
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # forked: no rayon pool in the child


def _make_batch(step):
    """Runs in a forked worker: the batch of `step` as uint16 ids (row-major) plus the arithmetic-row mask."""
    corpora, seed, batch, T = _WORKER["args"]
    rows, kinds = dd.batch_rows(corpora, seed, step, batch, T)
    ids = array.array("H", itertools.chain.from_iterable(rows))
    assert len(ids) == batch * T
    return step, ids.tobytes(), bytes(k == "arith" for k in kinds)


def batches(corpora, args, start):
    """Batches start..steps-1 in order, made by 4 forked workers ahead of the GPU (batch = f(seed, step))."""
    _WORKER["args"] = (corpora, args.seed, args.batch, args.seq)
    pool = multiprocessing.get_context("fork").Pool(4, initializer=_worker_init)
    return pool, pool.imap(_make_batch, range(start, args.steps), chunksize=2)


def train(args, corpora, work):
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = True
    dev = torch.device("cuda")
    cfg, trunk, mtp = build_models(args.seed, attn="sdpa", experts=args.experts)
    trunk.to(dev).train()
    mtp.to(dev).train()
    rs = routers(trunk, mtp)
    fp32_routers(rs)
    counter = LoadCounter(rs)
    info = count_params(trunk, mtp)
    log(f"params: {info}")

    decay, no_decay = [], []
    for n, p in list(trunk.named_parameters()) + [("mtp." + n, p) for n, p in mtp.named_parameters()]:
        (no_decay if p.ndim < 2 or "embed_tokens" in n else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    state_path = os.path.join(work, "state.pt")
    start, history, train_s = 0, [], 0.0
    if os.path.exists(state_path):
        st = torch.load(state_path, map_location=dev, weights_only=False)
        trunk.load_state_dict(st["trunk"])
        mtp.load_state_dict(st["mtp"])
        opt.load_state_dict(st["opt"])
        start, history, train_s = st["step"], st["history"], st["train_seconds"]
        assert st["args"]["steps"] == args.steps and st["args"]["seed"] == args.seed, "resume with other args"
        log(f"resumed at step {start} ({train_s:.0f} s of training so far)")
    if start >= args.steps:
        return trunk, mtp, history, True

    def save(step):
        tmp = state_path + ".tmp"
        torch.save({"step": step, "trunk": trunk.state_dict(), "mtp": mtp.state_dict(), "opt": opt.state_dict(),
                    "history": history, "train_seconds": train_s, "args": vars(args)}, tmp)
        os.replace(tmp, state_path)
        log(f"saved {state_path} at step {step} ({os.path.getsize(state_path) / 1e6:.0f} MB)")

    pool, it = batches(corpora, args, start)
    t_run = time.time()
    acc = torch.zeros(4, device=dev)  # main loss, mtp loss, arithmetic main loss, count
    step = start
    while True:
        if time.time() - t_run > args.max_seconds or (args.stop_at and step >= args.stop_at):
            break
        item = next(it, None)
        if item is None:
            break
        assert item[0] == step, (item[0], step)
        ids = torch.frombuffer(bytearray(item[1]), dtype=torch.int16).view(args.batch, args.seq)
        ids = ids.to(torch.long).pin_memory().to(dev, non_blocking=True)  # ids < 8192 fit int16
        arith = torch.tensor(list(item[2]), dtype=torch.bool).to(dev, non_blocking=True)
        lr = lr_at(step, args.steps, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = trunk.model(input_ids=ids).last_hidden_state
            logits = trunk.lm_head(h)
            tok_loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten(),
                                       reduction="none").view(ids.shape[0], -1)
            loss_main = tok_loss.mean()
            mlogits = mtp(trunk, h, ids)
            loss_mtp = F.cross_entropy(mlogits[:, :-1].flatten(0, 1).float(), ids[:, 2:].flatten())
            loss = loss_main + args.mtp_weight * loss_mtp
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(trunk.parameters()) + list(mtp.parameters()), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        counter.update(args.bias_gamma)
        with torch.no_grad():
            acc += torch.stack([loss_main.detach(), loss_mtp.detach(),
                                (tok_loss.mean(1) * arith).sum() / arith.sum().clamp(min=1), torch.ones((), device=dev)])
        step += 1
        if step % args.log_every == 0 or step == args.steps:
            a = (acc[:3] / acc[3]).tolist()
            el = time.time() - t_run
            rec = {"step": step, "loss": round(a[0], 4), "mtp_loss": round(a[1], 4), "arith_loss": round(a[2], 4),
                   "lr": round(lr, 6), "imbalance": counter.imbalance(), "s": round(train_s + el, 1)}
            history.append(rec)
            log(json.dumps(rec))
            acc.zero_()
    pool.terminate()
    train_s += time.time() - t_run
    if step < args.steps:
        log(f"stopping at step {step} after --max-seconds {args.max_seconds}")
    save(step)
    if step < args.steps:
        return trunk, mtp, history, False
    log(f"training done: {args.steps} steps, {train_s:.0f} s")
    return trunk, mtp, history, True


def bench(args, corpora):
    """Milliseconds per training step (batch making, forward+backward+step) per experts implementation."""
    import torch
    import torch.nn.functional as F
    t0 = time.time()
    rows = [dd.batch_rows(corpora, args.seed, s, args.batch, args.seq)[0] for s in range(8)]
    log(f"bench: batch making {1000 * (time.time() - t0) / 8:.1f} ms per batch of {args.batch}x{args.seq}")
    dev = torch.device("cuda")
    for impl in args.bench_experts.split(","):
        try:
            cfg, trunk, mtp = build_models(args.seed, attn="sdpa", experts=impl)
            trunk.to(dev).train()
            mtp.to(dev).train()
            fp32_routers(routers(trunk, mtp))
            opt = torch.optim.AdamW(list(trunk.parameters()) + list(mtp.parameters()), lr=1e-3, fused=True)
            losses = []
            for i in range(14):
                if i == 4:
                    torch.cuda.synchronize()
                    t1 = time.time()
                ids = torch.tensor(rows[i % 8], device=dev)
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    h = trunk.model(input_ids=ids).last_hidden_state
                    loss = F.cross_entropy(trunk.lm_head(h)[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
                    ml = mtp(trunk, h, ids)
                    loss = loss + 0.3 * F.cross_entropy(ml[:, :-1].flatten(0, 1).float(), ids[:, 2:].flatten())
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                losses.append(round(loss.item(), 4))
            torch.cuda.synchronize()
            log(f"bench {impl}: {1000 * (time.time() - t1) / 10:.1f} ms/step, "
                f"max mem {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB, losses {losses[:3]}...{losses[-2:]}")
            del trunk, mtp, opt
            torch.cuda.empty_cache()
        except Exception as ex:  # noqa: BLE001
            log(f"bench {impl}: FAILED {type(ex).__name__}: {str(ex)[:300]}")


# ================================================================================================
# Export (official DeepSeek layout)
# ================================================================================================

def official_tensors(trunk, mtp, cfg):
    """transformers' in-memory names -> DeepSeek's published names (per-expert tensors, MTP at layer L)."""
    import torch
    I = cfg.moe_intermediate_size

    def convert(sd, prefix):
        out = {}
        for k, v in sd.items():
            if "rotary_emb" in k:
                continue
            v = v.detach().float().cpu()
            if k.endswith("mlp.experts.gate_up_proj"):
                p = prefix + k[:-len("gate_up_proj")]
                for e in range(v.shape[0]):
                    out[f"{p}{e}.gate_proj.weight"] = v[e, :I].clone()
                    out[f"{p}{e}.up_proj.weight"] = v[e, I:].clone()
            elif k.endswith("mlp.experts.down_proj"):
                p = prefix + k[:-len("down_proj")]
                for e in range(v.shape[0]):
                    out[f"{p}{e}.down_proj.weight"] = v[e].clone()
            else:
                out[prefix + k] = v
        return out

    t = convert(trunk.state_dict(), "")
    L = cfg.num_hidden_layers
    p = f"model.layers.{L}."
    msd = mtp.state_dict()
    t.update(convert({k[len("layer."):]: v for k, v in msd.items() if k.startswith("layer.")}, p))
    t[p + "enorm.weight"] = msd["enorm.weight"].float().cpu()
    t[p + "hnorm.weight"] = msd["hnorm.weight"].float().cpu()
    t[p + "eh_proj.weight"] = msd["eh_proj.weight"].float().cpu()
    t[p + "shared_head.norm.weight"] = msd["head_norm.weight"].float().cpu()
    t[p + "embed_tokens.weight"] = t["model.embed_tokens.weight"].clone()
    t[p + "shared_head.head.weight"] = t["lm_head.weight"].clone()
    store = {}
    for k, v in t.items():
        store[k] = v.float().contiguous() if k.endswith("e_score_correction_bias") else v.to(torch.bfloat16).contiguous()
    return store


def write_checkpoint(d, store, tokenizer_json):
    from safetensors.torch import save_file
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2, sort_keys=True)
        f.write("\n")
    with open(os.path.join(d, "generation_config.json"), "w") as f:
        json.dump(GENERATION_CONFIG, f, indent=2)
        f.write("\n")
    shutil.copyfile(tokenizer_json, os.path.join(d, "tokenizer.json"))
    shutil.copyfile(TOKENIZER_CONFIG, os.path.join(d, "tokenizer_config.json"))

    def layer_key(k):
        m = re.match(r"model\.layers\.(\d+)\.", k)
        return (int(m.group(1)) if m else (-1 if "embed_tokens" in k else 10 ** 6), k)
    names = sorted(store, key=layer_key)
    total = sum(store[k].numel() * store[k].element_size() for k in names)
    parts, cur, size = [], {}, 0
    for k in names:  # contiguous split into two shards of about half the bytes each
        nb = store[k].numel() * store[k].element_size()
        if cur and size + nb > total / 2 and not parts:
            parts.append(cur)
            cur, size = {}, 0
        cur[k] = store[k]
        size += nb
    parts.append(cur)
    n = len(parts)
    weight_map = {}
    for i, part in enumerate(parts):
        fn = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        save_file(part, os.path.join(d, fn), metadata={"format": "pt"})
        assert os.path.getsize(os.path.join(d, fn)) < SHARD_LIMIT, fn
        weight_map.update({k: fn for k in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    return total


def read_checkpoint(d):
    import torch
    from safetensors import safe_open
    raw = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), framework="pt") as fh:
                for k in fh.keys():
                    raw[k] = fh.get_tensor(k)
    eff = {}
    for k, v in raw.items():
        if k.endswith("_scale_inv"):
            continue
        s = raw.get(k + "_scale_inv")
        if s is not None:
            full = s.repeat_interleave(128, 0).repeat_interleave(128, 1)[:v.shape[0], :v.shape[1]]
            eff[k] = v.to(torch.float32) * full
        else:
            eff[k] = v.to(torch.float32)
    return eff, raw


# ================================================================================================
# Verification, evaluation, reference outputs
# ================================================================================================

def rnd(x):
    return round(float(x), 6)


def mtp_from_files(trunk_f32, eff, cfg, ids_list):
    """Spec section 5 with the MTP tensors read from the files: x_i = eh_proj([enorm(emb(t_{i+1})),
    hnorm(h_i)]), z = layer(x) (causal, positions 0..n-2), logits = shared_head.head(shared_head.norm(z))."""
    import torch
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3DecoderLayer
    L, eps = cfg.num_hidden_layers, cfg.rms_norm_eps
    p = f"model.layers.{L}."
    layer = DeepseekV3DecoderLayer(trunk_f32.config, layer_idx=L).float().eval()
    sd, experts = {}, {}
    for k, v in eff.items():
        if not k.startswith(p):
            continue
        k2 = k[len(p):]
        if re.match(r"(enorm|hnorm|eh_proj|shared_head|embed_tokens)\.", k2):
            continue
        m = re.match(r"mlp\.experts\.(\d+)\.(gate|up|down)_proj\.weight$", k2)
        if m:
            experts[(int(m.group(1)), m.group(2))] = v
        else:
            sd[k2] = v
    E = cfg.n_routed_experts
    sd["mlp.experts.gate_up_proj"] = torch.stack([torch.cat([experts[(e, "gate")], experts[(e, "up")]]) for e in range(E)])
    sd["mlp.experts.down_proj"] = torch.stack([experts[(e, "down")] for e in range(E)])
    layer.load_state_dict(sd, strict=True)

    def rms(x, w):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps))
    W = lambda n: eff[p + n]  # noqa: E731
    out = []
    with torch.inference_mode():
        for ids in ids_list:
            n = len(ids)
            t = torch.tensor([ids])
            h = trunk_f32.model(input_ids=t, use_cache=False).last_hidden_state
            e = torch.nn.functional.embedding(t[:, 1:], W("embed_tokens.weight"))
            x = torch.cat([rms(e, W("enorm.weight")), rms(h[:, :n - 1], W("hnorm.weight"))], -1) @ W("eh_proj.weight").T
            pos = torch.arange(n - 1)[None]
            cos_sin = trunk_f32.model.rotary_emb(x, pos)
            mask = torch.full((n - 1, n - 1), torch.finfo(torch.float32).min).triu(1)[None, None]
            z = layer(x, attention_mask=mask, position_ids=pos, position_embeddings=cos_sin)
            z = z[0] if isinstance(z, tuple) else z
            out.append(rms(z, W("shared_head.norm.weight")) @ W("shared_head.head.weight").T)
    return out


def load_hf(d, dtype, device, attn="eager"):
    import torch
    from transformers import AutoModelForCausalLM
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation=attn,
                                                       output_loading_info=True)
    L = CONFIG["num_hidden_layers"]
    unexpected = [k for k in info.get("unexpected_keys", []) if not re.match(rf"model\.layers\.{L}\.", k)]
    assert not info.get("missing_keys") and not unexpected and not info.get("mismatched_keys"), info
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr(), "lm_head tied"
    return model.to(device).eval()


def greedy_batch(model, prompts, max_new, device, stop_ids=(), pad_id=1):
    """Greedy decoding of a batch, left-padded, full recompute each step (no KV cache)."""
    import torch
    seqs = [list(p) for p in prompts]
    done = [False] * len(seqs)
    outs = [[] for _ in seqs]
    with torch.inference_mode():
        for _ in range(max_new):
            n = max(map(len, seqs))
            ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
            am = torch.zeros((len(seqs), n), dtype=torch.long)
            for i, s in enumerate(seqs):
                ids[i, n - len(s):] = torch.tensor(s)
                am[i, n - len(s):] = 1
            pos = (am.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=ids.to(device), attention_mask=am.to(device), position_ids=pos.to(device),
                           use_cache=False).logits[:, -1]
            nxt = logits.float().argmax(-1).tolist()
            for i, t in enumerate(nxt):
                if done[i]:
                    continue
                outs[i].append(t)
                seqs[i].append(t)
                if t in stop_ids:
                    done[i] = True
            if all(done):
                break
    return outs


def greedy_single(model, ids, n_new, device):
    """Greedy with full recompute each step, as the fixtures' references: ids, logprobs, top-2 margins."""
    import torch
    seq, out, lps, margins = list(ids), [], [], []
    with torch.inference_mode():
        for _ in range(n_new):
            lp = torch.log_softmax(model(input_ids=torch.tensor([seq], device=device), use_cache=False)
                                   .logits[0, -1].float(), -1)
            v, i = lp.topk(2)
            out.append(int(i[0]))
            lps.append(rnd(v[0]))
            margins.append(rnd(v[0] - v[1]))
            seq.append(int(i[0]))
            if int(i[0]) == 1:
                break
    return out, lps, margins


def parse_answer(text):
    text = text.split("Question")[0]
    nums = re.findall(r"-?\d+", text)
    return int(nums[-1]) if nums else None


def arith_eval(model, tok, device, n, seed, shots=5):
    """5-shot greedy accuracy on n held-out questions (never seen in training), SGLang few-shot layout."""
    qs = dd.held_out_questions(n, seed)
    rng = random.Random(seed + 1)
    prompts, texts = [], []
    for q in qs:
        shots_t = [dd.draw_arith(rng) for _ in range(shots)]
        text = dd.few_shot_prompt(shots_t, q)
        texts.append(text)
        prompts.append([0] + tok.encode(text, add_special_tokens=False).ids)  # BOS as add_bos_token does
    outs = []
    for i in range(0, len(prompts), 100):
        outs += greedy_batch(model, prompts[i:i + 100], 8, device, stop_ids=(1,))
    correct, invalid, rows = 0, 0, []
    for q, o in zip(qs, outs):
        text = tok.decode([t for t in o if t != 1], skip_special_tokens=False)
        got = parse_answer(text)
        want = dd.arith_answer(*q)
        correct += got == want
        invalid += got is None
        rows.append({"q": dd.arith_question(*q), "want": want, "got": got, "text": text})
    return {"n": len(qs), "accuracy": correct / len(qs), "invalid": invalid,
            "wrong_examples": [r for r in rows if r["got"] != r["want"]][:10], "prompts": prompts, "outs": outs}


def verify(args, work, trunk, mtp, tok, cfg_hf, summary):
    import torch
    d = os.path.join(work, "dserve-demo")
    dev = torch.device("cuda")
    cpu = torch.device("cpu")
    torch.backends.cuda.matmul.allow_tf32 = False

    # 1. Load-back: the files' model must give exactly the logits of the trained model rounded to bf16.
    eff, raw = read_checkpoint(d)
    model_f = load_hf(d, torch.float32, cpu)
    from transformers import AutoModelForCausalLM
    mem = AutoModelForCausalLM.from_config(model_f.config, attn_implementation="eager").float().eval()
    sd = {k: v.detach().to(torch.bfloat16).float().cpu() for k, v in trunk.state_dict().items() if "rotary" not in k}
    sd = {k: (v if "e_score_correction_bias" not in k else trunk.state_dict()[k].float().cpu()) for k, v in sd.items()}
    mem.load_state_dict(sd, strict=True)
    samples = ["In the beginning God created the heaven and the earth.",
               dd.few_shot_prompt([(0, 12, 30), (1, 500, 623)], (0, 999, 999)),
               dd.render_chat([{"role": "user", "content": "What is 17 plus 25?"}], add_generation_prompt=True)]
    ids_list = [[0] + tok.encode(s, add_special_tokens=False).ids if not s.startswith(dd.BOS)
                else tok.encode(s, add_special_tokens=False).ids for s in samples]
    ldiff = 0.0
    with torch.inference_mode():
        for ids in ids_list:
            a = mem(input_ids=torch.tensor([ids]), use_cache=False).logits
            b = model_f(input_ids=torch.tensor([ids]), use_cache=False).logits
            ldiff = max(ldiff, (a - b).abs().max().item())
    log(f"load-back logits max abs diff (bf16-rounded trained model vs from_pretrained): {ldiff}")
    summary["loadback_logit_max_abs_diff"] = ldiff
    assert ldiff == 0.0, ldiff

    # 2. MTP: files (spec section 5, eager) vs the trained module with bf16-rounded weights.
    mtp_mem = mtp_class()(mem.config).float().eval()
    msd = {k: (v.detach().to(torch.bfloat16).float().cpu() if "e_score_correction_bias" not in k else v.float().cpu())
           for k, v in mtp.state_dict().items()}
    mtp_mem.load_state_dict(msd, strict=True)
    files_mtp = mtp_from_files(model_f, eff, model_f.config, ids_list)
    mdiff, acc_next_next = 0.0, []
    with torch.inference_mode():
        for ids, fl in zip(ids_list, files_mtp):
            t = torch.tensor([ids])
            h = mem.model(input_ids=t, use_cache=False).last_hidden_state
            n = len(ids)
            mask = torch.full((n - 1, n - 1), torch.finfo(torch.float32).min).triu(1)[None, None]
            ml = mtp_mem(mem, h, t, attention_mask=mask)
            mdiff = max(mdiff, (ml - fl).abs().max().item())
            acc_next_next.append((fl[0, :-1].argmax(-1) == t[0, 2:]).float().mean().item())
    log(f"MTP load-back logits max abs diff: {mdiff}; draft top-1 == t(i+2) on the samples: "
        f"{[round(x, 3) for x in acc_next_next]}")
    summary["mtp_loadback_logit_max_abs_diff"] = mdiff
    summary["mtp_sample_next_next_top1"] = [round(x, 3) for x in acc_next_next]
    assert mdiff < 1e-4, mdiff

    # 3. Arithmetic accuracy (5-shot, greedy, 200 held-out questions): float32 and bf16 on the GPU.
    model_g = load_hf(d, torch.float32, dev, attn="sdpa")
    res = arith_eval(model_g, tok, dev, args.eval_n, args.seed + 7)
    log(f"arithmetic 5-shot accuracy (float32, GPU): {res['accuracy']:.3f} on {res['n']}, invalid {res['invalid']}; "
        f"wrong: {res['wrong_examples'][:5]}")
    summary["arith_accuracy_fp32"] = res["accuracy"]
    summary["arith_wrong_examples"] = res["wrong_examples"]
    # Batched (left-padded) vs one at a time must agree.
    agree = 0
    for p, o in list(zip(res["prompts"], res["outs"]))[:20]:
        s, _, _ = greedy_single(model_g, p, len(o), dev)
        agree += s == o
    log(f"batched vs single greedy agreement: {agree}/20")
    summary["batched_vs_single_agree_of_20"] = agree
    model_b = load_hf(d, torch.bfloat16, dev, attn="sdpa")
    rb = arith_eval(model_b, tok, dev, args.eval_n, args.seed + 7)
    log(f"arithmetic 5-shot accuracy (bf16, GPU): {rb['accuracy']:.3f}")
    summary["arith_accuracy_bf16"] = rb["accuracy"]
    del model_b

    # 4. Samples and reference.json (float32 CPU, full recompute, like tests/fixtures).
    ref = {"model": "dserve-demo", "transformers_version": __import__("transformers").__version__,
           "compute_dtype": "float32", "note": "greedy, full recompute each step; prompts start with BOS (id 0)",
           "generate": [], "tokenize": [], "mtp": []}
    gen_prompts = [("text", "In the beginning", 20),
                   ("text", "The meaning of the word", 20),
                   ("text", dd.few_shot_prompt([(0, 12, 30), (1, 500, 623), (0, 7, 88), (1, 40, 2), (0, 999, 1)],
                                               (0, 456, 789)), 8),
                   ("text", dd.few_shot_prompt([(1, 3, 70), (0, 250, 250), (1, 999, 0), (0, 5, 5), (1, 100, 999)],
                                               (1, 123, 456)), 8),
                   ("chat", dd.render_chat([{"role": "user", "content": "What is 17 plus 25?"}], True), 20),
                   ("chat", dd.render_chat([{"role": "user", "content": "Define water."}], True), 20)]
    for kind, text, n_new in gen_prompts:
        ids = ([0] if kind == "text" else []) + tok.encode(text, add_special_tokens=False).ids
        out, lps, margins = greedy_single(model_f, ids, n_new, cpu)
        ref["generate"].append({"prompt": text, "input_ids": ids, "max_new_tokens": n_new, "output_ids": out,
                                "output_text": tok.decode(out, skip_special_tokens=False),
                                "output_logprobs": lps, "top2_margin": margins})
        log(f"sample [{kind}] {text[-60:]!r} -> {tok.decode(out, skip_special_tokens=False)!r} "
            f"(min top-2 margin {min(margins):.4f})")
    for s in ["In the beginning God created the heaven and the earth.", dd.arith_qa(1, 123, 456),
              dd.render_chat([{"role": "system", "content": "You are a helpful assistant."},
                              {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}], True),
              "Ünïcödé ☃ 日本語 12345 <think>x</think>"]:
        ref["tokenize"].append({"text": s, "ids": tok.encode(s, add_special_tokens=False).ids})
    for ids in ids_list[:2]:
        fl = files_mtp[ids_list.index(ids)]
        lp = torch.log_softmax(fl[0].float(), -1)
        ref["mtp"].append({"input_ids": ids, "draft_top1": lp.argmax(-1).tolist(),
                           "draft_top1_logprob": [rnd(x) for x in lp.max(-1).values.tolist()]})
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")

    # 5. transformers' own tokenizer and chat template on the files (informational).
    try:
        from transformers import AutoTokenizer
        at = AutoTokenizer.from_pretrained(d)
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 1 plus 2?"},
                {"role": "assistant", "content": "Answer: 3"}, {"role": "user", "content": "Hi"}]
        rendered = at.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        same_chat = rendered == dd.render_chat(msgs, True)
        a_ids = at("In the beginning 123")["input_ids"]
        t_ids = [0] + tok.encode("In the beginning 123", add_special_tokens=False).ids
        log(f"AutoTokenizer ({type(at).__name__}): chat template == our renderer: {same_chat}; "
            f"ids with BOS equal: {a_ids == t_ids} ({a_ids} vs {t_ids})")
        summary["autotokenizer"] = {"class": type(at).__name__, "chat_same": same_chat, "ids_same": a_ids == t_ids}
        assert same_chat
    except AssertionError:
        raise
    except Exception as ex:  # noqa: BLE001
        log(f"AutoTokenizer check failed: {type(ex).__name__}: {ex}")
        summary["autotokenizer"] = f"failed: {ex}"[:300]
    return model_g


def fp8_eval(args, work, tok, summary):
    """The FP8 copy written by scripts/quantize_fp8.py: bit-exact vs torch's e4m3 cast, and its accuracy
    with dequantized weights (W = fp8 * scale) in float32."""
    import torch
    d8 = os.path.join(work, "dserve-demo-fp8")
    d = os.path.join(work, "dserve-demo")
    eff8, raw8 = read_checkpoint(d8)
    eff, _ = read_checkpoint(d)
    n_fp8, mism = 0, 0
    for k, v in raw8.items():
        if v.dtype != torch.float8_e4m3fn:
            continue
        n_fp8 += 1
        w = eff[k]
        rows, cols = w.shape
        rb, cb = -(-rows // 128), -(-cols // 128)
        pad = torch.zeros(rb * 128, cb * 128)
        pad[:rows, :cols] = w
        blocks = pad.view(rb, 128, cb, 128)
        scale = blocks.abs().amax(dim=(1, 3)) / 448.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        q = (blocks / scale[:, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(rb * 128, cb * 128)
        q = q[:rows, :cols]
        if not (torch.equal(q.view(torch.uint8), v.view(torch.uint8)) and torch.equal(scale, raw8[k + "_scale_inv"])):
            mism += 1
    log(f"fp8: {n_fp8} block-FP8 tensors, {mism} differ from torch's quantization")
    summary["fp8_tensors"] = n_fp8
    summary["fp8_mismatch_vs_torch"] = mism
    # Dequantized copy in float32 for transformers (which has no FP8 kernel installed here).
    tmp = tempfile.mkdtemp(prefix="deq_")
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in eff8.items()}, os.path.join(tmp, "model.safetensors"))
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copyfile(os.path.join(d, f), os.path.join(tmp, f))
    dev = torch.device("cuda")
    m8 = load_hf(tmp, torch.float32, dev, attn="sdpa")
    r8 = arith_eval(m8, tok, dev, args.eval_n, args.seed + 7)
    log(f"arithmetic 5-shot accuracy (FP8 weights dequantized, float32): {r8['accuracy']:.3f}")
    summary["arith_accuracy_fp8_dequant"] = r8["accuracy"]
    shutil.rmtree(tmp)


# ================================================================================================

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["all", "tokenizer", "train", "bench"])
    ap.add_argument("--data", default=".demo_data")
    ap.add_argument("--work", default=".demo_train")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--mtp-weight", type=float, default=0.3)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    ap.add_argument("--experts", default="grouped_mm", help="transformers experts_implementation for training")
    ap.add_argument("--max-seconds", type=float, default=1e9, help="stop training (and save state) after this")
    ap.add_argument("--stop-at", type=int, default=0, help="stop training (and save state) at this step")
    ap.add_argument("--bench-experts", default="eager,grouped_mm", help="bench phase: implementations to time")
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--eval-n", type=int, default=200)
    ap.add_argument("--limit", type=int, default=0, help="smoke test: use only this many bible chapters etc.")
    ap.add_argument("--summary", default="")
    args = ap.parse_args()

    import torch
    log(f"torch {torch.__version__}, transformers {__import__('transformers').__version__}, "
        f"tokenizers {__import__('tokenizers').__version__}, {torch.cuda.get_device_name(0)}")
    os.makedirs(args.work, exist_ok=True)
    summary = {"args": vars(args)}
    corpora = dd.Corpora(args.data, limit=args.limit)
    summary["corpora"] = corpora.stats()
    log(f"corpora: {summary['corpora']}")
    tok_path = os.path.join(args.work, "tokenizer.json")
    from tokenizers import Tokenizer
    if os.path.exists(tok_path):
        tok = Tokenizer.from_file(tok_path)
        check_tokenizer(tok)
    else:
        tok = train_tokenizer(corpora, tok_path)
    if args.phase == "tokenizer":
        return 0
    t0 = time.time()
    summary["tokens"] = corpora.attach(tok, 0, 1)
    log(f"pre-tokenized corpora in {time.time() - t0:.1f} s: {summary['tokens']}")
    if args.phase == "bench":
        bench(args, corpora)
        return 0
    trunk, mtp, history, done = train(args, corpora, args.work)
    summary["history"] = history
    summary["training_complete"] = done
    if args.phase == "train":
        if args.summary:
            with open(args.summary, "w") as f:
                json.dump(summary, f, indent=1)
        return 0
    if not done:  # out of time: export what there is (the state file allows finishing later)
        log(f"WARNING: training stopped early at step {history[-1]['step'] if history else '?'}; exporting anyway")
    summary["params"] = count_params(trunk, mtp)
    store = official_tensors(trunk, mtp, trunk.config)
    d = os.path.join(args.work, "dserve-demo")
    total = write_checkpoint(d, store, tok_path)
    log(f"exported {d}: {len(store)} tensors, {total / 1e6:.1f} MB of weights")
    summary["checkpoint_bytes"] = total
    summary["checkpoint_tensors"] = len(store)
    verify(args, args.work, trunk, mtp, tok, trunk.config, summary)
    rc = os.system(f"{sys.executable} {os.path.join(REPO, 'scripts', 'quantize_fp8.py')} {d} "
                   f"{os.path.join(args.work, 'dserve-demo-fp8')}")
    assert rc == 0, "quantize_fp8.py failed"
    fp8_eval(args, args.work, tok, summary)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(summary, f, indent=1)
    log("all done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
