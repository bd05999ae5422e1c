#!/usr/bin/env python3
"""Checks a `vlm export` folder against Hugging Face transformers (run by hand).

  python3 tools/check_export.py --vlm build/apps/vlm --export DIR [--checkpoint CKPT.h5] [--data F.h5]

1. DIR/llm loads with AutoModelForCausalLM (no missing or unexpected tensor); for a few
   token sequences its logits (float64, eager attention) are compared with `vlm lm logits
   --hf DIR/llm` (our backbone, f32, CPU). The tokenizer loads with AutoTokenizer and
   decodes its own encoding back; with --data F.h5 (tokenized by the run's tokenizer) it
   encodes every caption text into the file's tokens.
2. DIR/vision loads with SiglipVisionModel (no missing or unexpected tensor); on a random
   S x S RGB image (S = image_size, so neither side resizes) its last_hidden_state
   (float64, pixels normalised as preprocessor_config.json says) is compared with
   `vlm vision features --vision.hf DIR/vision` (our encoder, f32).
3. DIR/vlm_extra.safetensors: its metadata and tensors are listed; the run's options in
   its metadata (vlm_config) agree with the two config.json files.
4. With --checkpoint: every tensor of the three files equals (bitwise) the checkpoint's
   /model/<module>/<name> (h5py), and every checkpoint tensor is exported exactly once.
Prints the max abs differences; exits 1 when one exceeds --tol (relative to the largest
magnitude of the reference) or a tensor is missing.
Needs torch, transformers (>= 5), safetensors, h5py, numpy, Pillow.
"""
import argparse
import configparser
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
from PIL import Image
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer, SiglipVisionModel

FAILED = []


def report(what, diff, scale, tol):
    rel = diff / max(scale, 1e-30)
    ok = rel <= tol
    print(f"  {what}: max abs diff {diff:.3e} (max |ref| {scale:.3e}, relative {rel:.2e}) {'ok' if ok else 'FAIL'}")
    if not ok:
        FAILED.append(what)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")


def check_tokens(d, data):
    # The dataset's /captions/tokens (BOS caption EOS, encoded by our tokenizer) against
    # the exported tokenizer.json as transformers encodes the caption texts.
    tok = AutoTokenizer.from_pretrained(d)
    with h5py.File(data, "r") as f:
        c = f["captions"]
        text, to, ids, io = bytes(c["text"][...]), c["text_offsets"][...], c["tokens"][...], c["token_offsets"][...]
    bad = sum(ids[io[j] + 1:io[j + 1] - 1].tolist() != tok(text[to[j]:to[j + 1]].decode(), add_special_tokens=False)[
        "input_ids"] for j in range(len(to) - 1))
    print(f"  tokenizer on {data}: {len(to) - 1 - bad} of {len(to) - 1} captions encoded as vlm did")
    if bad:
        FAILED.append("tokenizer encodings")


def check_llm(vlm, d, tmp, tol):
    print(f"{d}:")
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64, attn_implementation="eager",
                                                       output_loading_info=True)
    missing = {k: sorted(v) for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if missing:
        FAILED.append("llm tensors")
        print("  loading info:", missing)
    model.eval()
    cfg = json.load(open(os.path.join(d, "config.json")))
    V = cfg["vocab_size"]
    tok = AutoTokenizer.from_pretrained(d)
    text = "A small image showing a sneaker."
    enc = tok(text, add_special_tokens=False)["input_ids"]
    back = tok.decode(enc)
    print(f"  tokenizer: {type(tok).__name__}, {len(tok)} tokens; {text!r} -> {enc} -> {back!r}")
    if back != text:
        FAILED.append("tokenizer round trip")
    rng = np.random.default_rng(7)
    seqs = [[tok.bos_token_id] + enc, rng.integers(0, V, 1).tolist(), rng.integers(0, V, 40).tolist()]
    for i, ids in enumerate(seqs):
        out = os.path.join(tmp, f"logits_{i}.h5")
        run([vlm, "lm", "logits", "--hf", d, "--ids", ",".join(map(str, ids)), "--device", "cpu", "--out", out])
        with h5py.File(out, "r") as f:
            ours = f["logits"][...].astype(np.float64)
        with torch.no_grad():
            ref = model(torch.tensor([ids])).logits[0].numpy()
        report(f"logits of {len(ids)} tokens", float(np.abs(ours - ref).max()), float(np.abs(ref).max()), tol)


def check_vision(vlm, d, tmp, tol):
    print(f"{d}:")
    model, info = SiglipVisionModel.from_pretrained(d, dtype=torch.float64, attn_implementation="eager",
                                                    output_loading_info=True)
    missing = {k: sorted(v) for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if missing:
        FAILED.append("vision tensors")
        print("  loading info:", missing)
    model.eval()
    pre = json.load(open(os.path.join(d, "preprocessor_config.json")))
    S = model.config.image_size
    img = np.random.default_rng(11).integers(0, 256, (S, S, 3), dtype=np.uint8)
    path = os.path.join(tmp, "image.png")
    Image.fromarray(img, "RGB").save(path)
    x = img.astype(np.float64) * pre["rescale_factor"]
    x = (x - np.array(pre["image_mean"])) / np.array(pre["image_std"])
    pixels = torch.tensor(x.transpose(2, 0, 1)[None])
    with torch.no_grad():
        ref = model(pixel_values=pixels).last_hidden_state[0].numpy()
    out = os.path.join(tmp, "features.h5")
    run([vlm, "vision", "features", "--vision.hf", d, "--image", path, "--device", "cpu", "--out", out])
    with h5py.File(out, "r") as f:
        ours = f["features"][...].astype(np.float64)
    report(f"features of a {S}x{S} image ({ref.shape[0]} patches x {ref.shape[1]})",
           float(np.abs(ours - ref).max()), float(np.abs(ref).max()), tol)


def tensors_of(path):
    with safe_open(path, "np") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def check_files(export, checkpoint):
    extra, meta = tensors_of(os.path.join(export, "vlm_extra.safetensors"))
    print(f"{export}/vlm_extra.safetensors: {len(extra)} tensors; metadata "
          f"{ {k: (v if len(v) < 40 else f'<{len(v)} chars>') for k, v in meta.items()} }")
    for k in sorted(extra):
        print(f"  {k} {list(extra[k].shape)}")
    ini = configparser.ConfigParser()
    ini.read_string("[top]\n" + meta["vlm_config"])  # options before the first section
    llm_cfg = json.load(open(os.path.join(export, "llm", "config.json")))
    vis_cfg = json.load(open(os.path.join(export, "vision", "config.json")))
    pairs = [("model", "vocab_size", llm_cfg["vocab_size"]), ("model", "d_model", llm_cfg["hidden_size"]),
             ("model", "n_layers", llm_cfg["num_hidden_layers"]), ("vision", "d_model", vis_cfg["hidden_size"]),
             ("vision", "layers", vis_cfg["num_hidden_layers"]), ("vision", "patch", vis_cfg["patch_size"])]
    for sec, key, want in pairs:
        if int(ini[sec][key]) != want:
            FAILED.append(f"vlm_config {sec}.{key}")
            print(f"  vlm_config: {sec}.{key} = {ini[sec][key]}, the exported config.json says {want}")
    if not checkpoint:
        return
    llm, _ = tensors_of(os.path.join(export, "llm", "model.safetensors"))
    vision, _ = tensors_of(os.path.join(export, "vision", "model.safetensors"))
    exported = {f"llm/{k}": v for k, v in llm.items()}
    exported.update({f"vision/{k[len('vision_model.'):]}": v for k, v in vision.items()})
    exported.update(extra)
    stored = {}
    with h5py.File(checkpoint, "r") as f:
        f["model"].visititems(lambda name, obj: stored.__setitem__(name, obj[...]) if isinstance(obj, h5py.Dataset) else None)
    if sorted(stored) != sorted(exported):
        FAILED.append("tensor names")
        print("  only in the checkpoint:", sorted(set(stored) - set(exported)))
        print("  only in the export:", sorted(set(exported) - set(stored)))
    same = [k for k in stored if k in exported and stored[k].shape == exported[k].shape
            and np.array_equal(stored[k].view(np.uint32), exported[k].view(np.uint32))]
    print(f"{checkpoint}: {len(same)} of {len(stored)} tensors of /model exported bitwise equal")
    if len(same) != len(stored):
        FAILED.append("bitwise equality")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlm", default="build/apps/vlm")
    ap.add_argument("--export", required=True)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--data", default="", help="a dataset tokenized with the run's tokenizer (vlm data tokenize)")
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        check_llm(a.vlm, os.path.join(a.export, "llm"), tmp, a.tol)
        if a.data:
            check_tokens(os.path.join(a.export, "llm"), a.data)
        check_vision(a.vlm, os.path.join(a.export, "vision"), tmp, a.tol)
    check_files(a.export, a.checkpoint)
    print("FAILED: " + ", ".join(FAILED) if FAILED else "all checks passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
