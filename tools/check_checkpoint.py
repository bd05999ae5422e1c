#!/usr/bin/env python3
"""Reads a `vlm train` checkpoint independently of the C++ reader (docs/checkpoints.md):
a sharded save (a step_N/ folder, or a checkpoint folder: its `latest`) with the standard
library alone, or a single file (step_N.h5, `vlm checkpoint consolidate`) with h5py.
Prints the run state, the modules with their tensor counts and parameters, and checks
the checksum of the index (version 2) or of the single file's state and texts (version
2), that every tensor is f32, finite, matches its CRC-32C (of its little-endian bytes), that
the AdamW moments have the shapes of their parameters, and for a sharded save that every
shard is the one the index describes (size, header, pieces) and that the pieces hold
each element of each tensor exactly once. Exits 1 on a failed check, 2 on bad arguments.
usage: python3 tools/check_checkpoint.py CKPT [--list]
  (a single file needs: pip install h5py numpy)"""
import argparse
import array
import json
import math
import os
import struct
import sys


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


def tensors(group, h5py, prefix=""):
    for name, obj in group.items():
        path = f"{prefix}/{name}" if prefix else name
        if isinstance(obj, h5py.Group):
            yield from tensors(obj, h5py, path)
        else:
            yield path, obj


def report(name, shapes, moments, bad, listing):
    """The modules' summary and the moments' shapes, for either form."""
    modules = sorted({p.split("/")[1] for p in shapes if p.startswith("model/")})
    for module in modules:
        mine = {p: s for p, s in shapes.items() if p.startswith(f"model/{module}/")}
        params = sum(math.prod(s) for s in mine.values())
        m = "with AdamW moments" if module in moments else "frozen (no moments)"
        print(f"  {module}: {len(mine)} tensors, {params:,} parameters, {m}")
        for k in ("m", "v"):
            for p, s in shapes.items():
                if p.startswith(f"optim/{k}/{module}/") and shapes.get("model/" + p[len(f"optim/{k}/"):]) != s:
                    print(f"  {p}: shape {s} differs from its parameter's"); bad += 1
    if listing:
        for p, s in shapes.items():
            print(f"  {p} {list(s)}")
    print("ok" if bad == 0 else f"{bad} problems")
    sys.exit(1 if bad else 0)


def box_elements(shape, offset, extent, begin, end):
    """Indices into the tensor of elements [begin, end) of a box, in its row-major order."""
    out = []
    for e in range(begin, end):
        rest, at, stride = e, 0, 1
        for d in reversed(range(len(shape))):
            at += (offset[d] + rest % extent[d]) * stride
            rest //= extent[d]
            stride *= shape[d]
        out.append(at)
    return out


def check_sharded(folder, listing):
    text = open(os.path.join(folder, "index.json"), "rb").read()
    idx = json.loads(text)
    if idx.get("format") != "vlm-checkpoint-index" or idx.get("version") not in (1, 2):
        print(f"{folder}: not a vlm checkpoint index of version 1 or 2", file=sys.stderr)
        sys.exit(1)
    bad = 0
    if idx["version"] == 2:  # {"crc32c":C, then the bytes C covers
        head = b'{"crc32c":%d,' % idx["crc32c"]
        if not text.startswith(head) or crc32c(text[len(head):]) != idx["crc32c"]:
            print(f"  index.json: its bytes do not match its checksum"); bad += 1
    print(f"{folder}: sharded, step {idx['step']}, saved at tp={idx['saved_tp']} dp={idx['saved_dp']} "
          f"zero={idx['zero']}, global batch {idx['global_batch']}, {len(idx['shards'])} shards")
    st = idx["state"]
    print(f"  sampler: epoch {st['sampler_epoch']} step {st['sampler_step']} seed {st['sampler_seed'] % 2**64}")
    for key, t in idx["texts"].items():
        data = open(os.path.join(folder, t["file"]), "rb").read()
        if len(data) != t["bytes"] or crc32c(data) != t["crc32c"]:
            print(f"  {t['file']}: not the index's {key}"); bad += 1
    shards = []
    for k, ref in enumerate(idx["shards"]):
        data = open(os.path.join(folder, ref["file"]), "rb").read()
        shards.append(data)
        if len(data) != ref["bytes"] or data[-8:] != b"VLMSHARD":
            print(f"  {ref['file']}: {len(data)} bytes, the index says {ref['bytes']}"); bad += 1; continue
        n = struct.unpack("<Q", data[-16:-8])[0]
        header = data[-16 - n:-16]
        if crc32c(header) != ref["header_crc32c"]:
            print(f"  {ref['file']}: header checksum differs from the index's"); bad += 1; continue
        h = json.loads(header)
        mine = sorted((p["at"], t["name"], p["crc32c"]) for t in idx["tensors"] for p in t["pieces"] if p["shard"] == k)
        if [(p["at"], p["tensor"], p["crc32c"]) for p in h["pieces"]] != mine or h["save"] != idx["save"]:
            print(f"  {ref['file']}: its pieces are not the index's"); bad += 1
    shapes, moments = {}, set()
    for t in idx["tensors"]:
        name, shape = t["name"], tuple(t["shape"])
        seen = bytearray(math.prod(shape))
        for p in t["pieces"]:
            b, e = p["range"]
            raw = shards[p["shard"]][p["at"]:p["at"] + 4 * (e - b)]
            if crc32c(raw) != p["crc32c"]:
                print(f"  {name}: piece at byte {p['at']} of shard {p['shard']}: crc32c mismatch"); bad += 1
            values = array.array("f", raw)
            if sys.byteorder != "little":
                values.byteswap()
            if not all(math.isfinite(x) for x in values):
                print(f"  {name}: non-finite values"); bad += 1
            for at in box_elements(shape, p["offset"], p["extent"], b, e):
                seen[at] += 1
        if any(c != 1 for c in seen):
            print(f"  {name}: its pieces do not hold each element exactly once"); bad += 1
        shapes[name] = shape
        if name.startswith("optim/m/"):
            moments.add(name.split("/")[2])
    report(folder, shapes, moments, bad, listing)


def check_h5(path, listing):
    import h5py
    import numpy as np
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        print(f"{path}: {e}", file=sys.stderr)
        sys.exit(2)
    bad = 0
    if f.attrs.get("format") not in ("vlm-checkpoint", b"vlm-checkpoint"):
        print(f"{path}: not a vlm checkpoint", file=sys.stderr)
        sys.exit(1)
    if f.attrs["version"] >= 2:  # the state's fields as decimal text, then the three texts
        a, st = f.attrs, f["state"].attrs
        fields = [a["step"], a["saved_tp"], a["saved_dp"], a["zero"], a["global_batch"], a["micro_batches"],
                  st["seed"], st["sampler_seed"], st["sampler_epoch"], st["sampler_step"]]
        data = "".join(f"{int(v)} " for v in fields).encode()
        data += b"".join(f[t][()].tobytes() for t in ("config", "options", "tokenizer"))
        if crc32c(data) != int(a["crc32c"]):
            print(f"  state and texts: crc32c mismatch"); bad += 1
    print(f"{path}: version {f.attrs['version']}, step {f.attrs['step']}, saved at tp={f.attrs['saved_tp']} "
          f"dp={f.attrs['saved_dp']} zero={f.attrs['zero']}, global batch {f.attrs['global_batch']}")
    st = f["state"].attrs
    print(f"  sampler: epoch {st['sampler_epoch']} step {st['sampler_step']} seed {st['sampler_seed']}")
    print(f"  config: {len(f['config'])} bytes of INI ({len(f['options'])} of them given), "
          f"tokenizer: {len(f['tokenizer'])} bytes of JSON")
    shapes = {}
    for name, ds in tensors(f, h5py):
        if not (name.startswith("model/") or name.startswith("optim/")):
            continue
        x = ds[()]
        if ds.dtype != np.float32:
            print(f"  {name}: dtype {ds.dtype}, expected float32"); bad += 1; continue
        if not np.isfinite(x).all():
            print(f"  {name}: non-finite values"); bad += 1
        if crc32c(x.astype("<f4").tobytes()) != int(ds.attrs["crc32c"]):
            print(f"  {name}: crc32c mismatch"); bad += 1
        shapes[name] = x.shape
    report(path, shapes, set(f["optim/m"]) if "optim/m" in f else set(), bad, listing)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--list", action="store_true", help="print every tensor with its shape")
    a = ap.parse_args()
    path = a.checkpoint
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "index.json")):
        latest = os.path.join(path, "latest")
        if not os.path.exists(latest):
            print(f"{path}: neither a save (index.json) nor a checkpoint folder (latest)", file=sys.stderr)
            sys.exit(2)
        path = os.path.join(path, open(latest).read().strip())
    if os.path.isdir(path):
        check_sharded(path, a.list)
    else:
        check_h5(path, a.list)


if __name__ == "__main__":
    main()
