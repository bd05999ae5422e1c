#!/usr/bin/env python3
"""Reads TensorBoard event files with the real `tensorboard` package (independently of the
C++ reader in runlog/tb_events.h) and prints, per run folder, the scalar tags with their
number of points and step range, and the image tags with their sizes (each PNG is
decoded with Pillow when it is installed, and its size checked against the event's).
Exits 1 when a tag named by --expect-scalars / --expect-images is missing from a run or
an image does not decode, 2 on bad arguments. See docs/training.md, "TensorBoard".
usage: python3 tools/check_tensorboard.py PATH [PATH ...] [--expect-scalars a,b] [--expect-images c]
  PATH: an events.out.tfevents.* file, a run folder, or a folder of runs (e.g. runs/)
  (needs: pip install tensorboard; optional: pillow)"""
import argparse
import io
import os
import sys

from tensorboard.backend.event_processing import event_accumulator as ea


def run_folders(path):
    """(name, path) of every folder under `path` (itself included) holding event files;
    a single file is its own run."""
    if os.path.isfile(path):
        return [(path, path)]
    if not os.path.isdir(path):
        sys.exit(f"{path}: no such file or folder")
    runs = []
    for root, _, files in sorted(os.walk(path)):
        if any("tfevents" in f for f in files):
            runs.append((os.path.relpath(root, path) if root != path else path, root))
    return runs


def check_png(img):
    try:
        from PIL import Image
    except ImportError:
        return ""
    try:
        im = Image.open(io.BytesIO(img.encoded_image_string))
        im.load()
    except Exception as e:  # noqa: BLE001 (any decoder failure is a bad image)
        return f"PNG does not decode ({e})"
    if im.size != (img.width, img.height):
        return f"PNG is {im.size[0]}x{im.size[1]}, the event says {img.width}x{img.height}"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--expect-scalars", default="", help="comma-separated scalar tags every run must have")
    ap.add_argument("--expect-images", default="", help="comma-separated image tags every run must have")
    args = ap.parse_args()
    want_s = [t for t in args.expect_scalars.split(",") if t]
    want_i = [t for t in args.expect_images.split(",") if t]
    failed = False
    runs = [r for p in args.paths for r in run_folders(p)]
    if not runs:
        print("no event files found", file=sys.stderr)
        return 1
    for name, path in runs:
        acc = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0, ea.IMAGES: 0})  # 0: keep every point
        acc.Reload()
        tags = acc.Tags()
        print(f"run {name}")
        for tag in sorted(tags.get(ea.SCALARS, [])):
            pts = acc.Scalars(tag)
            steps = [p.step for p in pts]
            print(f"  scalar {tag}: {len(pts)} points, steps {min(steps)}..{max(steps)}, last {pts[-1].value:g}")
        for tag in sorted(tags.get(ea.IMAGES, [])):
            imgs = acc.Images(tag)
            last = imgs[-1]
            print(f"  image {tag}: {len(imgs)} images, last step {last.step} {last.width}x{last.height}")
            for img in imgs:
                bad = check_png(img)
                if bad:
                    print(f"  error: image {tag} step {img.step}: {bad}", file=sys.stderr)
                    failed = True
        for kind, want in ((ea.SCALARS, want_s), (ea.IMAGES, want_i)):
            for tag in want:
                if tag not in tags.get(kind, []):
                    print(f"  error: run {name} has no {kind} tag '{tag}'", file=sys.stderr)
                    failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
