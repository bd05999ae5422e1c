#!/usr/bin/env python3
"""Golden data for the llm/ backbone (tests/llm/test_golden.cpp).

Builds a tiny GPT-2-style and a tiny Llama/Qwen2-style model with random parameters
(Hugging Face names and [out, in] Linear layout, as llm/param_specs.h), runs one packed
varlen batch (3 samples, positions restart per sample, causal attention inside each
sample, some targets ignored with -100) in float64 with PyTorch on CPU, and writes
parameters, inputs, logits [T, V], the mean loss and every parameter gradient.

File format (read by tests/llm/golden_file.h, no dependencies):
  text lines:  "config <key> <value>"  and  "tensor <name> <f32|i32> <ndim> <dims...> <offset>"
  a line "DATA", then the raw little-endian payload; offsets are bytes from its start.
Run:  python3 tools/make_llm_golden.py   (writes tools/golden/llm_{gpt2,llama}.bin)
"""
import math
import os
import struct

import torch

torch.manual_seed(1234)
DT = torch.float64
HERE = os.path.dirname(os.path.abspath(__file__))

CU = [0, 5, 12, 20]
T = CU[-1]


def positions():
    p = []
    for a, b in zip(CU[:-1], CU[1:]):
        p += list(range(b - a))
    return torch.tensor(p)


def causal_varlen_mask():
    m = torch.zeros(T, T, dtype=torch.bool)
    for a, b in zip(CU[:-1], CU[1:]):
        for i in range(a, b):
            m[i, a:i + 1] = True
    return m


def rope(x, pos, theta):  # x [T, NH, HS], HF rotate-half
    hs = x.shape[-1]
    inv = theta ** (-torch.arange(0, hs, 2, dtype=DT) / hs)
    ang = pos.to(DT)[:, None] * inv[None, :]  # [T, HS/2]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[:, None, :]
    sin = torch.cat([ang.sin(), ang.sin()], -1)[:, None, :]
    x1, x2 = x[..., : hs // 2], x[..., hs // 2:]
    rot = torch.cat([-x2, x1], -1)
    return x * cos + rot * sin


def attention(q, k, v, nh, nkv, hs):  # q [T, NH*HS], k/v [T, NKV*HS] (after rope)
    q = q.view(T, nh, hs).transpose(0, 1)
    k = k.view(T, nkv, hs).transpose(0, 1).repeat_interleave(nh // nkv, 0)
    v = v.view(T, nkv, hs).transpose(0, 1).repeat_interleave(nh // nkv, 0)
    s = q @ k.transpose(1, 2) / math.sqrt(hs)
    s = s.masked_fill(~causal_varlen_mask()[None], float("-inf"))
    return (s.softmax(-1) @ v).transpose(0, 1).reshape(T, nh * hs)


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def make_params(cfg):
    V, C, L, NH, NKV, F = (cfg[k] for k in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff"))
    HS = C // NH
    gpt2 = cfg["family"] == "gpt2"
    P = {}

    def w(name, *shape, scale=0.1):
        P[name] = torch.randn(*shape, dtype=DT) * scale

    def norm(prefix):
        P[prefix + ".weight"] = 1 + 0.1 * torch.randn(C, dtype=DT)
        if gpt2:
            w(prefix + ".bias", C)

    w("model.embed_tokens.weight", V, C, scale=0.5)
    if gpt2:
        w("model.embed_positions.weight", cfg["max_pos"], C, scale=0.2)
    for i in range(L):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm")
        w(p + "self_attn.q_proj.weight", NH * HS, C, scale=0.3)
        w(p + "self_attn.k_proj.weight", NKV * HS, C, scale=0.3)
        w(p + "self_attn.v_proj.weight", NKV * HS, C, scale=0.3)
        if gpt2 or cfg["qkv_bias"]:
            w(p + "self_attn.q_proj.bias", NH * HS)
            w(p + "self_attn.k_proj.bias", NKV * HS)
            w(p + "self_attn.v_proj.bias", NKV * HS)
        w(p + "self_attn.o_proj.weight", C, NH * HS, scale=0.2)
        if gpt2:
            w(p + "self_attn.o_proj.bias", C)
        norm(p + "post_attention_layernorm")
        if not gpt2:
            w(p + "mlp.gate_proj.weight", F, C, scale=0.3)
        w(p + "mlp.up_proj.weight", F, C, scale=0.3)
        if gpt2:
            w(p + "mlp.up_proj.bias", F)
        w(p + "mlp.down_proj.weight", C, F, scale=0.2)
        if gpt2:
            w(p + "mlp.down_proj.bias", C)
    norm("model.norm")
    if not cfg["tied"]:
        w("lm_head.weight", V, C, scale=0.3)
    for t in P.values():
        t.requires_grad_(True)
    return P


def forward(cfg, P, ids, targets):
    C, L, NH, NKV, eps = cfg["d_model"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"], cfg["norm_eps"]
    HS = C // NH
    gpt2 = cfg["family"] == "gpt2"
    pos = positions()

    def lin(x, name):
        y = x @ P[name + ".weight"].T
        return y + P[name + ".bias"] if name + ".bias" in P else y

    def norm(x, prefix):
        if gpt2:
            return torch.nn.functional.layer_norm(x, (C,), P[prefix + ".weight"], P[prefix + ".bias"], eps)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * P[prefix + ".weight"]

    h = P["model.embed_tokens.weight"][ids]
    if gpt2:
        h = h + P["model.embed_positions.weight"][pos]
    for i in range(L):
        p = f"model.layers.{i}."
        x = norm(h, p + "input_layernorm")
        q, k, v = lin(x, p + "self_attn.q_proj"), lin(x, p + "self_attn.k_proj"), lin(x, p + "self_attn.v_proj")
        if not gpt2:
            q = rope(q.view(T, NH, HS), pos, cfg["rope_theta"]).reshape(T, -1)
            k = rope(k.view(T, NKV, HS), pos, cfg["rope_theta"]).reshape(T, -1)
        h = h + lin(attention(q, k, v, NH, NKV, HS), p + "self_attn.o_proj")
        x = norm(h, p + "post_attention_layernorm")
        if gpt2:
            a = gelu_tanh(lin(x, p + "mlp.up_proj"))
        else:
            a = torch.nn.functional.silu(lin(x, p + "mlp.gate_proj")) * lin(x, p + "mlp.up_proj")
        h = h + lin(a, p + "mlp.down_proj")
    x = norm(h, "model.norm")
    head = P["model.embed_tokens.weight"] if cfg["tied"] else P["lm_head.weight"]
    logits = x @ head.T
    loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100, reduction="mean")
    return logits, loss


def write(path, cfg, tensors):
    header, payload, off = [], b"", 0
    for k, v in cfg.items():
        header.append(f"config {k} {v}")
    for name, t in tensors.items():
        t = t.detach()
        if t.dtype in (torch.int64, torch.int32):
            kind, data = "i32", t.to(torch.int32).contiguous().numpy().astype("<i4").tobytes()
        else:
            kind, data = "f32", t.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        dims = list(t.shape)
        header.append(f"tensor {name} {kind} {len(dims)} {' '.join(map(str, dims))} {off}")
        payload += data
        off += len(data)
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\nDATA\n").encode())
        f.write(payload)
    print(f"wrote {path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


def make(cfg, path):
    P = make_params(cfg)
    ids = torch.randint(0, cfg["vocab_size"], (T,))
    targets = torch.randint(0, cfg["vocab_size"], (T,))
    targets[[0, 6, 13, 14]] = -100  # loss mask
    logits, loss = forward(cfg, P, ids, targets)
    loss.backward()
    out = {"input.ids": ids, "input.targets": targets, "input.cu_seqlens": torch.tensor(CU),
           "output.logits": logits, "output.loss": loss.reshape(1)}
    for k, v in P.items():
        out["param." + k] = v
    for k, v in P.items():
        out["grad." + k] = v.grad
    write(path, cfg, out)


GPT2 = dict(family="gpt2", vocab_size=100, d_model=16, n_layers=2, n_heads=4, n_kv_heads=4, d_ff=64, max_pos=32,
            rope_theta=10000.0, norm_eps=1e-5, qkv_bias=1, tied=1)
LLAMA = dict(family="llama", vocab_size=100, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=40, max_pos=32,
             rope_theta=10000.0, norm_eps=1e-5, qkv_bias=1, tied=0)

if __name__ == "__main__":
    out_dir = os.path.join(HERE, "golden")
    os.makedirs(out_dir, exist_ok=True)
    make(GPT2, os.path.join(out_dir, "llm_gpt2.bin"))
    make(LLAMA, os.path.join(out_dir, "llm_llama.bin"))
