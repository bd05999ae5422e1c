#!/usr/bin/env python3
"""Reads a vlm-image-text HDF5 file with h5py (independently of the C++ reader) and
checks the schema invariants (versions 1 and 2) documented in docs/dataset-format.md;
prints a short summary.
With --scenes (a file of `vlm data build --data.from scenes`), also checks every caption
against the pixels (decoded with Pillow; the background is the most frequent colour):
its box is tight (each edge line holds a non-background pixel, the one-pixel ring around
it is background), a "where" answer names the region of the box centre and a "what"
question asks about it, and prints a few questions with their boxes.
With --colours (a file of `vlm data build --data.from colours`), checks every caption
against the pixels: the background is one neutral grey and every pixel outside the item
boxes is neutral (grey clutter), each box is tight and inside one slot, the question
names a palette colour whose chromaticity is the nearest to the box's brightest pixel,
the colours of a scene are distinct, and the answer is the label's noun.
usage: python3 tools/check_h5.py [--scenes | --colours] FILE.h5 [FILE.h5 ...]
(needs: pip install h5py numpy pillow)"""
import io
import sys

import h5py
import numpy as np

REGIONS = ["top left", "top middle", "top right", "middle left", "center",
           "middle right", "bottom left", "bottom middle", "bottom right"]


def region(box, w, h):  # docs/dataset-format.md, "Scenes": the 3 x 3 cell of the box centre
    x0, y0, x1, y1 = (int(v) for v in box)
    return 3 * min(2, 3 * (y0 + y1) // (2 * h)) + min(2, 3 * (x0 + x1) // (2 * w))


def check_offsets(f, data, offsets, m):
    off = f[offsets][:]
    assert off.shape == (m + 1,) and off[0] == 0 and np.all(np.diff(off) >= 0), offsets
    assert off[-1] == f[data].shape[0], offsets
    return off


def check_scenes(f, n, m, to, po):
    from PIL import Image
    text, prompt = f["captions/text"], f["captions/prompt"]
    img, box, label = f["captions/image"][:], f["captions/box"][:], f["captions/label"][:]
    names = f["captions"].attrs["class_names"].split("\n")
    off, enc = f["images/offsets"][:], f["images/encoded"]
    by_image = [[] for _ in range(n)]
    for j in range(m):
        by_image[img[j]].append(j)
    where = 0
    for i in range(n):
        px = np.asarray(Image.open(io.BytesIO(bytes(enc[off[i]:off[i + 1]]))).convert("RGB"))
        h, w, _ = px.shape
        packed = (px[..., 0].astype(np.int32) << 16) | (px[..., 1].astype(np.int32) << 8) | px[..., 2]
        fg = packed != np.bincount(packed.ravel()).argmax()  # [h, w] not background
        for j in by_image[i]:
            x0, y0, x1, y1 = (int(v) for v in box[j])
            inside = fg[y0:y1, x0:x1]
            assert inside[:, 0].any() and inside[:, -1].any() and inside[0].any() and inside[-1].any(), \
                f"caption {j}: box {box[j]} is not tight"
            ring = fg[max(y0 - 1, 0):y1 + 1, max(x0 - 1, 0):x1 + 1].sum() - inside.sum()
            assert ring == 0, f"caption {j}: {ring} non-background pixels next to box {box[j]}"
            q = bytes(prompt[po[j]:po[j + 1]]).decode()
            a = bytes(text[to[j]:to[j + 1]]).decode()
            r = REGIONS[region(box[j], w, h)]
            if a in REGIONS:
                where += 1
                assert a == r and q.endswith(" the " + names[label[j]] + "?"), f"caption {j}: {q!r} -> {a!r}"
            else:
                assert q.endswith(" the " + r + "?") and a.endswith(names[label[j]]), f"caption {j}: {q!r} -> {a!r}"
            if j < 4:
                print(f"  [{j}] image {i}: {q!r} -> {a!r}, box {[int(v) for v in box[j]]}, class {label[j]} {names[label[j]]!r}")
    print(f"  scenes: {m} captions ({m - where} what, {where} where) agree with the pixels of {n} images")


PALETTE = {"red": (230, 30, 30), "green": (40, 200, 40), "blue": (40, 90, 255), "yellow": (240, 220, 30),
           "magenta": (230, 40, 230), "cyan": (30, 210, 220)}  # (docs/dataset-format.md, "Colour scenes")


def check_colours(f, n, m, to, po):
    from PIL import Image
    text, prompt = f["captions/text"], f["captions/prompt"]
    img, box, label = f["captions/image"][:], f["captions/box"][:], f["captions/label"][:]
    names = f["captions"].attrs["class_names"].split("\n")
    off, enc = f["images/offsets"][:], f["images/encoded"]
    grid = int(f.attrs["source"].split("grid ")[1].split(",")[0])
    by_image = [[] for _ in range(n)]
    for j in range(m):
        by_image[img[j]].append(j)
    chroma = {k: np.array(v, float) / sum(v) for k, v in PALETTE.items()}
    for i in range(n):
        px = np.asarray(Image.open(io.BytesIO(bytes(enc[off[i]:off[i + 1]]))).convert("RGB")).astype(np.int32)
        h, w, _ = px.shape
        slot = w // grid
        packed = (px[..., 0] << 16) | (px[..., 1] << 8) | px[..., 2]
        bgc = np.bincount(packed.ravel()).argmax()
        assert (bgc >> 16) == ((bgc >> 8) & 255) == (bgc & 255), f"image {i}: background not grey"
        fg = packed != bgc
        in_box = np.zeros((h, w), bool)
        colours = set()
        for j in by_image[i]:
            x0, y0, x1, y1 = (int(v) for v in box[j])
            inside = fg[y0:y1, x0:x1]
            assert inside[:, 0].any() and inside[:, -1].any() and inside[0].any() and inside[-1].any(), \
                f"caption {j}: box {box[j]} is not tight"
            ring = fg[max(y0 - 1, 0):y1 + 1, max(x0 - 1, 0):x1 + 1].sum() - inside.sum()
            assert ring == 0, f"caption {j}: {ring} non-background pixels next to box {box[j]}"
            sx, sy = x0 // slot, y0 // slot
            assert x0 >= sx * slot + 1 and x1 <= (sx + 1) * slot - 1 and y0 >= sy * slot + 1 and y1 <= (sy + 1) * slot - 1, \
                f"caption {j}: box {box[j]} is not inside one slot"
            in_box[y0:y1, x0:x1] = True
            q = bytes(prompt[po[j]:po[j + 1]]).decode()
            a = bytes(text[to[j]:to[j + 1]]).decode()
            named = [k for k in PALETTE if q in (f"what is the {k} item?", f"which item is {k}?")]
            assert len(named) == 1, f"caption {j}: {q!r} names no palette colour"
            region = px[y0:y1, x0:x1].reshape(-1, 3)
            bright = region[region.sum(1).argmax()].astype(float)
            nearest = min(chroma, key=lambda k: np.linalg.norm(bright / bright.sum() - chroma[k]))
            assert nearest == named[0], f"caption {j}: {q!r} but the item's colour is nearest {nearest}"
            assert named[0] not in colours, f"caption {j}: two items of colour {named[0]} in image {i}"
            colours.add(named[0])
            assert a.endswith(" " + names[label[j]]) and a.split(" ")[0] in ("a", "an"), f"caption {j}: {a!r}"
            if j < 4:
                print(f"  [{j}] image {i}: {q!r} -> {a!r}, box {[int(v) for v in box[j]]}, class {label[j]} {names[label[j]]!r}")
        out = px[~in_box]
        assert (out[:, 0] == out[:, 1]).all() and (out[:, 1] == out[:, 2]).all(), f"image {i}: coloured pixel outside the items"
    print(f"  colours: {m} captions agree with the pixels of {n} images")


def check(path, scenes=False, colours=False):
    f = h5py.File(path, "r")
    assert f.attrs["format"] == "vlm-image-text", "format attribute"
    version = int(f.attrs["version"])
    assert version in (1, 2), f"version attribute {version}"
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
    to = check_offsets(f, "captions/text", "captions/text_offsets", m)
    img = f["captions/image"][:]
    assert img.shape == (m,) and (m == 0 or (img.min() >= 0 and img.max() < n))
    text = f["captions/text"]
    for j in range(min(m, 3)):
        bytes(text[to[j]:to[j + 1]]).decode("utf-8")
    po = check_offsets(f, "captions/prompt", "captions/prompt_offsets", m) if "prompt" in f["captions"] else None
    seen = np.zeros(n, dtype=np.int64)
    for s in ("train", "val", "test"):
        idx = f["splits/" + s][:]
        assert np.all(np.diff(idx) > 0) if len(idx) > 1 else True
        seen[idx] += 1
    assert seen.max(initial=0) <= 1, "splits overlap"
    if "tokens" in f["captions"]:
        assert f["captions/token_offsets"][-1] == f["captions/tokens"].shape[0]
    extra = ""
    if version == 1:
        assert "box" not in f["captions"] and "label" not in f["captions"], "version-2 fields in a version-1 file"
    if "box" in f["captions"]:
        box = f["captions/box"][:]
        assert box.shape == (m, 4) and box.dtype.kind == "i", f"captions/box shape {box.shape}"
        hw, ww = f["images/height"][:][img], f["images/width"][:][img]
        ok = (box[:, 0] >= 0) & (box[:, 0] < box[:, 2]) & (box[:, 2] <= ww) & \
             (box[:, 1] >= 0) & (box[:, 1] < box[:, 3]) & (box[:, 3] <= hw)
        assert ok.all(), f"captions/box entry {np.argmin(ok)} is not inside its image"
        area = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1]) / (hw * ww)
        extra += f", boxes (area {area.min():.3f}..{area.max():.3f} of the image)"
    if "label" in f["captions"]:
        label = f["captions/label"][:]
        names = f["captions"].attrs.get("class_names", "").split("\n")
        assert label.shape == (m,) and label.min(initial=0) >= 0 and label.max(initial=0) < len(names)
        extra += f", labels ({len(np.unique(label))} of {len(names)} classes)"
    first = bytes(text[to[0]:to[1]]).decode() if m else ""
    print(f"{path}: OK  v{version}, {n} images ({'raw' if raw else 'encoded'}), {m} captions, "
          f"splits {[len(f['splits/' + s]) for s in ('train', 'val', 'test')]}{extra}, first caption {first!r}")
    if scenes:
        check_scenes(f, n, m, to, po)
    if colours:
        check_colours(f, n, m, to, po)


if __name__ == "__main__":
    scenes, colours = "--scenes" in sys.argv, "--colours" in sys.argv
    for p in sys.argv[1:]:
        if p not in ("--scenes", "--colours"):
            check(p, scenes, colours)
