#!/usr/bin/env python3
"""Reads a `vlm train` checkpoint (step_N.h5, layout in checkpoint/checkpoint.h and
docs/checkpoints.md) with h5py, independently of the C++ reader: prints the run state, the
modules with their tensor counts and parameters, and checks that every tensor is f32,
finite, matches its crc32c attribute (CRC-32C of its little-endian bytes), and that the
AdamW moments have the shapes of their parameters. Exits 1 on a failed check, 2 on bad
arguments.
usage: python3 tools/check_checkpoint.py CKPT.h5 [--list]
  (needs: pip install h5py numpy)"""
import argparse
import sys

import h5py
import numpy as np


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as runlog/tfrecord.h."""
    table = crc32c.table
    if table is None:
        table = []
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            table.append(c)
        crc32c.table = table
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = None


def tensors(group, prefix=""):
    for name, obj in group.items():
        path = f"{prefix}/{name}" if prefix else name
        if isinstance(obj, h5py.Group):
            yield from tensors(obj, path)
        else:
            yield path, obj


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--list", action="store_true", help="print every tensor with its shape")
    a = ap.parse_args()
    try:
        f = h5py.File(a.checkpoint, "r")
    except OSError as e:
        print(f"{a.checkpoint}: {e}", file=sys.stderr)
        sys.exit(2)
    bad = 0
    if f.attrs.get("format") not in ("vlm-checkpoint", b"vlm-checkpoint"):
        print(f"{a.checkpoint}: not a vlm checkpoint", file=sys.stderr)
        sys.exit(1)
    print(f"{a.checkpoint}: version {f.attrs['version']}, step {f.attrs['step']}, saved at tp={f.attrs['saved_tp']} "
          f"dp={f.attrs['saved_dp']} zero={f.attrs['zero']}, global batch {f.attrs['global_batch']}")
    st = f["state"].attrs
    print(f"  sampler: epoch {st['sampler_epoch']} step {st['sampler_step']} seed {st['sampler_seed']}")
    print(f"  config: {len(f['config'])} bytes of INI ({len(f['options'])} of them given), "
          f"tokenizer: {len(f['tokenizer'])} bytes of JSON")
    shapes = {}
    for path, ds in tensors(f):
        if not (path.startswith("model/") or path.startswith("optim/")):
            continue
        x = ds[()]
        if ds.dtype != np.float32:
            print(f"  {path}: dtype {ds.dtype}, expected float32"); bad += 1; continue
        if not np.isfinite(x).all():
            print(f"  {path}: non-finite values"); bad += 1
        if crc32c(x.astype("<f4").tobytes()) != int(ds.attrs["crc32c"]):
            print(f"  {path}: crc32c mismatch"); bad += 1
        shapes[path] = x.shape
        if a.list:
            print(f"  {path} {list(x.shape)}")
    for module in f["model"]:
        n = len(f["model"][module])
        params = sum(int(np.prod(s)) for p, s in shapes.items() if p.startswith(f"model/{module}/"))
        moments = "with AdamW moments" if f"optim/m/{module}" in f else "frozen (no moments)"
        print(f"  {module}: {n} tensors, {params:,} parameters, {moments}")
        for k in ("m", "v"):
            for p, s in shapes.items():
                if p.startswith(f"optim/{k}/{module}/") and shapes.get("model/" + p[len(f"optim/{k}/"):]) != s:
                    print(f"  {p}: shape {s} differs from its parameter's"); bad += 1
    print("ok" if bad == 0 else f"{bad} problems")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
