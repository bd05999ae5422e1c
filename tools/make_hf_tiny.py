#!/usr/bin/env python3
"""Makes the tiny Hugging Face fixtures of the safetensors import test.

Writes, under OUT (default tests/data/hf_tiny):
  llama/  a random LlamaForCausalLM (vocab 256, hidden 64, 2 layers, 4 heads, 2 KV heads),
          saved with save_pretrained as ONE model.safetensors in F32;
  qwen2/  a random Qwen2ForCausalLM of the same shape (QKV bias), saved in BF16 and
          SHARDED (model.safetensors.index.json + several files), so the import test
          covers both dtypes and both layouts;
and in each folder reference.safetensors: tensor "logits" F32 [T, vocab] for the token
ids in its metadata "ids" (comma-separated). The reference is computed in float64 from
the saved directory reloaded with transformers (the bf16 weights for qwen2), eager
attention, so the C++ f32 forward is compared with an exact reference and the tolerance measures only the
C++ side's f32 rounding.

Needs torch, transformers and safetensors (CPU is enough). The fixtures are committed,
so the C++ tests never need Python. Total size is kept < 1 MB.
Usage: python3 tools/make_hf_tiny.py [OUT]
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

IDS = [1, 17, 42, 255, 3, 128, 64, 7, 200, 99]

COMMON = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    tie_word_embeddings=False,
    hidden_act="silu",
    bos_token_id=1,
    eos_token_id=2,
)


def randomise(model, seed):
    """Every parameter from N(0, 0.5^2) (norm weights around 1), so all of them matter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in name:
                p.copy_(1.0 + 0.1 * noise)
            else:
                p.copy_(0.5 * noise if p.ndim == 1 else noise / p.shape[-1] ** 0.5)


def make(kind, out, seed):
    if kind == "llama":
        cfg = LlamaConfig(rms_norm_eps=1e-5, rope_theta=10000.0, **COMMON)
        model = LlamaForCausalLM(cfg)
        dtype, shard = torch.float32, None
    else:
        cfg = Qwen2Config(rms_norm_eps=1e-6, rope_theta=1000000.0, use_sliding_window=False, **COMMON)
        model = Qwen2ForCausalLM(cfg)
        dtype, shard = torch.bfloat16, "60KB"
    randomise(model, seed)
    model = model.to(dtype)  # the saved weights; the reference uses exactly these
    d = os.path.join(out, kind)
    shutil.rmtree(d, ignore_errors=True)
    kw = dict(safe_serialization=True)
    if shard:
        kw["max_shard_size"] = shard
    model.save_pretrained(d, **kw)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)

    # Reload what was saved: the in-memory model would carry a bf16-rounded RoPE
    # inv_freq buffer (model.to(bf16) converts buffers), which a fresh load does not.
    ref = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager")
    ref.eval()
    with torch.no_grad():
        logits = ref(torch.tensor([IDS])).logits[0]
    save_file({"logits": logits.to(torch.float32).contiguous()},
              os.path.join(d, "reference.safetensors"),
              metadata={"ids": ",".join(map(str, IDS)), "computed_in": "float64, eager attention"})
    cfgj = json.load(open(os.path.join(d, "config.json")))
    print(kind, "->", d, sorted(os.listdir(d)), "dtype", cfgj.get("torch_dtype", cfgj.get("dtype")))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hf_tiny")
    os.makedirs(out, exist_ok=True)
    make("llama", out, 1234)
    make("qwen2", out, 5678)
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
    print("total bytes", total)
    assert total < 1 << 20, "fixtures must stay under 1 MB"


if __name__ == "__main__":
    main()
