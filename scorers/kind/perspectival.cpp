// The perspectival scorer (what stands out): the propositional MLP
// (scorers/kind/propositional.h) on the centre-surround of the features,
//   X = F - mean_{k x k}(F)
// (the neighbourhood of a cell is the k x k window around it clipped to the grid, mean
// over the cells inside), plus the texture. The clipped box mean is separable,
// M = M_y (x) M_x with the 1-D clipped box mean [G, G] along each axis: two batched
// matmuls by the same fixed [G, G] matrix (built at bind on the parameters' device).
// Parameters "scorers.perspectival.<w>": those of the propositional MLP.
#include <algorithm>

#include "scorers/kind/gemm.h"
#include "scorers/kind/propositional.h"

namespace vlm {

namespace {

// The clipped 1-D box mean along one grid axis: M[i, j] = 1/|W(i)| for |i - j| <= k/2
// inside the grid (the 2-D clipped k x k mean is M_y (x) M_x, separable).
Tensor box_matrix(int G, int k, DType dt, DeviceKind dev) {
  const int h = k / 2;
  std::vector<double> m(size_t(G) * size_t(G), 0.0);
  for (int i = 0; i < G; ++i) {
    const int j0 = std::max(0, i - h), j1 = std::min(G - 1, i + h);
    for (int j = j0; j <= j1; ++j) m[size_t(i * G + j)] = 1.0 / double(j1 - j0 + 1);
  }
  return upload_values(backend_for(dev), m, Shape{G, G}, dt);
}

class Perspectival final : public Propositional {
 public:
  Perspectival(const ScorerDims& dims, Communicator* pair) : Propositional(dims, pair, ScorerKind::Perspectival) {}
  void bind(const ParamTable& t) override {
    Propositional::bind(t);
    box_ = box_matrix(dims_.G, dims_.k, t.dtype(), w1f_.device());
  }

 private:
  // X = F - (M_y (x) M_x) F: the box mean along x (rows of one grid row), then along y.
  Tensor input(Stream& st, const Tensor& F) override {
    const int64_t B = F.size(0), N = dims_.cells(), d = dims_.d, G = dims_.G;
    const Tensor& X = scratch(x_, F.device(), Shape{B, N, d}, F.dtype());
    scratch(tmp_, F.device(), Shape{B, N, d}, F.dtype());
    matmul(st, tmp_.view(Shape{B * G, G, d}), box_, F.view(Shape{B * G, G, d}), scorer_gemm(false, false));
    matmul(st, X.view(Shape{B, G, G * d}), box_, tmp_.view(Shape{B, G, G * d}), scorer_gemm(false, false));
    scale(st, X, -1.f);
    accumulate(st, X, F, 1.f);
    return X;
  }
  // dF += dX - (M_y^T (x) M_x^T) dX
  void input_backward(Stream& st, const Tensor& dF, const Linear& l1, const Tensor& X2) override {
    const int64_t B = dF.size(0), G = dims_.G, d = dims_.d;
    const Tensor& dx = input_grad(st, l1, X2);
    accumulate(st, dF, dx, 1.f);
    matmul(st, tmp_.view(Shape{B, G, G * d}), box_, dx.view(Shape{B, G, G * d}), scorer_gemm(true, false));
    matmul(st, dx.view(Shape{B * G, G, d}), box_, tmp_.view(Shape{B * G, G, d}), scorer_gemm(true, false));
    accumulate(st, dF, dx, -1.f);
  }

  Tensor box_;              // 1-D clipped box mean [G, G]
  ScratchTensor x_, tmp_;   // X and the box mean's intermediate
};

}  // namespace

std::unique_ptr<Scorer> make_perspectival_scorer(const ScorerDims& dims, Communicator* pair) {
  return std::make_unique<Perspectival>(dims, pair);
}

}  // namespace vlm
