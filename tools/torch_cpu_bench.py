#!/usr/bin/env python3
"""PyTorch side of bench/cpu_vs_torch.sh: the CPU benchmarks of bench/ run in PyTorch.

Cases (the same shapes as the C++ benchmarks, f32):
  llm   bench/bench_llm.cpp's models at B=1, T=128 (--batch/--seq): `gpt2` and `llama1b`
        (tools/torch_llm.py). Next-token loss, the last target of each sample ignored. Steps: fwd+bwd, and fwd+bwd+AdamW (torch.optim.AdamW, fused=True
        unless --adamw foreach); the AdamW call alone is timed inside the second kind.
  gemm  bench/bench_gemm.cpp's CPU shapes, y[M,N] = x[M,K] @ W[N,K]^T.
  attn  bench/bench_attention.cpp's CPU cases: packed variable-length samples, one
        scaled_dot_product_attention per sample (causal or not, grouped-query),
        forward and backward.
Each figure is the median of --iters timed runs after --warmup untimed ones, and is
printed as a line `RESULT <name> <seconds>` (names as in bench/cpu_vs_torch.sh) after a
readable line. --compile also times torch.compile'd models (inductor, C++ codegen; the
first compilation takes minutes).

Threads: torch.set_num_threads(--threads); bench/cpu_vs_torch.sh also sets OMP_NUM_THREADS.

Installing PyTorch for this script (a project-local venv, .venv-bench/, ignored by git;
neither the build nor the tests need it). PyPI only carries CUDA builds of torch for Linux x86-64; CPU-only wheels
are on download.pytorch.org, not on PyPI. From PyPI alone:
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install --no-deps torch==2.15.0
  .venv-bench/bin/pip install filelock typing-extensions sympy mpmath networkx jinja2 \\
      markupsafe fsspec numpy
and, because torch's CUDA libraries must load even for CPU work: on a machine with the
CUDA toolkit in the loader's path (/usr/local/cuda), the three it lacks, ~300 MB:
  .venv-bench/bin/pip install --no-deps nvidia-cufile nvidia-cusparselt-cu13==0.8.1 \\
      nvidia-nvshmem-cu13==3.7.2
elsewhere `pip install torch==2.15.0` with its dependencies (several GB of nvidia-*
wheels). This script imports torch with lazy symbol binding (below), so a CUDA library
older than the wheel's (e.g. the toolkit's NCCL) does not stop a CPU-only run.
Usage: tools/torch_cpu_bench.py [--cases llm,gemm,attn] [--models gpt2,llama1b] [--threads N] ...
"""
import argparse
import math
import os
import statistics
import sys
import time

# Lazy binding: torch's CUDA libraries are linked but never called on the CPU, so a
# symbol missing from an older system CUDA library (NCCL) must not fail the import.
sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch_llm import LM, MODELS  # noqa: E402  (the models, shared with bench/gpu/torch_baseline.py)

GEMMS = [(512, 768, 768), (512, 2304, 768), (512, 3072, 768), (512, 768, 3072), (2048, 2048, 2048)]
ATTNS = [([256, 256], 12, 12, 64, True), ([64, 192, 500], 12, 4, 64, True), ([197, 197], 12, 12, 64, False)]


def lens_str(lens):
    """Sample lengths as bench_attention prints them: runs as NxL, joined by '+'."""
    out, i = [], 0
    while i < len(lens):
        j = i
        while j < len(lens) and lens[j] == lens[i]:
            j += 1
        out.append(f"{j - i}x{lens[i]}" if j - i > 1 else str(lens[i]))
        i = j
    return "+".join(out)


def result(name, seconds, extra=""):
    print(f"{name:<40} {seconds * 1e3:10.2f} ms  {extra}", flush=True)
    print(f"RESULT {name} {seconds:.6f}", flush=True)


def median_time(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_llm(args):
    for name in args.models.split(","):
        m = MODELS[name]
        torch.manual_seed(0)
        model = LM(m)
        n_params = sum(p.numel() for p in model.parameters())
        B, T = args.batch, args.seq
        ids = torch.randint(0, m["V"], (B, T))
        targets = torch.cat([ids[:, 1:], torch.full((B, 1), -100)], dim=1)
        variants = [("eager", model)]
        if args.compile:
            variants.append(("compile", torch.compile(model)))
        for tag, fwd in variants:
            def step():
                model.zero_grad(set_to_none=False)
                fwd(ids, targets).backward()

            label = f"{name}.{tag}"
            result(f"{label}.fwdbwd", median_time(step, args.warmup, args.iters), f"{n_params / 1e6:.1f}M params")
            if name in args.no_adamw_for.split(","):
                continue
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=args.adamw == "fused",
                                    foreach=args.adamw == "foreach")
            adam_times = []

            def step_adam():
                step()
                t0 = time.perf_counter()
                opt.step()
                adam_times.append(time.perf_counter() - t0)

            t = median_time(step_adam, args.warmup, args.iters)
            result(f"{label}.fwdbwd_adamw", t, f"AdamW {args.adamw}")
            result(f"{label}.adamw", statistics.median(adam_times[args.warmup:]), f"{args.adamw}, "
                   f"{28 * n_params / statistics.median(adam_times[args.warmup:]) / 1e9:.1f} GB/s at 28 B/param")
            del opt
        del model, variants


def bench_gemm(args):
    for M, N, K in GEMMS:
        x, w = torch.randn(M, K), torch.randn(N, K)
        t = median_time(lambda: F.linear(x, w), 2, max(args.iters, 5))
        result(f"gemm.{M}x{N}x{K}", t, f"{2 * M * N * K / t / 1e9:.1f} GFLOP/s")


def bench_attn(args):
    for lens, NH, NKV, HS, causal in ATTNS:
        qs = [torch.randn(1, NH, L, HS, requires_grad=True) for L in lens]
        ks = [torch.randn(1, NKV, L, HS, requires_grad=True) for L in lens]
        vs = [torch.randn(1, NKV, L, HS, requires_grad=True) for L in lens]
        douts = [torch.randn(1, NH, L, HS) * 0.1 for L in lens]

        def fwd():
            return [F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=NKV != NH)
                    for q, k, v in zip(qs, ks, vs)]

        def fwd_nograd():
            with torch.no_grad():
                fwd()

        def fwd_bwd():
            outs = fwd()
            torch.autograd.backward(outs, douts)

        iters = max(args.iters, 5)
        tf = median_time(fwd_nograd, 2, iters)
        tfb = median_time(fwd_bwd, 2, iters)
        name = f"attn.{lens_str(lens)}.nh{NH}.nkv{NKV}.hs{HS}." + ("causal" if causal else "full")
        flop = sum(4.0 * L * L * HS * NH * (0.5 if causal else 1.0) for L in lens)
        result(name + ".fwd", tf, f"{flop / tf / 1e9:.1f} GFLOP/s")
        result(name + ".bwd", max(tfb - tf, 0.0), "(fwd+bwd minus fwd)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="llm,gemm,attn")
    ap.add_argument("--models", default="gpt2,llama1b")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--adamw", choices=["fused", "foreach"], default="fused")
    ap.add_argument("--no-adamw-for", default="", metavar="MODELS",
                    help="models timed fwd+bwd only (the 1.1B model with AdamW needs ~18 GB)")
    ap.add_argument("--compile", action="store_true", help="also torch.compile the models")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.backends.cpu.get_cpu_capability()}", flush=True)
    for case in args.cases.split(","):
        {"llm": bench_llm, "gemm": bench_gemm, "attn": bench_attn}[case](args)


if __name__ == "__main__":
    main()
