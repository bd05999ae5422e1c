// The LOD tokens' forward and backward (scorers/lod_tokens.h): host-built pooling and
// region-mean matrices, matmuls, the embedding op, the gate.
#include "scorers/lod_tokens.h"

#include <cstring>

#include "core/ops.h"
#include "scorers/scratch.h"

namespace vlm {
namespace {

GemmOpts opts(bool ta, float beta) {
  GemmOpts o;
  o.trans_a = ta, o.beta = beta;
  return o;
}

// h[i] = v (h f32 or f64, on the host).
void set(const Tensor& h, int64_t i, double v) {
  if (h.dtype() == DType::F64)
    h.ptr<double>()[i] = v;
  else
    h.ptr<float>()[i] = float(v);
}

Tensor host_i32(std::vector<int32_t>& v) { return Tensor(v.data(), Shape{int64_t(v.size())}, DType::I32, DeviceKind::CPU); }

}  // namespace

std::vector<ParamSpec> lod_param_specs(const ScorerDims& d, int levels) {
  const int64_t P = 2 * int64_t(d.G) - 1;
  std::vector<ParamSpec> v = {param_spec("scorers.lod.level", Shape{levels, d.d}, -1, InitKind::Normal, 0.02f),
                              param_spec("scorers.lod.pos_y", Shape{P, d.d}, -1, InitKind::Normal, 0.02f),
                              param_spec("scorers.lod.pos_x", Shape{P, d.d}, -1, InitKind::Normal, 0.02f)};
  for (ParamSpec& p : v) p.no_decay = true;  // embeddings of levels and positions
  return v;
}

void LodTokens::bind(const ParamTable& t) {
  auto get = [&](const char* n, Tensor& v, Tensor& g) {
    const Param& p = t.get(cat("scorers.lod.", n));
    v = p.value, g = p.grad;
  };
  get("level", level_, dlevel_);
  get("pos_y", pos_y_, dpos_y_);
  get("pos_x", pos_x_, dpos_x_);
  ones_ = upload_values(backend_for(level_.device()), std::vector<double>(size_t(dims_.d), 1.0), Shape{dims_.d, 1},
                        t.dtype());
}

void LodTokens::reserve(int64_t max_tokens) {
  VLM_ASSERT(level_.defined(), "LodTokens::reserve before bind");
  const DeviceKind dev = level_.device();
  const size_t e = dtype_size(level_.dtype()), T = size_t(max_tokens), N = size_t(dims_.cells()), d = size_t(dims_.d);
  for (ScratchTensor* s : {&pool_, &region_mean_}) s->reserve(dev, T * N * e);
  for (ScratchTensor* s : {&host_pool_, &host_mean_}) s->reserve(DeviceKind::CPU, T * N * e);
  if (gate_ != LodGate::Token) detail_.reserve(dev, T * N * e), host_detail_.reserve(DeviceKind::CPU, T * N * e);
  for (ScratchTensor* s : {&ids_level_, &ids_y_, &ids_x_}) s->reserve(dev, T * 4);
  for (ScratchTensor* s : {&saved_, &tmp_}) s->reserve(dev, T * d * e);
  rowdot_.reserve(dev, T * e);
  for (auto* v : {&il_, &iy_, &ix_}) v->reserve(T);
}

int64_t LodTokens::total_tokens(const std::vector<ImageLod>& lods) {
  int64_t n = 0;
  for (const ImageLod& l : lods) n += int64_t(l.tokens.size());
  return n;
}

void LodTokens::forward(Stream& st, const Tensor& tokens, std::vector<int64_t>& cu, const std::vector<ImageLod>& lods,
                        const Tensor& F) {
  const int64_t B = int64_t(lods.size()), N = dims_.cells(), d = dims_.d, T = total_tokens(lods), G = dims_.G;
  const DType dt = F.dtype();
  const DeviceKind dev = F.device();
  require_shape(F, Shape{B, N, d}, "LOD features F");
  require_shape(tokens, Shape{T, d}, "LOD tokens");
  const Tensor& P = scratch(host_pool_, DeviceKind::CPU, Shape{T, N}, dt);
  const Tensor& Q = scratch(host_mean_, DeviceKind::CPU, Shape{T, N}, dt);
  std::memset(P.data(), 0, P.nbytes());
  std::memset(Q.data(), 0, Q.nbytes());
  const bool detail = gate_ != LodGate::Token;
  const Tensor D = detail ? scratch(host_detail_, DeviceKind::CPU, Shape{T, N}, dt) : Tensor();
  if (detail) std::memset(D.data(), 0, D.nbytes());
  il_.resize(size_t(T)), iy_.resize(size_t(T)), ix_.resize(size_t(T));
  cu.assign(1, 0);
  int64_t t = 0;
  const int RG = int(G) / R_;
  for (const ImageLod& lod : lods) {
    VLM_ASSERT(lod.mix.empty() || gate_ == LodGate::Soft, "LodTokens: a soft allocation needs lod.gate=soft");
    if (!lod.mix.empty()) {
      soft_rows(lod, P, Q, D, t);
      t += int64_t(lod.tokens.size());
      cu.push_back(t);
      continue;
    }
    const bool gated = gate_full_detail_ || int64_t(lod.tokens.size()) < N;  // lod.gate_full_detail
    for (const LodToken& k : lod.tokens) {
      const double wp = 1.0 / double(k.side * k.side), wq = 1.0 / double(R_ * R_);
      for (int y = k.y0; y < k.y0 + k.side; ++y)
        for (int x = k.x0; x < k.x0 + k.side; ++x) set(P, t * N + y * G + x, wp);
      if (detail && k.level > 0) {  // D = P - the parent square's mean (squares are aligned: side | R)
        const int ps = 2 * k.side, py = (k.y0 / ps) * ps, px = (k.x0 / ps) * ps;
        const double wc = 1.0 / double(ps * ps);
        for (int y = py; y < py + ps; ++y)
          for (int x = px; x < px + ps; ++x) {
            const bool own = y >= k.y0 && y < k.y0 + k.side && x >= k.x0 && x < k.x0 + k.side;
            set(D, t * N + y * G + x, (own ? wp : 0.0) - wc);
          }
      }
      const int ry = (k.region / RG) * R_, rx = (k.region % RG) * R_;
      if (detail && gated)  // relative to the image's mean relevance: Q - 1/N (every row of Q sums to 1)
        for (int64_t c = 0; c < N; ++c) set(Q, t * N + c, -1.0 / double(N));
      for (int y = ry; y < ry + R_ && gated; ++y)
        for (int x = rx; x < rx + R_; ++x) set(Q, t * N + y * G + x, wq - (detail ? 1.0 / double(N) : 0.0));
      il_[size_t(t)] = k.level, iy_[size_t(t)] = 2 * k.y0 + k.side - 1, ix_[size_t(t)] = 2 * k.x0 + k.side - 1;
      ++t;
    }
    cu.push_back(t);
  }
  cu_ = cu;
  copy_from_host(st, scratch(pool_, dev, Shape{T, N}, dt), P);
  copy_from_host(st, scratch(region_mean_, dev, Shape{T, N}, dt), Q);
  if (detail) copy_from_host(st, scratch(detail_, dev, Shape{T, N}, dt), D);
  copy_from_host(st, scratch(ids_level_, dev, Shape{T}, DType::I32), host_i32(il_));
  copy_from_host(st, scratch(ids_y_, dev, Shape{T}, DType::I32), host_i32(iy_));
  copy_from_host(st, scratch(ids_x_, dev, Shape{T}, DType::I32), host_i32(ix_));
  scratch(saved_, dev, Shape{T, d}, dt);
  scratch(tmp_, dev, Shape{T, d}, dt);
  for (int64_t b = 0; b < B; ++b) {
    if (cu[size_t(b + 1)] == cu[size_t(b)]) continue;
    matmul(st, tokens.slice(cu[size_t(b)], cu[size_t(b + 1)]), pool_.slice(cu[size_t(b)], cu[size_t(b + 1)]),
           F.slice(b, b + 1).view(Shape{N, d}), opts(false, 0.f));
  }
  embedding_forward(st, tmp_, ids_level_, level_, 0);
  add(st, tokens, tokens, tmp_);
  embedding_forward(st, tmp_, ids_y_, pos_y_, 0);
  add(st, tokens, tokens, tmp_);
  embedding_forward(st, tmp_, ids_x_, pos_x_, 0);
  add(st, tokens, tokens, tmp_);
  // The gate multiplies by exactly 1; what it scales is kept for its backward.
  if (!detail) {
    copy(st, saved_, tokens);
    return;
  }
  for (int64_t b = 0; b < B; ++b) {
    if (cu[size_t(b + 1)] == cu[size_t(b)]) continue;
    matmul(st, saved_.slice(cu[size_t(b)], cu[size_t(b + 1)]), detail_.slice(cu[size_t(b)], cu[size_t(b + 1)]),
           F.slice(b, b + 1).view(Shape{N, d}), opts(false, 0.f));
  }
}

void LodTokens::soft_rows(const ImageLod& lod, const Tensor& P, const Tensor& Q, const Tensor& D, int64_t t) {
  const int64_t N = dims_.cells(), G = dims_.G;
  const int RG = int(G) / R_;
  const double wq = 1.0 / double(R_ * R_);
  for (const LodToken& k : lod.tokens) {
    const size_t j = size_t(k.region);
    const double m = lod.mix[j], wp = 1.0 / double(k.side * k.side);
    const int ry = (k.region / RG) * R_, rx = (k.region % RG) * R_;
    for (int y = ry; y < ry + R_; ++y)
      for (int x = rx; x < rx + R_; ++x) {
        const bool own = y >= k.y0 && y < k.y0 + k.side && x >= k.x0 && x < k.x0 + k.side;
        if (k.level == 0) {
          set(P, t * N + y * G + x, wq);
          continue;
        }
        set(P, t * N + y * G + x, (own ? m * wp : 0.0) + (1.0 - m) * wq);  // level 0 + m (fine - level 0)
        set(D, t * N + y * G + x, (own ? wp : 0.0) - wq);
      }
    // the surrogate's d (k share_j) / d r[c] = k / (tau R^2) share_j ([c in j] - share_region(c))
    if (k.level > 0)
      for (int64_t c = 0; c < N; ++c) {
        const size_t i = size_t((c / G / R_) * RG + (c % G) / R_);
        set(Q, t * N + c, lod.k / lod.tau * wq * lod.share[j] * ((i == j ? 1.0 : 0.0) - lod.share[i]));
      }
    il_[size_t(t)] = k.level, iy_[size_t(t)] = 2 * k.y0 + k.side - 1, ix_[size_t(t)] = 2 * k.x0 + k.side - 1;
    ++t;
  }
}

void LodTokens::backward(Stream& st, const Tensor& dF, const Tensor& dr, const Tensor& dtokens) {
  const int64_t B = int64_t(cu_.size()) - 1, N = dims_.cells(), d = dims_.d, T = cu_.back();
  require_shape(dtokens, Shape{T, d}, "LOD dtokens");
  require_shape(dF, Shape{B, N, d}, "LOD dF");
  require_shape(dr, Shape{B, N}, "LOD dr");
  scratch(rowdot_, dtokens.device(), Shape{T, 1}, dtokens.dtype());
  // gate: d r_reg(t) = <dtoken_t, saved_t> (the token, or its detail), spread over the region's cells by Q^T
  mul(st, tmp_, dtokens, saved_);
  matmul(st, rowdot_, tmp_, ones_, opts(false, 0.f));
  if (dlevel_.defined()) {  // undefined: frozen (nn/param_table.h)
    embedding_backward(st, dlevel_, dtokens, ids_level_, 0);
    embedding_backward(st, dpos_y_, dtokens, ids_y_, 0);
    embedding_backward(st, dpos_x_, dtokens, ids_x_, 0);
  }
  for (int64_t b = 0; b < B; ++b) {
    const int64_t t0 = cu_[size_t(b)], t1 = cu_[size_t(b + 1)];
    if (t1 == t0) continue;
    matmul(st, dr.slice(b, b + 1).view(Shape{N, 1}), region_mean_.slice(t0, t1), rowdot_.slice(t0, t1), opts(true, 1.f));
    matmul(st, dF.slice(b, b + 1).view(Shape{N, d}), pool_.slice(t0, t1), dtokens.slice(t0, t1), opts(true, 1.f));
  }
}

}  // namespace vlm
