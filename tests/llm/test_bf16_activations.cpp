// bf16 activations of the backbone (train.precision=bf16, docs/training.md, "Numerics")
// and the loss with the output head's chunking (llm/loss_parallel.h), at world size
// N = 1, 2 (TP group = world, SP off and on):
//  - the activation arena in bf16 is at most 55% of the fp32 arena for the same shapes
//    (activations 2 bytes, the statistics 4), its tensors bf16 and its statistics f32;
//  - a bf16 forward + backward stays within 2% of the fp32 loss and its gradients near
//    the fp32 ones (relative to their largest magnitude: 5e-2, bf16 has 8 bits);
//  - the output head and loss in chunks of rows (model.loss_chunk) give the one-chunk
//    loss, gradients and d(embeddings) (f32: the same per-row values, the head's weight
//    gradient summed chunk by chunk: 1e-5 of its largest magnitude), with fewer bytes;
//  - loss_chunk_rows: the formula of llm/loss_parallel.h.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/ops.h"
#include "llm_test_util.h"

using namespace vlm;
using namespace vlm::test;

namespace {

struct RunResult {
  float loss = 0;
  std::map<std::string, std::vector<float>> grads;
  std::vector<float> d_emb;
  size_t act_bytes = 0;
};

RunResult run(const ModelConfig& c, Communicator& comm, const HostBatch& b, Precision prec, bool embeddings) {
  Backend& cpu = cpu_backend();
  Stream& s = cpu.default_stream();
  const int64_t T = b.cu.back();
  Backbone bb(c, cpu, comm, T, true, prec);
  bb.init(42);
  bb.params().refresh_working(s);
  Tensor emb, d_emb;
  if (embeddings) {
    emb = Tensor::from_vector(b.embeddings, Shape{T, c.d_model});
    d_emb = Tensor::zeros(cpu, Shape{T, c.d_model});
  }
  const LmInput in = make_lm_input(cpu, b.cu, embeddings ? std::vector<int32_t>{} : b.ids, b.targets, emb);
  RunResult r;
  r.loss = bb.forward(s, in, true);
  bb.backward(s, in, d_emb);
  bb.finalize_grads(s);
  for (const Param& p : bb.params().params()) r.grads[p.spec.name] = to_vector_f32(p.grad);
  if (embeddings) r.d_emb = to_vector_f32(d_emb);
  r.act_bytes = bb.activation_bytes();
  return r;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

// Largest |a - b| over the largest |b|, that scale at least `floor`.
double scaled_err(const std::vector<float>& a, const std::vector<float>& b, double floor = 0) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) err = std::max(err, std::fabs(double(a[i]) - double(b[i])));
  const double scale = std::max(max_abs(b), floor);
  return scale > 0 ? err / scale : err;
}

// The scale floor of a gradient: 1e-1 of the model's largest gradient (its largest on
// this rank), and all of it for the k projection's bias, whose exact gradient is 0
// without RoPE (softmax is invariant to shifting every key by one vector) and small with
// it, summed over cancelling rows: its values are mostly rounding noise.
double grad_floor(const std::string& name, double largest) {
  return name.find("k_proj.bias") != std::string::npos ? largest : 0.1 * largest;
}

double largest_grad(const RunResult& r) {
  double m = 0;
  for (const auto& [name, g] : r.grads) m = std::max(m, max_abs(g));
  return m;
}

// A shape where the activations dominate the arena (the alignment of the small
// statistics buffers is noise): 256 tokens of width 64.
ModelConfig arena_config(ModelFamily f) {
  ModelConfig c = tiny_config(f);
  c.d_model = 64;
  c.d_ff = 128;
  c.max_pos = 256;
  return c;
}

TEST(Bf16Activations, ArenaIsAtMost55PercentOfFp32) {
  auto world = world_comm();
  Backend& cpu = cpu_backend();
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true})
      for (Recompute rc : {Recompute::None, Recompute::Full}) {
        ModelConfig c = arena_config(f);
        c.sequence_parallel = sp;
        c.recompute = rc;
        Backbone f32(c, cpu, *world, 256, true, Precision::FP32), b16(c, cpu, *world, 256, true, Precision::BF16);
        EXPECT_EQ(f32.activation_dtype(), DType::F32);
        EXPECT_EQ(b16.activation_dtype(), DType::BF16);
        const double ratio = double(b16.activation_bytes()) / double(f32.activation_bytes());
        EXPECT_LE(ratio, 0.55) << family_name(f) << (sp ? " sp " : " ") << recompute_name(rc) << ": "
                               << b16.activation_bytes() << " vs " << f32.activation_bytes() << " bytes";
        EXPECT_GE(ratio, 0.5) << "the statistics stay f32";
        if (world->rank() == 0)
          std::printf("%s%s %s: activation arena %zu B bf16 / %zu B fp32 = %.3f\n", family_name(f), sp ? " sp" : "",
                      recompute_name(rc), b16.activation_bytes(), f32.activation_bytes(), ratio);
      }
}

TEST(Bf16Activations, Bf16StepIsNearFp32) {
  auto world = world_comm();
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true})
      for (bool e : {false, true}) {
        ModelConfig c = tiny_config(f);
        c.sequence_parallel = sp;
        const HostBatch b = tiny_batch(c.vocab_size, c.d_model);
        const RunResult f32 = run(c, *world, b, Precision::FP32, e);
        const RunResult b16 = run(c, *world, b, Precision::BF16, e);
        SCOPED_TRACE(cat(family_name(f), sp ? " sp" : "", e ? " embeddings" : " ids"));
        EXPECT_NE(b16.loss, f32.loss) << "bf16 gave the fp32 loss bitwise";
        EXPECT_LE(std::fabs(double(b16.loss) - f32.loss), 0.02 * std::fabs(f32.loss)) << b16.loss << " vs " << f32.loss;
        for (const auto& [name, g] : f32.grads)
          EXPECT_LE(scaled_err(b16.grads.at(name), g, grad_floor(name, largest_grad(f32))), 5e-2) << name;
        if (e) {
          EXPECT_LE(scaled_err(b16.d_emb, f32.d_emb), 5e-2) << "d_embeddings";
        }
      }
}

TEST(Bf16Activations, ChunkedHeadAndLossMatchOneChunk) {
  auto world = world_comm();
  for (ModelFamily f : {ModelFamily::GPT2, ModelFamily::Llama})
    for (bool sp : {false, true})
      for (bool e : {false, true}) {
        ModelConfig c = tiny_config(f);
        c.sequence_parallel = sp;
        const HostBatch b = tiny_batch(c.vocab_size, c.d_model);
        const RunResult one = run(c, *world, b, Precision::FP32, e);
        for (int64_t chunk : {1, 5, 16}) {
          c.loss_chunk = chunk;
          const RunResult r = run(c, *world, b, Precision::FP32, e);
          SCOPED_TRACE(cat(family_name(f), sp ? " sp" : "", e ? " embeddings" : " ids", " chunk ", chunk));
          EXPECT_NEAR(r.loss, one.loss, 1e-6 * std::fabs(one.loss));
          for (const auto& [name, g] : one.grads)
            EXPECT_LE(scaled_err(r.grads.at(name), g, grad_floor(name, largest_grad(one))), 1e-5) << name;
          if (e) {
            EXPECT_LE(scaled_err(r.d_emb, one.d_emb), 1e-5) << "d_embeddings";
          }
          EXPECT_LT(r.act_bytes, one.act_bytes) << "a chunk of logits instead of all";
        }
      }
}

TEST(Bf16Activations, LossChunkRows) {
  EXPECT_EQ(loss_chunk_rows(5, 24, 100, 4), 5);
  EXPECT_EQ(loss_chunk_rows(50, 24, 100, 4), 24);  // capped at the micro-batch
  EXPECT_EQ(loss_chunk_rows(0, 24, 100, 4), 24);   // auto: small logits in one chunk
  // auto: 8192 rows of 128k bf16 logits = 2 GiB > 256 MiB: 1024 rows (256 MiB / 256 KiB).
  EXPECT_EQ(loss_chunk_rows(0, 8192, 131072, 2), 1024);
  // at least 128 rows whatever the vocabulary
  EXPECT_EQ(loss_chunk_rows(0, 8192, int64_t(1) << 26, 4), 128);
  // rounded down to a multiple of 128: 256 MiB / (50000 * 4 B) = 1342 rows -> 1280
  EXPECT_EQ(loss_chunk_rows(0, 4096, 50000, 4), 1280);
}

}  // namespace
