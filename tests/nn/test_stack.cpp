// TransformerStack (nn/stack.h) on its own, linking only nn/ (TP = 1 over a size-1 MPI
// communicator; f64 on CPU, so finite differences are exact to ~1e-9):
//  - Gradients: central finite differences (tests/core/gradcheck.h) of dL/d(input) and
//    of every parameter of a 2-block BIDIRECTIONAL stack, for a SigLIP-like block
//    (LayerNorm with bias, GELU-tanh MLP, biases on every linear, no RoPE, parameters
//    named by a SigLIP naming function) and a Llama-like one (RMSNorm, SwiGLU, RoPE,
//    grouped-query attention with one KV head, q/k/v bias), and for the causal SigLIP
//    block. Parameter gradients are checked to ACCUMULATE (they start from random
//    values that are subtracted after), the input gradient to overwrite dres.
//  - Recomputation none / selective / full: bitwise the same output and gradients, less
//    activation memory.
//  - Attention reach: with causal=false the output of token 0 changes when token 2 (same
//    sample) changes; with causal=true it does not; neither lets a sample see another.
#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <memory>

#include "nn/stack.h"
#include "parallel/groups.h"
#include "tests/core/gradcheck.h"
#include "tests/support/mpi.h"

namespace vlm::test {
namespace {

constexpr int kLayers = 2;
// Two samples of 3 and 4 tokens.
const std::vector<int32_t> kCu{0, 3, 7};
constexpr int64_t kT = 7;

const char* role_suffix_siglip(BlockParam r) {
  switch (r) {
    case BlockParam::Norm1Weight: return "layer_norm1.weight";
    case BlockParam::Norm1Bias: return "layer_norm1.bias";
    case BlockParam::QWeight: return "self_attn.q_proj.weight";
    case BlockParam::KWeight: return "self_attn.k_proj.weight";
    case BlockParam::VWeight: return "self_attn.v_proj.weight";
    case BlockParam::QBias: return "self_attn.q_proj.bias";
    case BlockParam::KBias: return "self_attn.k_proj.bias";
    case BlockParam::VBias: return "self_attn.v_proj.bias";
    case BlockParam::OWeight: return "self_attn.out_proj.weight";
    case BlockParam::OBias: return "self_attn.out_proj.bias";
    case BlockParam::Norm2Weight: return "layer_norm2.weight";
    case BlockParam::Norm2Bias: return "layer_norm2.bias";
    case BlockParam::GateWeight: return "mlp.gate.weight";  // SwiGLU only (not in SigLIP)
    case BlockParam::GateBias: return "mlp.gate.bias";
    case BlockParam::UpWeight: return "mlp.fc1.weight";
    case BlockParam::UpBias: return "mlp.fc1.bias";
    case BlockParam::DownWeight: return "mlp.fc2.weight";
    case BlockParam::DownBias: return "mlp.fc2.bias";
  }
  return "?";
}
std::string siglip_name(int layer, BlockParam r) {
  return "vision_model.encoder.layers." + std::to_string(layer) + "." + role_suffix_siglip(r);
}

BlockConfig siglip_like(bool causal) {
  BlockConfig c;
  c.C = 8;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  c.head_dim = 4;
  c.d_ff = 16;
  c.norm = NormKind::LayerNorm;
  c.norm_eps = 1e-6f;
  c.mlp = MlpKind::GeluTanh;
  c.qkv_bias = true;
  c.linear_bias = true;
  c.rope = false;
  c.causal = causal;
  return c;
}

BlockConfig llama_like() {
  BlockConfig c;
  c.C = 8;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 4;
  c.d_ff = 12;
  c.norm = NormKind::RMSNorm;
  c.norm_eps = 1e-5f;
  c.mlp = MlpKind::SwiGLU;
  c.qkv_bias = true;
  c.linear_bias = false;
  c.rope = true;
  c.rope_theta = 100.f;
  c.causal = false;
  return c;
}

// What an owner does: parameter table, binding, activation plan (+ its own dres), and a
// forward/backward on the packed batch kCu.
struct Rig {
  std::unique_ptr<Communicator> comm = self_comm();
  TransformerStack stack;
  ParamTable table;
  ActPlan plan;
  Tensor dres;  // [T,C]
  PackedSeqs seq;

  explicit Rig(const BlockConfig& c)
      : stack(c, kLayers, 1, siglip_name), table(stack.param_specs(0.02f), 1, 0, DType::F64) {
    table.allocate(cpu_backend());
    stack.bind(table);
    stack.plan(plan);
    plan.add(&dres, ActPlan::Rows::Ts, {c.C});
    plan.allocate(cpu_backend(), kT, kT, DType::F64);
    std::vector<int32_t> pos;
    for (size_t i = 0; i + 1 < kCu.size(); ++i)
      for (int32_t t = kCu[i]; t < kCu[i + 1]; ++t) pos.push_back(t - kCu[i]);
    seq.cu_seqlens = Tensor::from_vector(kCu, Shape{int64_t(kCu.size())});
    seq.max_seqlen = 4;
    seq.positions = Tensor::from_vector(pos, Shape{kT});
    // Parameters away from their init (non-trivial norms and biases).
    Rng rng(7);
    for (const Param& p : table.params()) {
      const bool norm_weight = p.spec.init == InitKind::Ones;
      Vec v = rng.vec(p.local.numel(), norm_weight ? 0.7 : -0.5, norm_weight ? 1.3 : 0.5);
      copy_tensor(p.value, host(v, p.local));
    }
  }

  // output = stack(x); a host copy.
  Tensor forward(const Tensor& x) {
    TpContext ctx{cpu_stream(), *comm, false};
    plan.cut(kT, kT);
    copy_tensor(stack.input(), x);
    stack.forward(ctx, seq);
    return to_host(stack.output());
  }
  // dL/dx for dL/d(output) = dy (after forward(x)); parameter grads +=.
  Tensor backward(const Tensor& dy) {
    TpContext ctx{cpu_stream(), *comm, false};
    copy_tensor(dres, dy);
    stack.backward(ctx, seq, dres);
    return to_host(dres);
  }
};

Tensor random_input(int64_t C, uint64_t seed) { return host(Rng(seed).vec(kT * C, -1.5, 1.5), Shape{kT, C}); }

void check_gradients(const BlockConfig& c, uint64_t seed) {
  Rig rig(c);
  GradProblem p;
  p.inputs.push_back(random_input(c.C, seed));
  for (const Param& q : rig.table.params()) p.inputs.push_back(q.value);  // perturbed in place
  p.forward = [&] { return std::vector<Tensor>{rig.forward(p.inputs[0])}; };
  p.backward = [&](const std::vector<Tensor>& d) {
    rig.forward(p.inputs[0]);
    // Parameter gradients start from random values R: what backward added is grad - R.
    Rng rng(seed + 1);
    std::vector<Vec> start;
    for (const Param& q : rig.table.params()) {
      start.push_back(rng.vec(q.local.numel()));
      copy_tensor(q.grad, host(start.back(), q.local));
    }
    std::vector<Tensor> g{rig.backward(d[0])};
    for (size_t i = 0; i < rig.table.params().size(); ++i) {
      const Param& q = rig.table.params()[i];
      Vec v = to_vector_f64(q.grad);
      for (size_t j = 0; j < v.size(); ++j) v[j] -= start[i][j];
      g.push_back(host(v, q.local));
    }
    return g;
  };
  gradcheck(p, seed + 2);
}

TEST(NnStack, ParametersAreNamedByTheOwner) {
  Rig rig(siglip_like(false));
  EXPECT_EQ(rig.table.params().size(), size_t(kLayers * 16));
  const Param& o = rig.table.get("vision_model.encoder.layers.1.self_attn.out_proj.weight");
  EXPECT_EQ(o.spec.full, (Shape{8, 8}));
  EXPECT_EQ(rig.table.get("vision_model.encoder.layers.0.mlp.fc1.weight").spec.full, (Shape{16, 8}));
  EXPECT_EQ(rig.table.get("vision_model.encoder.layers.0.mlp.fc2.weight").spec.full, (Shape{8, 16}));
  EXPECT_TRUE(rig.table.has("vision_model.encoder.layers.1.layer_norm2.bias"));
  EXPECT_FALSE(rig.table.has("vision_model.encoder.layers.0.mlp.gate.weight"));
}

TEST(NnStack, GradientsBidirectionalSiglipLike) { check_gradients(siglip_like(false), 11); }
TEST(NnStack, GradientsBidirectionalLlamaLike) { check_gradients(llama_like(), 21); }
TEST(NnStack, GradientsCausal) { check_gradients(siglip_like(true), 31); }

TEST(NnStack, RecomputeIsBitwiseTheSame) {
  for (BlockConfig c : {siglip_like(false), llama_like()}) {
    std::map<Recompute, std::vector<Vec>> results;
    std::map<Recompute, size_t> bytes;
    for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      c.recompute = rc;
      Rig rig(c);
      const Tensor x = random_input(c.C, 5);
      std::vector<Vec>& r = results[rc];
      r.push_back(to_vector_f64(rig.forward(x)));
      r.push_back(to_vector_f64(rig.backward(random_input(c.C, 6))));
      for (const Param& q : rig.table.params()) r.push_back(to_vector_f64(q.grad));
      bytes[rc] = rig.plan.bytes();
    }
    for (Recompute rc : {Recompute::Selective, Recompute::Full}) {
      EXPECT_TRUE(results[rc] == results[Recompute::None]) << recompute_name(rc);
      EXPECT_LT(bytes[rc], bytes[Recompute::None]) << recompute_name(rc);
    }
    EXPECT_LT(bytes[Recompute::Full], bytes[Recompute::Selective]);
  }
}

TEST(NnStack, BidirectionalSeesLaterTokensCausalDoesNot) {
  for (bool causal : {false, true}) {
    const BlockConfig c = siglip_like(causal);
    Rig rig(c);
    const Tensor x = random_input(c.C, 3);
    const Vec y0 = to_vector_f64(rig.forward(x));
    Vec xv = to_vector_f64(x);
    // Token 2, the last of sample 0 (not a constant shift: the norm would remove it).
    const Vec dx = Rng(4).vec(c.C, -0.5, 0.5);
    for (int64_t i = 0; i < c.C; ++i) xv[size_t(2 * c.C + i)] += dx[size_t(i)];
    const Vec y1 = to_vector_f64(rig.forward(host(xv, x.shape())));
    auto row_changed = [&](int64_t t) {
      double d = 0;
      for (int64_t i = 0; i < c.C; ++i) d = std::max(d, std::fabs(y1[size_t(t * c.C + i)] - y0[size_t(t * c.C + i)]));
      return d;
    };
    if (causal)
      EXPECT_EQ(row_changed(0), 0.0) << "causal: token 0 saw token 2";
    else
      EXPECT_GT(row_changed(0), 1e-3) << "bidirectional: token 0 did not see token 2";
    EXPECT_GT(row_changed(2), 1e-3);
    for (int64_t t = 3; t < kT; ++t) EXPECT_EQ(row_changed(t), 0.0) << "token " << t << " saw the other sample";
  }
}

}  // namespace
}  // namespace vlm::test
