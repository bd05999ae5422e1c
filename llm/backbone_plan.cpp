// Backbone: parameter binding and the activation arena plan (names and aliasing by
// recompute mode); the step itself is in backbone.cpp.
//
// Arena entries are planned at max_tokens rows and cut to the current T at run time.
//   h.{l}            [Ts,C]   residual stream, l = 0..L (always per layer)
//   {P}.ln1 ...      saved block activations, P = "L{l}" (none/selective) or "rc" (full)
//   {Q}.att, {Q}.lse attention core, Q = "L{l}" (none) or "rc" (selective/full)
//   out.*            final norm, logits, loss statistics
//   sc.*             scratch shared by all blocks
// Without SP the full-width inputs of the TP regions alias the norm outputs.
#include "llm/backbone.h"

#include <algorithm>

#include "core/ops.h"
#include "llm/param_specs.h"

namespace vlm {

namespace {
Linear linear(const ParamTable& t, const std::string& w, const std::string& b) {
  Linear l;
  l.w = t.get(w).value;
  l.dw = t.get(w).grad;
  if (t.has(b)) {
    l.b = t.get(b).value;
    l.db = t.get(b).grad;
  }
  return l;
}
Norm norm(const ParamTable& t, const std::string& prefix, const ModelConfig& c) {
  Norm n;
  n.rms = c.is_llama();
  n.eps = c.norm_eps;
  n.w = t.get(prefix + ".weight").value;
  n.dw = t.get(prefix + ".weight").grad;
  if (!n.rms) {
    n.b = t.get(prefix + ".bias").value;
    n.db = t.get(prefix + ".bias").grad;
  }
  return n;
}
// Rows [r0, r1) of a linear's weight (and bias): the KV head a rank uses when replicated.
Linear rows_of(const Linear& l, int64_t r0, int64_t r1) {
  Linear o;
  o.w = l.w.slice(r0, r1);
  o.dw = l.dw.slice(r0, r1);
  if (l.b.defined()) {
    o.b = l.b.slice(r0, r1);
    o.db = l.db.slice(r0, r1);
  }
  return o;
}
}  // namespace

void Backbone::bind_params() {
  const ParamTable& t = *params_;
  const int tp = tp_.size(), r = tp_.rank();
  const int64_t HS = cfg_.head_dim(), NH = cfg_.n_heads, NKV = cfg_.kv_heads();
  const int64_t NHl = NH / tp;
  const bool kv_rep = cfg_.kv_replicated(tp);
  const int64_t Vl = cfg_.padded_vocab(tp) / tp;
  emb_.table = t.get("model.embed_tokens.weight").value;
  emb_.dtable = t.get("model.embed_tokens.weight").grad;
  emb_.vocab_offset = int64_t(r) * Vl;
  if (!cfg_.is_llama()) {
    wpe_ = t.get("model.embed_positions.weight").value;
    dwpe_ = t.get("model.embed_positions.weight").grad;
  }
  blocks_.assign(size_t(cfg_.n_layers), Block{});
  for (int i = 0; i < cfg_.n_layers; ++i) {
    auto n = [&](const char* s) { return layer_param_name(i, s); };
    Block& b = blocks_[size_t(i)];
    b.ln1 = norm(t, n("input_layernorm"), cfg_);
    b.ln2 = norm(t, n("post_attention_layernorm"), cfg_);
    Attention& a = b.attn;
    a.q = linear(t, n("self_attn.q_proj.weight"), n("self_attn.q_proj.bias"));
    a.k = linear(t, n("self_attn.k_proj.weight"), n("self_attn.k_proj.bias"));
    a.v = linear(t, n("self_attn.v_proj.weight"), n("self_attn.v_proj.bias"));
    a.o = linear(t, n("self_attn.o_proj.weight"), n("self_attn.o_proj.bias"));
    a.hs = HS;
    a.nh_local = NHl;
    a.nkv_local = kv_rep ? 1 : NKV / tp;
    if (kv_rep) {  // rank r's query heads all map onto KV head j
      const int64_t j = int64_t(r) * NHl / (NH / NKV);
      a.k = rows_of(a.k, j * HS, (j + 1) * HS);
      a.v = rows_of(a.v, j * HS, (j + 1) * HS);
    }
    a.rope = cfg_.is_llama();
    a.rope_theta = cfg_.rope_theta;
    b.mlp.swiglu = cfg_.is_llama();
    if (b.mlp.swiglu) b.mlp.gate = linear(t, n("mlp.gate_proj.weight"), n("mlp.gate_proj.bias"));
    b.mlp.up = linear(t, n("mlp.up_proj.weight"), n("mlp.up_proj.bias"));
    b.mlp.down = linear(t, n("mlp.down_proj.weight"), n("mlp.down_proj.bias"));
  }
  lnf_ = norm(t, "model.norm", cfg_);
  const std::string head = cfg_.tied_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
  out_.head = linear(t, head, "");
  out_.vocab_offset = int64_t(r) * Vl;
  out_.valid_local = std::clamp<int64_t>(cfg_.vocab_size - out_.vocab_offset, 0, Vl);
}

void Backbone::plan_activations() {
  const int tp = tp_.size();
  const int64_t T = max_tokens_, Ts = stream_rows(T), C = cfg_.d_model, HS = cfg_.head_dim();
  const int64_t NHl = cfg_.n_heads / tp, NKVl = cfg_.kv_replicated(tp) ? 1 : cfg_.kv_heads() / tp;
  const int64_t Fl = cfg_.d_ff / tp, Vl = cfg_.padded_vocab(tp) / tp;
  Arena& a = acts_;
  auto add = [&](const std::string& name, Shape s) {
    if (!a.has(name)) a.add(name, s);
  };
  for (int l = 0; l <= cfg_.n_layers; ++l) add(cat("h.", l), Shape{Ts, C});
  for (int l = 0; l < cfg_.n_layers; ++l) {
    const std::string L = cat("L", l);
    const std::string P = cfg_.recompute == Recompute::Full ? "rc" : L;
    const std::string Q = cfg_.recompute == Recompute::None ? L : "rc";
    for (const char* ln : {".ln1", ".ln2"}) {
      add(P + ln, Shape{Ts, C});
      add(P + ln + "_mean", Shape{Ts});
      add(P + ln + "_rstd", Shape{Ts});
      if (sp_) add(P + ln + "_full", Shape{T, C});
    }
    add(P + ".q", Shape{T, NHl, HS});
    add(P + ".k", Shape{T, NKVl, HS});
    add(P + ".v", Shape{T, NKVl, HS});
    add(P + ".h_mid", Shape{Ts, C});
    add(P + ".h1", Shape{T, Fl});
    if (cfg_.is_llama()) add(P + ".h2", Shape{T, Fl});
    add(P + ".act", Shape{T, Fl});
    add(Q + ".att", Shape{T, NHl, HS});
    add(Q + ".lse", Shape{T, NHl});
  }
  add("out.ln", Shape{Ts, C});
  add("out.ln_mean", Shape{Ts});
  add("out.ln_rstd", Shape{Ts});
  if (sp_) add("out.ln_full", Shape{T, C});
  add("out.logits", Shape{T, Vl});
  add("out.dlogits", Shape{T, Vl});
  if (out_.valid_local < Vl) add("out.pad_fill", Shape{T, Vl - out_.valid_local});
  add("out.rowmax", Shape{T});
  add("out.stats", Shape{2 * T});
  add("out.losses", Shape{T});
  add("out.dlosses", Shape{T});
  add("sc.partial", Shape{T, C});
  add("sc.dfull_b", Shape{T, C});
  if (sp_) {
    add("sc.y", Shape{Ts, C});
    add("sc.dfull_a", Shape{T, C});
    add("sc.dnorm", Shape{Ts, C});
  }
  add("sc.dtmp", Shape{Ts, C});
  add("sc.dres", Shape{Ts, C});
  add("sc.dq", Shape{T, NHl, HS});
  add("sc.datt", Shape{T, NHl, HS});
  add("sc.dk", Shape{T, NKVl, HS});
  add("sc.dv", Shape{T, NKVl, HS});
  add("sc.dh1", Shape{T, Fl});
  add("sc.dh2", Shape{T, Fl});
  add("sc.dact", Shape{T, Fl});
  a.allocate(backend_, true);
  // The logits of padding columns are the constant -1e30: fill its source once here.
  if (a.has("out.pad_fill")) fill(backend_.default_stream(), a.get("out.pad_fill"), -1e30f);
}

Tensor Backbone::act(const std::string& name, int64_t rows) const { return acts_.get(name).slice(0, rows); }

BlockActs Backbone::block_acts(int l, int64_t T, int64_t Ts) const {
  const std::string L = cat("L", l);
  const std::string P = cfg_.recompute == Recompute::Full ? "rc" : L;
  const std::string Q = cfg_.recompute == Recompute::None ? L : "rc";
  BlockActs b;
  b.h_in = act(cat("h.", l), Ts);
  b.h_out = act(cat("h.", l + 1), Ts);
  b.ln1 = act(P + ".ln1", Ts);
  b.ln1_mean = act(P + ".ln1_mean", Ts);
  b.ln1_rstd = act(P + ".ln1_rstd", Ts);
  b.attn.x_full = sp_ ? act(P + ".ln1_full", T) : b.ln1;
  b.attn.q = act(P + ".q", T);
  b.attn.k = act(P + ".k", T);
  b.attn.v = act(P + ".v", T);
  b.attn.att = act(Q + ".att", T);
  b.attn.lse = act(Q + ".lse", T);
  b.h_mid = act(P + ".h_mid", Ts);
  b.ln2 = act(P + ".ln2", Ts);
  b.ln2_mean = act(P + ".ln2_mean", Ts);
  b.ln2_rstd = act(P + ".ln2_rstd", Ts);
  b.mlp.x_full = sp_ ? act(P + ".ln2_full", T) : b.ln2;
  b.mlp.h1 = act(P + ".h1", T);
  if (cfg_.is_llama()) b.mlp.h2 = act(P + ".h2", T);
  b.mlp.act = act(P + ".act", T);
  return b;
}

Scratch Backbone::scratch(int64_t T, int64_t Ts) const {
  Scratch s;
  s.partial = act("sc.partial", T);
  s.dfull_b = act("sc.dfull_b", T);
  s.y = sp_ ? act("sc.y", Ts) : s.partial;
  s.dfull_a = sp_ ? act("sc.dfull_a", T) : Tensor{};
  s.dnorm = sp_ ? act("sc.dnorm", Ts) : s.dfull_b;
  s.dtmp = act("sc.dtmp", Ts);
  s.dq = act("sc.dq", T);
  s.datt = act("sc.datt", T);
  s.dk = act("sc.dk", T);
  s.dv = act("sc.dv", T);
  s.dh1 = act("sc.dh1", T);
  s.dh2 = act("sc.dh2", T);
  s.dact = act("sc.dact", T);
  return s;
}

}  // namespace vlm
