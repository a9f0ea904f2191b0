#!/usr/bin/env python3
"""Train bitdecode's embedded default model ("gotiny") on one GPU.

A compact Llama (GQA, head_dim 64, SwiGLU, RMSNorm, RoPE, tied embeddings)
trained on the Go standard library sources prepared by

    go run ./tools/tinymodel prepare -out .gpu/tiny/data

then stored with int8 weights (group-wise, symmetric, fp16 scales; the format
is defined below in quantize_int8 and read by bitdecode's model loader).

    python3 tools/tinymodel/train.py --data .gpu/tiny/data --out $OUT/tiny --minutes 5.5
    python3 tools/tinymodel/train.py --data .gpu/tiny/data --out $OUT/tiny-smoke --smoke

Needs only torch, numpy and the standard library (no transformers,
safetensors or tokenizers; if transformers imports, its LlamaForCausalLM is
used as the reference for the golden file, else this file's own forward,
which follows transformers' Llama semantics step by step).

Writes to --out: model.safetensors, config.json, golden.json, and copies
tokenizer.json, tokenizer_config.json, LICENSE and corpus.json from --data,
so --out is a complete checkpoint directory; plus train_log.txt.
"""

import argparse
import contextlib
import json
import math
import os
import shutil
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

T_START = time.time()

# The model. hidden = heads * head_dim; GQA group 2; 3 layers (--layers and
# --intermediate change the depth and the MLP width). Sized so that the int8
# checkpoint (weights + fp16 scales + fp32 norms) stays under 2 MB:
# embed 2048*256 + 3 * (attn 4*256*64*2 + 2*256*64*2 + mlp 3*256*320)
# = 1,851,392 int8 weights + 57,856 fp16 scales + 1,792 fp32 norm weights.
# (The first trained model had 2 layers of SwiGLU 576, 1,802,240 weights:
# deeper and narrower is the better use of the same bytes at this size.)
MODEL = dict(
    vocab_size=2048,
    hidden_size=256,
    intermediate_size=320,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    max_position_embeddings=1024,
)
GROUP = 64  # int8 weight group size, along the input (last) dimension
MAX_BYTES = 2_000_000  # the size budget of model.safetensors
BOS_ID, EOS_ID = 0, 1
GOLDEN_NEW_TOKENS = 64


def amp(device, enabled=True):
    """bf16 autocast on CUDA; nothing on the CPU."""
    if enabled and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def log(msg, _f=[None]):
    line = f"[{time.time() - T_START:7.1f}s] {msg}"
    print(line, flush=True)
    if _f[0] is not None:
        _f[0].write(line + "\n")
        _f[0].flush()


# ---------------------------------------------------------------------------
# Model: transformers' LlamaForCausalLM semantics.


class RMSNorm(nn.Module):
    """LlamaRMSNorm: normalize in float32, cast back, then scale."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rope_cos_sin(positions, head_dim, theta, device):
    """LlamaRotaryEmbedding (rope_type default): cat(freqs, freqs), float32."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=device).float() / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):
    # x [B, H, T, D]; cos, sin [T, D]
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))


class Attention(nn.Module):
    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        H, Hq, Hkv, D = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.Hq, self.Hkv, self.D = Hq, Hkv, D
        self.q_proj = nn.Linear(H, Hq * D, bias=False)
        self.k_proj = nn.Linear(H, Hkv * D, bias=False)
        self.v_proj = nn.Linear(H, Hkv * D, bias=False)
        self.o_proj = nn.Linear(Hq * D, H, bias=False)

    def forward(self, x, cos, sin, eager=False):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.Hq, self.D).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.Hkv, self.D).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.Hkv, self.D).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = self.Hq // self.Hkv  # repeat_kv: query head h reads KV head h // rep
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        if eager or not hasattr(F, "scaled_dot_product_attention"):
            # The reference path (golden file): explicit float32 softmax.
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.D)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            s = s.masked_fill(~mask, float("-inf"))
            p = torch.softmax(s.float(), dim=-1).to(q.dtype)
            o = F.dropout(p, self.dropout, self.training) @ v
        else:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.Hq * self.D))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, I = c["hidden_size"], c["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    """A Llama decoder layer. dropout (training only; eval() and the golden
    file's forward have none) applies to the attention probabilities and to
    each residual branch's output, as in GPT-2."""

    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c, dropout)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin, eager=False):
        x = x + F.dropout(self.self_attn(self.input_layernorm(x), cos, sin, eager), self.dropout, self.training)
        return x + F.dropout(self.mlp(self.post_attention_layernorm(x)), self.dropout, self.training)


class Inner(nn.Module):
    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([Layer(c, dropout) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class Llama(nn.Module):
    """LlamaForCausalLM with tied embeddings; parameter names match HF's."""

    def __init__(self, c, dropout=0.0):
        super().__init__()
        self.c = c
        self.model = Inner(c, dropout)
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 2:
                s = std
                if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                    s = std / math.sqrt(2 * c["num_hidden_layers"])
                nn.init.normal_(p, mean=0.0, std=s)

    def forward(self, ids, eager=False):
        T = ids.shape[1]
        pos = torch.arange(T, device=ids.device)
        cos, sin = rope_cos_sin(pos, self.c["head_dim"], self.c["rope_theta"], ids.device)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin, eager)
        x = self.model.norm(x)
        return x @ self.model.embed_tokens.weight.t().to(x.dtype)  # tied lm_head


# ---------------------------------------------------------------------------
# Data.


def load_tokens(path):
    a = np.fromfile(path, dtype="<u2")
    return torch.from_numpy(a.astype(np.int32))


def batches(tokens, batch, seq, gen, device):
    """Random windows of seq+1 tokens (documents are BOS ... EOS; a window may
    span several)."""
    tokens = tokens.to(device)
    n = tokens.numel() - seq - 1
    offs = torch.arange(seq + 1, device=device)
    while True:
        ix = torch.randint(0, n, (batch,), generator=gen).to(device)
        x = tokens[ix[:, None] + offs[None, :]].long()
        yield x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, tokens, seq, device, max_windows=None, autocast=True):
    """Mean next-token loss (nats) over non-overlapping windows of seq+1."""
    model.eval()
    total, count = 0.0, 0
    n = (tokens.numel() - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    bs = 16
    for w0 in range(0, n, bs):
        ws = range(w0, min(n, w0 + bs))
        x = torch.stack([tokens[w * seq : w * seq + seq + 1] for w in ws]).to(device).long()
        with amp(device, autocast):
            logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += x[:, 1:].numel()
    model.train()
    return total / max(count, 1), count


# ---------------------------------------------------------------------------
# int8 format.
#
# Every 2-D weight W [rows, cols] (the linear layers and the embedding) is
# stored as two tensors:
#   NAME          I8  [rows, cols]          q, in [-127, 127]
#   NAME_scale    F16 [rows, cols / GROUP]  one scale per GROUP consecutive
#                                           columns of a row
# and W[r, c] = float32(q[r, c]) * float32(scale[r, c // GROUP]). The scale
# is max|W| over the group / 127, rounded to fp16 first; q is rounded with
# that fp16 scale. 1-D weights (RMSNorm) stay F32.


def quantize_int8(w):
    rows, cols = w.shape
    assert cols % GROUP == 0, (rows, cols)
    g = w.float().reshape(rows, cols // GROUP, GROUP)
    amax = g.abs().amax(-1)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax)).half()
    q = torch.round(g / scale.float()[..., None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(rows, cols), scale


def dequantize_int8(q, scale):
    rows, cols = q.shape
    return (q.float().reshape(rows, cols // GROUP, GROUP) * scale.float()[..., None]).reshape(rows, cols)


def write_safetensors(path, tensors, metadata):
    """tensors: list of (name, np.ndarray). Hand-written safetensors file:
    8-byte little-endian header length, JSON header, data (8-byte aligned)."""
    dtypes = {np.dtype("int8"): "I8", np.dtype("float16"): "F16", np.dtype("float32"): "F32"}
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        b = a.tobytes()
        header[name] = {"dtype": dtypes[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
        pad = (-off) % 8
        if pad:
            blobs.append(b"\0" * pad)
            off += pad
    header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return os.path.getsize(path)


def write_int8(path, state):
    """Quantizes state (name -> float32 CPU tensor) and writes the int8
    safetensors file. Returns (bytes, dequantized state, tensor count)."""
    tensors, deq = [], {}
    for name, w in state.items():
        if w.dim() == 2:
            q, s = quantize_int8(w)
            tensors.append((name, q.numpy()))
            tensors.append((name + "_scale", s.numpy()))
            deq[name] = dequantize_int8(q, s)
        else:
            tensors.append((name, w.numpy().astype(np.float32)))
            deq[name] = w
    size = write_safetensors(path, tensors,
                             {"format": "pt", "bitdecode_quant": f"int8 symmetric, group {GROUP} along the last dim, F16 scales in NAME_scale"})
    return size, deq, len(tensors)


# ---------------------------------------------------------------------------
# Golden file.


def byte_decoder():
    order = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    m, n = {}, 0
    for b in order:
        m[chr(b)] = b
    for b in range(256):
        if b not in order:
            m[chr(256 + n)] = b
            n += 1
    return m


def make_decoder(tok_json):
    vocab = tok_json["model"]["vocab"]
    inv = {i: s for s, i in vocab.items()}
    specials = {t["id"] for t in tok_json["added_tokens"] if t.get("special")}
    bd = byte_decoder()

    def decode(ids):
        out = bytearray()
        for i in ids:
            if i in specials:
                continue
            out += bytes(bd[ch] for ch in inv[i])
        return out.decode("utf-8", errors="replace")

    return decode


@torch.no_grad()
def greedy(forward, ids, n):
    """Greedy continuation, recomputing the whole context each step in
    float32: the same numbers as a float32 KV cache, without one."""
    ctx = list(ids)
    out, margins, top10 = [], [], None
    for step in range(n):
        logits = forward(torch.tensor([ctx]))[0, -1].float()
        top = torch.topk(logits, 10)
        if step == 0:
            top10 = [[int(i), float(v)] for v, i in zip(top.values, top.indices)]
        margins.append(float(top.values[0] - top.values[1]))
        nxt = int(top.indices[0])
        out.append(nxt)
        ctx.append(nxt)
    return out, margins, top10


def hf_reference(cfg, state):
    """transformers' LlamaForCausalLM with our weights, or None."""
    try:
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except Exception as e:  # not installed on the GPU machine, probably
        log(f"transformers not available ({type(e).__name__}); golden from this script's HF-semantics forward")
        return None, None
    hc = LlamaConfig(
        vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"], intermediate_size=cfg["intermediate_size"],
        num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
        num_key_value_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"], rms_norm_eps=cfg["rms_norm_eps"],
        rope_theta=cfg["rope_theta"], max_position_embeddings=cfg["max_position_embeddings"],
        tie_word_embeddings=True, hidden_act="silu", attention_bias=False, mlp_bias=False,
        bos_token_id=BOS_ID, eos_token_id=EOS_ID)
    try:
        hc._attn_implementation = "eager"
    except Exception:
        pass
    m = LlamaForCausalLM(hc).float().eval()
    sd = dict(state)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, unexpected = m.load_state_dict(sd, strict=False)
    missing = [k for k in missing if "rotary" not in k]
    if missing or unexpected:
        log(f"transformers reference: missing {missing}, unexpected {unexpected}; not used")
        return None, None
    return (lambda ids: m(ids).logits), f"transformers {transformers.__version__} LlamaForCausalLM (eager, float32)"


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="directory written by 'go run ./tools/tinymodel prepare'")
    ap.add_argument("--out", required=True, help="output checkpoint directory")
    ap.add_argument("--minutes", type=float, default=6.0, help="wall-time budget of the whole run, minutes")
    ap.add_argument("--smoke", action="store_true", help="a few steps, no torch.compile: tests the pipeline in < 60 s")
    ap.add_argument("--batch", type=int, default=128, help="sequences per step")
    ap.add_argument("--seq", type=int, default=1024, help="tokens per training sequence")
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    ap.add_argument("--warmup", type=int, default=200, help="warm-up steps")
    ap.add_argument("--dropout", type=float, default=0.1, help="dropout on attention probabilities and residual branches (training only)")
    ap.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay of the 2-D weights")
    ap.add_argument("--layers", type=int, default=MODEL["num_hidden_layers"], help="decoder layers")
    ap.add_argument("--intermediate", type=int, default=MODEL["intermediate_size"], help="SwiGLU width (a multiple of 64)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-compile", action="store_true", help="do not use torch.compile")
    ap.add_argument("--eval-every", type=float, default=30.0, help="seconds between held-out evaluations")
    args = ap.parse_args()
    MODEL["num_hidden_layers"] = args.layers
    MODEL["intermediate_size"] = args.intermediate

    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "train_log.txt"), "w")
    log.__defaults__[0][0] = logf
    log(f"args: {vars(args)}")
    log(f"torch {torch.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}")

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        log(f"device: {torch.cuda.get_device_name(0)}")
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    else:
        log("device: CPU (no CUDA): expect a slow run")

    corpus = json.load(open(os.path.join(args.data, "corpus.json")))
    tok_json = json.load(open(os.path.join(args.data, "tokenizer.json"), encoding="utf-8"))
    prompts = json.load(open(os.path.join(args.data, "prompts.json")))["prompts"]
    assert len(tok_json["model"]["vocab"]) == MODEL["vocab_size"], "tokenizer vocab != model vocab_size"
    train = load_tokens(os.path.join(args.data, "train.bin"))
    val = load_tokens(os.path.join(args.data, "val.bin"))
    lib_path = os.path.join(args.data, "val_lib.bin")
    val_lib = load_tokens(lib_path) if os.path.exists(lib_path) else None
    assert int(train.max()) < MODEL["vocab_size"] and int(val.max()) < MODEL["vocab_size"]
    log(f"train {train.numel():,} tokens, held-out {val.numel():,} tokens ({len(corpus['heldout_packages'])} packages)")

    budget = 40.0 if args.smoke else args.minutes * 60.0
    # Time kept after training for evaluation, quantization, golden file.
    reserve = 10.0 if args.smoke else 25.0
    deadline = T_START + budget - reserve
    seq = min(args.seq, 256) if args.smoke else args.seq
    batch = min(args.batch, 8) if args.smoke else args.batch

    model = Llama(MODEL, args.dropout).to(device)
    nparams = sum(p.numel() for p in model.parameters())
    log(f"model: {nparams:,} parameters, dropout {args.dropout}, config {MODEL}")
    # The int8 file's size depends only on the shape: check it before training.
    size0 = write_int8(os.path.join(args.out, "model.safetensors"), {k: v.detach().float().cpu() for k, v in model.state_dict().items()})[0]
    if size0 > MAX_BYTES:
        sys.exit(f"train.py: this shape makes a {size0:,}-byte model.safetensors, over the {MAX_BYTES:,}-byte budget")
    log(f"int8 model.safetensors will be {size0:,} bytes (budget {MAX_BYTES:,})")

    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    extra = {"fused": True} if device.type == "cuda" else {}
    opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, **extra)

    fwd = model
    if not args.smoke and not args.no_compile and device.type == "cuda" and hasattr(torch, "compile"):
        try:
            fwd = torch.compile(model)
            x = torch.zeros(batch, seq, dtype=torch.long, device=device)
            with amp(device):
                fwd(x).float().sum().backward()
            opt.zero_grad(set_to_none=True)
            log("torch.compile: on")
        except Exception as e:
            log(f"torch.compile failed ({type(e).__name__}: {str(e)[:200]}); eager")
            fwd = model
            opt.zero_grad(set_to_none=True)

    gen = torch.Generator().manual_seed(args.seed)
    it = batches(train, batch, seq, gen, device)
    step, tokens_seen = 0, 0
    t_train = time.time()
    train_time = max(deadline - t_train, 1.0)
    last_eval = time.time()
    best = (float("inf"), None, 0)
    smoke_steps = 30
    loss_ema = None
    while True:
        now = time.time()
        frac = (now - t_train) / train_time
        if (args.smoke and step >= smoke_steps) or (not args.smoke and now >= deadline):
            break
        # Linear warm-up, then cosine from lr to lr/10 over the time budget.
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = next(it)
        with amp(device):
            logits = fwd(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        tokens_seen += x.numel()
        if step % 50 == 0 or args.smoke:
            lv = loss.item()
            loss_ema = lv if loss_ema is None else 0.9 * loss_ema + 0.1 * lv
            if step % 200 == 0 or args.smoke:
                el = time.time() - t_train
                log(f"step {step} loss {lv:.4f} (ema {loss_ema:.4f}) lr {lr:.2e} {tokens_seen / el / 1e6:.2f}M tok/s")
        if not args.smoke and time.time() - last_eval >= args.eval_every:
            vl, _ = evaluate(model, val, seq, device)
            log(f"step {step} held-out loss {vl:.4f} ppl {math.exp(vl):.3f}")
            if vl < best[0]:
                best = (vl, {k: v.detach().clone() for k, v in model.state_dict().items()}, step)
            last_eval = time.time()
    train_s = time.time() - t_train
    log(f"trained {step} steps, {tokens_seen:,} tokens in {train_s:.1f}s ({tokens_seen / train_s / 1e6:.2f}M tok/s)")

    vl, _ = evaluate(model, val, seq, device, max_windows=8 if args.smoke else None)
    if best[1] is not None and best[0] < vl:
        log(f"final held-out loss {vl:.4f} is worse than step {best[2]}'s {best[0]:.4f}: keeping step {best[2]}")
        model.load_state_dict(best[1])

    # Quantize, dequantize, and evaluate the model the Go loader will see.
    state = {k: v.detach().float().cpu() for k, v in model.state_dict().items()}
    size, deq, ntensors = write_int8(os.path.join(args.out, "model.safetensors"), state)
    qerr = max(float((deq[k] - state[k]).abs().max()) for k in state)
    log(f"model.safetensors: {size:,} bytes ({ntensors} tensors), max |W - deq(q(W))| = {qerr:.3g}")
    if size > MAX_BYTES:
        log(f"WARNING: model.safetensors is {size:,} bytes, over the {MAX_BYTES:,}-byte budget")

    qmodel = Llama(MODEL).float()
    qmodel.load_state_dict(deq)
    qmodel.eval()
    qmodel_dev = qmodel.to(device)
    n_win = 8 if args.smoke else None
    model = model.float()
    vl_fp, cnt = evaluate(model, val, seq, device, max_windows=n_win, autocast=False)
    vl_q, _ = evaluate(qmodel_dev, val, seq, device, max_windows=n_win, autocast=False)
    ratio = corpus["heldout_bytes"] / max(corpus["heldout_tokens"], 1)
    bpb = lambda l: l / math.log(2) / ratio  # nats/token -> bits per byte
    log(f"held-out ({cnt:,} tokens scored, float32): trained weights loss {vl_fp:.4f} ppl {math.exp(vl_fp):.3f} {bpb(vl_fp):.3f} bits/byte; "
        f"int8 weights loss {vl_q:.4f} ppl {math.exp(vl_q):.3f} {bpb(vl_q):.3f} bits/byte")
    heldout_lib = None
    if val_lib is not None and corpus.get("heldout_lib_tokens"):
        # The held-out packages' library files only: the first corpus's
        # held-out set. Bits per byte compare across tokenizers.
        ll_fp, lcnt = evaluate(model, val_lib, seq, device, max_windows=n_win, autocast=False)
        ll_q, _ = evaluate(qmodel_dev, val_lib, seq, device, max_windows=n_win, autocast=False)
        lratio = corpus["heldout_lib_bytes"] / corpus["heldout_lib_tokens"]
        heldout_lib = {"files": corpus["heldout_lib_files"], "tokens_scored": lcnt,
                       "loss_fp32": ll_fp, "ppl_fp32": math.exp(ll_fp), "bits_per_byte_fp32": ll_fp / math.log(2) / lratio,
                       "loss_int8": ll_q, "ppl_int8": math.exp(ll_q), "bits_per_byte_int8": ll_q / math.log(2) / lratio}
        log(f"held-out library files only ({lcnt:,} tokens scored; the first model's set: 1.253 bits/byte int8): "
            f"float32 {heldout_lib['bits_per_byte_fp32']:.3f} bits/byte, int8 {heldout_lib['bits_per_byte_int8']:.3f} bits/byte (ppl {math.exp(ll_q):.3f})")

    qmodel = qmodel_dev.cpu()

    # config.json
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **MODEL,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "torch_dtype": "float32",
        "quantization_config": {
            "quant_method": "bitdecode",
            "format": "int8",
            "bits": 8,
            "group_size": GROUP,
            "symmetric": True,
            "scale_dtype": "float16",
            "scale_suffix": "_scale",
        },
    }
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")

    # golden.json: greedy from the dequantized model, float32, on the CPU.
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    decode = make_decoder(tok_json)
    ours = lambda ids: qmodel(ids, eager=True)
    forward, reference = ours, "tools/tinymodel/train.py Llama forward (HF LlamaForCausalLM semantics, eager attention, float32)"
    hf, hf_name = hf_reference(MODEL, deq)
    if hf is not None:
        with torch.no_grad():
            ids = torch.tensor([prompts[0]["ids"] + list(range(3, 40))])
            d = float((hf(ids) - ours(ids)).abs().max())
        log(f"{hf_name} vs this script's forward: max |logit diff| {d:.3g}")
        if d < 1e-3:
            forward, reference = hf, hf_name
    gold = []
    for p in prompts:
        out, margins, top10 = greedy(forward, p["ids"], GOLDEN_NEW_TOKENS)
        gold.append({"text": p["text"], "ids": p["ids"], "greedy_ids": out, "greedy_text": decode(out),
                     "top2_margins": [round(m, 5) for m in margins], "first_step_top10": top10})
        log(f"golden {p['text']!r} -> {decode(out)!r}")
    golden = {
        "model": "gotiny",
        "reference": reference,
        "dtype": "float32 (weights dequantized from int8 exactly as the Go loader does; float32 KV)",
        "new_tokens": GOLDEN_NEW_TOKENS,
        "prompts": gold,
        "heldout": {
            "packages": corpus["heldout_packages"],
            "tokens_scored": cnt,
            "seq": seq,
            "loss_fp32": vl_fp, "ppl_fp32": math.exp(vl_fp), "bits_per_byte_fp32": bpb(vl_fp),
            "loss_int8": vl_q, "ppl_int8": math.exp(vl_q), "bits_per_byte_int8": bpb(vl_q),
        },
        "heldout_library": heldout_lib,
        "training": {
            "steps": step, "tokens": tokens_seen, "seconds": round(train_s, 1), "batch": batch, "seq": seq,
            "peak_lr": args.lr, "dropout": args.dropout, "weight_decay": args.weight_decay,
            "smoke": args.smoke, "parameters": nparams,
            "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "go_version": corpus["go_version"],
            "train_tokens": corpus["train_tokens"], "epochs": round(tokens_seen / corpus["train_tokens"], 2),
        },
        "model_safetensors_bytes": size,
    }
    with open(os.path.join(args.out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    for name in ["tokenizer.json", "tokenizer_config.json", "LICENSE", "corpus.json"]:
        shutil.copyfile(os.path.join(args.data, name), os.path.join(args.out, name))
    log(f"done: wrote {args.out} in {time.time() - T_START:.1f}s total")


if __name__ == "__main__":
    main()
