#!/usr/bin/env python3
"""Reads a vlm-image-text HDF5 file with h5py (independently of the C++ reader) and
checks the schema-v1 invariants documented in README.md ("Datasets"); prints a short summary.
usage: python3 tools/check_h5.py FILE.h5 [FILE.h5 ...]   (needs: pip install h5py numpy)"""
import sys

import h5py
import numpy as np


def check(path):
    f = h5py.File(path, "r")
    assert f.attrs["format"] == "vlm-image-text", "format attribute"
    assert int(f.attrs["version"]) == 1, "version attribute"
    raw = f.attrs["image_storage"] == "raw"
    if raw:
        n = f["images/raw"].shape[0]
        assert f["images/raw"].dtype == np.uint8
    else:
        off = f["images/offsets"][:]
        n = len(off) - 1
        assert off[0] == 0 and np.all(np.diff(off) >= 0) and off[-1] == f["images/encoded"].shape[0]
    for k in ("height", "width", "channels"):
        assert f["images/" + k].shape == (n,)
    to = f["captions/text_offsets"][:]
    m = len(to) - 1
    assert to[0] == 0 and np.all(np.diff(to) >= 0) and to[-1] == f["captions/text"].shape[0]
    img = f["captions/image"][:]
    assert img.shape == (m,) and (m == 0 or (img.min() >= 0 and img.max() < n))
    text = f["captions/text"]
    for j in range(min(m, 3)):
        bytes(text[to[j]:to[j + 1]]).decode("utf-8")
    seen = np.zeros(n, dtype=np.int64)
    for s in ("train", "val", "test"):
        idx = f["splits/" + s][:]
        assert np.all(np.diff(idx) > 0) if len(idx) > 1 else True
        seen[idx] += 1
    assert seen.max(initial=0) <= 1, "splits overlap"
    if "tokens" in f["captions"]:
        assert f["captions/token_offsets"][-1] == f["captions/tokens"].shape[0]
    first = bytes(text[to[0]:to[1]]).decode() if m else ""
    print(f"{path}: OK  {n} images ({'raw' if raw else 'encoded'}), {m} captions, "
          f"splits {[len(f['splits/' + s]) for s in ('train', 'val', 'test')]}, first caption {first!r}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        check(p)
