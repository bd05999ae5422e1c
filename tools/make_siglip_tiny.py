#!/usr/bin/env python3
"""Makes the tiny Hugging Face SigLIP fixtures of the vision encoder's import tests.

One random SigLIP vision tower (image_size S=32, patch_size P=8 -> G=4, hidden 32,
2 layers, 4 heads, intermediate 64, gelu_pytorch_tanh, layer_norm_eps 1e-6) is written in
three checkpoint layouts under OUT (default tests/data/hf_tiny); the tower's weights are
the same in all three, so one reference serves them all:

  siglip/       SiglipVisionModel (model_type siglip_vision_model, with its attention-pooling
                head), save_pretrained, F32, one model.safetensors. transformers >= 5
                writes this class's tensors WITHOUT a prefix (embeddings.*, encoder.*,
                post_layernorm.*, head.*); checkpoints written by transformers 4 use
                vision_model.*. Also:
                image.png              the RGB test image, S x S, 8 bits, lossless;
                reference.safetensors  "pixel_values" F32 [3, S, S]: image.png as SigLIP
                                       preprocesses it (x / 255, then (x - 0.5) / 0.5 per
                                       channel, RGB, no resize since the image is S x S);
                                       "last_hidden_state" F32 [G*G, 32]: the tower's output
                                       (all layers, then post_layernorm) on it, patches in
                                       row-major order, computed in float64 from the
                                       reloaded model (eager attention); metadata
                                       "max_abs" = max |last_hidden_state|.
  siglip_full/  SiglipModel (model_type siglip): the same tower under vision_model.*,
                beside a tiny random text tower (text_model.*, logit_scale, logit_bias),
                saved in BF16 (the tower's weights are bf16-exact, see below).
  llava/        a real tiny LlavaForConditionalGeneration (model_type llava, a 1-layer
                Llama text model, vision_config.model_type siglip_vision_model without the
                pooling head, vision_feature_layer -1, vision_feature_select_strategy
                "full"), in BF16, with the tower's tensors named
                vision_tower.vision_model.* as in the Hub's LLaVA/PaliGemma checkpoints
                (llava-hf/*, google/paligemma-*; what transformers 4 wrote).
                transformers 5.23's save_pretrained writes them as vision_tower.* instead
                (and model.vision_tower.* with save_original_format=False): the
                siglip/ fixture already covers a prefix-less tower, so this one keeps the
                Hub's spelling, renamed from the saved file; the script checks that
                transformers loads the renamed file back to the same weights.

Every weight is random (LayerNorm weights around 1 and biases around 0 but not equal,
position embeddings of the same scale as the patch embeddings, so all of them matter)
and rounded to a bf16-representable value, so the BF16 copies hold exactly the F32
values and the same reference applies; the script checks that the three checkpoints,
reloaded in float64, give the same last_hidden_state.

Needs torch, transformers (>= 5), safetensors and Pillow (CPU is enough). The
fixtures are committed, so the C++ tests never need Python. The whole of OUT (with
tools/make_hf_tiny.py's fixtures) is kept < 1 MB.
Usage: python3 tools/make_siglip_tiny.py [OUT]
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
from PIL import Image
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import (LlamaConfig, LlavaConfig, LlavaForConditionalGeneration, SiglipConfig,
                          SiglipImageProcessor, SiglipModel, SiglipTextConfig, SiglipVisionConfig,
                          SiglipVisionModel)

S, P = 32, 8
G = S // P
VISION = dict(image_size=S, patch_size=P, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=64, hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, num_channels=3)


def randomise(model, seed):
    """Every parameter random and bf16-exact (stored as f32)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "norm" in name and name.endswith("weight"):   # LayerNorm / RMSNorm scale
                p.copy_(1.0 + 0.2 * noise)
            elif "norm" in name:                             # LayerNorm shift
                p.copy_(0.2 * noise)
            elif "position_embedding" in name:
                p.copy_(0.5 * noise)
            elif p.ndim == 1 or "probe" in name or name.startswith("logit_"):
                p.copy_(0.3 * noise)
            else:                                            # weights: unit-ish output scale
                fan_in = int(np.prod(p.shape[1:]))
                p.copy_(noise / fan_in ** 0.5)
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def test_image():
    """A deterministic S x S RGB image: gradients plus a rectangle and a disc."""
    y, x = np.mgrid[0:S, 0:S]
    img = np.zeros((S, S, 3), np.uint8)
    img[..., 0] = (x * 255) // (S - 1)                       # red: left -> right
    img[..., 1] = (y * 255) // (S - 1)                       # green: top -> bottom
    img[..., 2] = ((x + 2 * y) * 7) % 256                    # blue: diagonal stripes
    img[4:12, 18:29] = (250, 240, 10)                        # yellow rectangle, top right
    disc = (x - 10) ** 2 + (y - 22) ** 2 <= 36                # dark disc, bottom left
    img[disc] = (20, 30, 90)
    return img


def drop_generation_config(d):
    p = os.path.join(d, "generation_config.json")
    if os.path.exists(p):
        os.remove(p)


def tower_output(vision_model, pixel_values):
    """last_hidden_state [G*G, d] of a SiglipVisionModel in float64."""
    with torch.no_grad():
        return vision_model(pixel_values=pixel_values.to(torch.float64)).last_hidden_state[0]


def make_siglip(out, img):
    model = SiglipVisionModel(SiglipVisionConfig(**VISION))
    randomise(model, 1234)
    d = os.path.join(out, "siglip")
    shutil.rmtree(d, ignore_errors=True)
    model.save_pretrained(d, safe_serialization=True)
    drop_generation_config(d)
    Image.fromarray(img, "RGB").save(os.path.join(d, "image.png"), optimize=True)
    back = np.asarray(Image.open(os.path.join(d, "image.png")).convert("RGB"))
    assert back.shape == (S, S, 3) and (back == img).all(), "image.png must read back exactly"

    # SigLIP preprocessing written out: [3, S, S], channels RGB, (x / 255 - 0.5) / 0.5.
    pix = (torch.from_numpy(back.astype(np.float64)).permute(2, 0, 1) / 255.0 - 0.5) / 0.5
    # Independent check against transformers' own processor (no resize: already S x S).
    proc = SiglipImageProcessor(do_resize=False)
    hf_pix = proc(images=Image.open(os.path.join(d, "image.png")), return_tensors="pt").pixel_values[0]
    assert hf_pix.shape == (3, S, S) and (hf_pix.double() - pix).abs().max() < 1e-6, "preprocessing differs"

    ref = SiglipVisionModel.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()
    hidden = tower_output(ref, pix[None])
    assert hidden.shape == (G * G, VISION["hidden_size"])
    max_abs = hidden.abs().max().item()
    save_file({"pixel_values": pix.to(torch.float32).contiguous(),
               "last_hidden_state": hidden.to(torch.float32).contiguous()},
              os.path.join(d, "reference.safetensors"),
              metadata={"computed_in": "float64, eager attention", "image": "image.png",
                        "max_abs": repr(max_abs)})
    print("siglip ->", d, sorted(os.listdir(d)), "max |last_hidden_state| =", max_abs)
    return model, pix, hidden


def make_siglip_full(out, tower, pix, hidden):
    text = SiglipTextConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                            num_attention_heads=2, max_position_embeddings=16, projection_size=VISION["hidden_size"],
                            pad_token_id=1, bos_token_id=2, eos_token_id=3)
    model = SiglipModel(SiglipConfig(text_config=text.to_dict(), vision_config=SiglipVisionConfig(**VISION).to_dict()))
    randomise(model, 4321)
    model.vision_model.load_state_dict(tower.state_dict())
    d = os.path.join(out, "siglip_full")
    shutil.rmtree(d, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    drop_generation_config(d)
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        names = list(f.keys())
    assert "vision_model.embeddings.patch_embedding.weight" in names and any(n.startswith("text_model.") for n in names)
    ref = SiglipModel.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()
    diff = (tower_output(ref.vision_model, pix[None]) - hidden).abs().max().item()
    assert diff < 1e-12, f"siglip_full's tower differs from siglip/'s: {diff}"
    print("siglip_full ->", d, sorted(os.listdir(d)), "same output as siglip/, max diff", diff)


def make_llava(out, tower, pix, hidden):
    vision = SiglipVisionConfig(**VISION, vision_use_head=False)
    text = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=1, max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                       tie_word_embeddings=False)
    cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_index=63, vision_feature_layer=-1,
                      vision_feature_select_strategy="full", projector_hidden_act="gelu",
                      image_seq_length=G * G)
    model = LlavaForConditionalGeneration(cfg)
    randomise(model, 8765)
    tower_sd = {k: v for k, v in tower.state_dict().items() if not k.startswith("head.")}
    model.model.vision_tower.load_state_dict(tower_sd)
    d = os.path.join(out, "llava")
    shutil.rmtree(d, ignore_errors=True)
    model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
    drop_generation_config(d)

    # Rename the tower to the Hub's spelling (see the docstring).
    path = os.path.join(d, "model.safetensors")
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    tensors = load_file(path)
    saved_as = sorted({k.split(".")[0] + "." + k.split(".")[1] for k in tensors if k.startswith("vision_tower.")})
    assert "vision_tower.embeddings" in saved_as, f"transformers saved the tower as {saved_as}"
    renamed = {("vision_tower.vision_model." + k[len("vision_tower."):] if k.startswith("vision_tower.") else k): v
               for k, v in tensors.items()}
    save_file(renamed, path, metadata=meta)

    ref = LlavaForConditionalGeneration.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()
    for k, v in ref.state_dict().items():   # every saved tensor is loaded back, none left random
        src = "vision_tower.vision_model." + k[len("model.vision_tower."):] if k.startswith("model.vision_tower.") else None
        if src is not None:
            assert torch.equal(v, renamed[src].to(torch.float64)), f"{k} did not load from {src}"
    diff = (tower_output(ref.model.vision_tower, pix[None]) - hidden).abs().max().item()
    assert diff < 1e-12, f"llava's tower differs from siglip/'s: {diff}"
    print("llava ->", d, sorted(os.listdir(d)), "tower saved by transformers as", saved_as,
          "-> renamed to vision_tower.vision_model.*; same output as siglip/, max diff", diff)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hf_tiny")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    tower, pix, hidden = make_siglip(out, test_image())
    make_siglip_full(out, tower, pix, hidden)
    make_llava(out, tower, pix, hidden)
    for d in ("siglip", "siglip_full", "llava"):
        cfg = json.load(open(os.path.join(out, d, "config.json")))
        print(d, "model_type", cfg["model_type"], "dtype", cfg.get("dtype", cfg.get("torch_dtype")))
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out) for f in fs)
    print("total bytes under", out, total)
    assert total < 1 << 20, "fixtures must stay under 1 MB"


if __name__ == "__main__":
    main()
