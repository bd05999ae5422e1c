#!/usr/bin/env python3
"""PyTorch's training step for bench_llm's models on the same GPU, printed in bench_llm's format.

The models of bench/bench_llm.cpp (tools/torch_llm.py: the same shapes, the same FLOP
count) trained the way `bench_llm --precision bf16` trains: f32 master weights under
bf16 autocast, SDPA attention, fused AdamW (torch.optim.AdamW(fused=True)). One step =
forward with the loss + backward + AdamW, like bench_llm's. Variants (--modes): `eager`,
and `compile`, each decoder block compiled on its own (regional torch.compile: one
compilation reused by every layer, tens of seconds instead of minutes for the whole
model). Each figure is the median of --iters timed steps after --warmup untimed ones
(CUDA events around the step; host clock on the CPU); AdamW is timed inside the step.

Output: one line per model and mode in bench_llm's format, so the ratio of the two is
read off one run:
  llama1b  params 1100.1M  B=1 T=2048  bf16  step fwd+bwd+AdamW  0.500 s (median of 5)
    4096 tokens/s  55.0 TFLOP/s  loss 10.373  MFU 5.6% of 989 TFLOP/s bf16  AdamW 0.010 s
    (torch 2.11.0 eager)
MFU's peak: --peak_tflops, else the dense bf16 peak of an H100/H200 SXM (989 TFLOP/s,
core/gpu_spec.h), else none. --device cpu runs the same code on the CPU (the rehearsal
of bench/gpu/proof.sh; no MFU).
Usage: bench/gpu/torch_baseline.py [--models llama1b] [--batch 1] [--seq 2048] [--modes eager,compile]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch_llm import LM, MODELS, batch, flops_per_token  # noqa: E402


def dense_bf16_peak(device):
    """989 TFLOP/s for an H100/H200 SXM (core/gpu_spec.h); None for any other device."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    if ("H100" in name or "H200" in name) and "PCIe" not in name and "NVL" not in name:
        return 989.0
    return None


class Timer:
    """Seconds of the work between start() and stop(): CUDA events on a GPU, else the host clock."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"

    def start(self):
        if self.cuda:
            self.a = torch.cuda.Event(enable_timing=True)
            self.b = torch.cuda.Event(enable_timing=True)
            self.a.record()
        else:
            self.t0 = time.perf_counter()

    def stop(self):
        if self.cuda:
            self.b.record()
            return self  # read later: elapsed() synchronises
        self.t1 = time.perf_counter()
        return self

    def elapsed(self):
        if self.cuda:
            self.b.synchronize()
            return self.a.elapsed_time(self.b) / 1e3
        return self.t1 - self.t0


def run(name, mode, args, device, peak):
    m = MODELS[name]
    torch.manual_seed(args.seed)
    model = LM(m).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    B, T = args.batch, args.seq
    ids, targets = batch(m, B, T, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    if mode == "compile":
        for blk in model.blocks:
            blk.compile()
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)

    steps, adams = [], []
    loss = None
    for it in range(args.warmup + args.iters):
        t_step, t_adam = Timer(device), Timer(device)
        t_step.start()
        opt.zero_grad(set_to_none=False)
        with autocast:
            loss = model(ids, targets)
        loss.backward()
        t_adam.start()
        opt.step()
        t_adam.stop()
        t_step.stop()
        if it >= args.warmup:
            steps.append(t_step)
            adams.append(t_adam)
        else:
            t_step.elapsed()  # warm-up (compilation): wait before the next one
    t = statistics.median(x.elapsed() for x in steps)
    t_adam = statistics.median(x.elapsed() for x in adams)
    achieved = flops_per_token(model, T) * B * T / t
    gpu = device.type == "cuda"
    line = (f"{name:<8} params {n_params / 1e6:.1f}M  B={B} T={T}  bf16  step fwd+bwd+AdamW  {t:.3f} s "
            f"(median of {args.iters})  {B * T / t:.0f} tokens/s  "
            f"{achieved / (1e12 if gpu else 1e9):.1f} {'TFLOP/s' if gpu else 'GFLOP/s'}  loss {loss.item():.3f}")
    if peak:
        line += f"  MFU {100 * achieved / 1e12 / peak:.1f}% of {peak:.0f} TFLOP/s bf16"
    line += f"  AdamW {t_adam:.3f} s  (torch {torch.__version__} {mode})"
    if gpu:
        line += f"  peak memory {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB"
        torch.cuda.reset_peak_memory_stats(device)
    print(line, flush=True)
    del model, opt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="llama1b", help="comma-separated: " + ", ".join(MODELS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--peak_tflops", type=float, default=0.0, help="dense bf16 peak for MFU; 0 = by GPU name")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for mode in args.modes.split(","):
        if mode not in ("eager", "compile"):
            ap.error(f"--modes: unknown mode '{mode}' (expected eager or compile)")
    for name in args.models.split(","):
        if name not in MODELS:
            ap.error(f"--models: unknown model '{name}' (expected {', '.join(MODELS)})")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_baseline: error: --device cuda: torch sees no GPU", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    peak = args.peak_tflops or dense_bf16_peak(device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    extra = ""
    if device.type == "cuda":
        extra = f", cuDNN {torch.backends.cudnn.version()}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}"
    print(f"torch {torch.__version__} on {where}{extra}; dense bf16 peak {peak or 'unknown'}", flush=True)
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            run(name, mode, args, device, peak)
    return 0


if __name__ == "__main__":
    sys.exit(main())
