"""The language models of bench/bench_llm.cpp written in PyTorch, for the PyTorch
comparisons: tools/torch_cpu_bench.py (CPU) and bench/gpu/torch_baseline.py (GPU).

Shapes (bench_llm's --models): `gpt2` (GPT-2 124M: V=50257, C=768, L=12, NH=12, F=3072,
tied embeddings, LayerNorm, tanh GELU), `llama1b` (TinyLlama-1.1B: V=32000, C=2048,
L=22, NH=32, NKV=4, F=5632, RMSNorm, SwiGLU, RoPE, untied output) and `tiny` (a Llama of
V=512, C=128, L=2, NH=4, NKV=2, F=256, for rehearsals). LM(ids, targets) returns the
mean next-token cross-entropy (targets -100 ignored). Weights: normal(0, 0.02).
flops_per_token follows bench_llm: 6 N + 12 L C T, N = the parameters used in matmuls
(every 2-D weight but the embedding tables; the tied token table counts once, as the
output layer).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = {
    "gpt2": dict(family="gpt2", V=50257, C=768, L=12, NH=12, NKV=12, F=3072, max_pos=1024),
    "llama1b": dict(family="llama", V=32000, C=2048, L=22, NH=32, NKV=4, F=5632, max_pos=2048),
    "tiny": dict(family="llama", V=512, C=128, L=2, NH=4, NKV=2, F=256, max_pos=2048),
}


class Block(nn.Module):
    def __init__(self, m):
        super().__init__()
        C, F_, self.NH, self.NKV = m["C"], m["F"], m["NH"], m["NKV"]
        self.HS = C // self.NH
        self.gpt2 = m["family"] == "gpt2"
        kv = self.NKV * self.HS
        if self.gpt2:
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.up, self.down = nn.Linear(C, F_), nn.Linear(F_, C)
        else:
            self.ln1, self.ln2 = nn.RMSNorm(C, eps=1e-5), nn.RMSNorm(C, eps=1e-5)
            self.qkv, self.proj = nn.Linear(C, C + 2 * kv, bias=False), nn.Linear(C, C, bias=False)
            self.gate_up, self.down = nn.Linear(C, 2 * F_, bias=False), nn.Linear(F_, C, bias=False)

    def rope(self, x, cos, sin):  # x [B, H, T, HS], "rotate half"
        h = self.HS // 2
        x1, x2 = x[..., :h], x[..., h:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split([C, self.NKV * self.HS, self.NKV * self.HS], dim=-1)
        q = q.view(B, T, self.NH, self.HS).transpose(1, 2)
        k = k.view(B, T, self.NKV, self.HS).transpose(1, 2)
        v = v.view(B, T, self.NKV, self.HS).transpose(1, 2)
        if not self.gpt2:
            q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.NKV != self.NH)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, C))
        h = self.ln2(x)
        if self.gpt2:
            h = self.down(F.gelu(self.up(h), approximate="tanh"))
        else:
            g, u = self.gate_up(h).chunk(2, dim=-1)
            h = self.down(F.silu(g) * u)
        return x + h


class LM(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m
        C, V = m["C"], m["V"]
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Embedding(m["max_pos"], C) if m["family"] == "gpt2" else None
        self.blocks = nn.ModuleList(Block(m) for _ in range(m["L"]))
        self.norm = nn.LayerNorm(C) if m["family"] == "gpt2" else nn.RMSNorm(C, eps=1e-5)
        self.head = None if m["family"] == "gpt2" else nn.Linear(C, V, bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, targets):
        B, T = ids.shape
        x = self.tok(ids)
        HS = self.m["C"] // self.m["NH"]
        t = torch.arange(T, dtype=torch.float32, device=ids.device)
        inv = 10000.0 ** (-torch.arange(0, HS // 2, dtype=torch.float32, device=ids.device) * 2 / HS)
        ang = t[:, None] * inv[None, :]
        cos, sin = ang.cos(), ang.sin()
        if self.pos is not None:
            x = x + self.pos(torch.arange(T, device=ids.device))
        for b in self.blocks:
            x = b(x, cos, sin)
        x = self.norm(x)
        logits = x @ (self.tok.weight if self.head is None else self.head.weight).t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)


def matmul_params(model):
    """N of the FLOP count: the 2-D weights but the embedding tables (+ the tied table)."""
    n = sum(p.numel() for name, p in model.named_parameters()
            if p.dim() == 2 and not name.startswith(("tok.", "pos.")))
    return n + (model.tok.weight.numel() if model.head is None else 0)


def flops_per_token(model, T):
    m = model.m
    return 6.0 * matmul_params(model) + 12.0 * m["L"] * m["C"] * T


def batch(m, B, T, device, seed=0):
    """Random ids and next-token targets, the last target of each sample ignored."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, m["V"], (B, T), generator=g)
    targets = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], dim=1)
    return ids.to(device), targets.to(device)
