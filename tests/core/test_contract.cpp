// The op contracts (core/ops/contract.h): a broken call is caught before any backend
// runs, by core/ops/ (the message ends "at .../core/ops/<file>.cpp:<line>", never in
// core/cpu/ or core/cuda/), and reads the same on the CPU and on the CUDA path, up to the
// device's name. The CUDA path runs in every build, with or without a GPU: a stream that
// says it is a CUDA stream and tensors that say they live on the GPU (views of host
// memory that nothing reads) reach the contract, which aborts before any backend would
// touch them. Also: the dtypes each backend takes (Kernels) give the device-specific
// message, and a dtype the CPU takes (f64) runs there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numbers>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/ops.h"
#include "core/tensor.h"

namespace vlm {
namespace {

// A stream on "CUDA" that runs nothing (see the file comment).
class FakeCudaStream : public Stream {
 public:
  DeviceKind device() const override { return DeviceKind::CUDA; }
  const std::string& name() const override { return name_; }
  void synchronize() override {}
  void record(Event&) override {}
  void wait(Event&) override {}

 private:
  std::string name_ = "fake cuda";
};

// Makes the tensors of a call on one device: CPU tensors from the CPU backend, "CUDA"
// tensors as views of their own host memory.
struct Device {
  DeviceKind kind;
  Stream& stream;

  Tensor make(Shape s, DType dt = DType::F32) const {
    if (kind == DeviceKind::CPU) return Tensor::zeros(cpu_backend(), s, dt);
    std::shared_ptr<void> mem(std::calloc(size_t(std::max<int64_t>(s.numel(), 1)) * dtype_size(dt), 1), std::free);
    return Tensor(mem.get(), s, dt, DeviceKind::CUDA, mem);
  }
  std::string name() const { return std::string(device_name(kind)); }
  std::string other() const { return kind == DeviceKind::CPU ? "cuda" : "cpu"; }
};

// The message with {dev} (and {other}) replaced, escaped for a death-test regex, then the
// location, which must lie in core/ops/.
std::string expected(std::string msg, const Device& d) {
  for (const auto& [key, value] : {std::pair<std::string, std::string>{"{dev}", d.name()}, {"{other}", d.other()}})
    for (size_t at = msg.find(key); at != std::string::npos; at = msg.find(key)) msg.replace(at, key.size(), value);
  std::string re;
  for (char c : msg) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) re += '\\';
    re += c;
  }
  return "\\(" + re + "\\) at [^ ]*core/ops/[a-z_]+\\.cpp:[0-9]+";
}

struct BrokenCall {
  const char* what;
  std::function<void(const Device&)> call;
  std::string message;  // {dev}: the stream's device, {other}: the other one
};

const BrokenCall kBroken[] = {
    {"shapes of an elementwise op",
     [](const Device& d) { add(d.stream, d.make(Shape{3}), d.make(Shape{3}), d.make(Shape{4})); },
     "add: b is f32[4] on {dev}, expected f32[3] on {dev}"},
    {"inner dimensions of a GEMM",
     [](const Device& d) { matmul(d.stream, d.make(Shape{2, 5}), d.make(Shape{2, 3}), d.make(Shape{4, 5}), {}); },
     "matmul: inner dims differ: A f32[2,3] on {dev} B f32[4,5] on {dev} trans 00"},
    {"a scalar range",
     [](const Device& d) { rope_forward(d.stream, d.make(Shape{2, 1, 4}), d.make(Shape{2, 1, 4}),
                                        d.make(Shape{2}, DType::I32), 0.f); },
     "rope_forward: theta must be > 0, got 0"},
    {"a length beyond the tokens",
     [](const Device& d) {
       attention_forward(d.stream, d.make(Shape{4, 2, 8}), d.make(Shape{4, 2}), d.make(Shape{4, 2, 8}),
                         d.make(Shape{4, 1, 8}), d.make(Shape{4, 1, 8}), d.make(Shape{2}, DType::I32), 9, true);
     },
     "attention_forward: max_seqlen 9 for T=4"},
    {"a statistic's size",
     [](const Device& d) {
       layernorm_forward(d.stream, d.make(Shape{2, 5}), d.make(Shape{2}), d.make(Shape{3}), d.make(Shape{2, 5}),
                         d.make(Shape{5}), Tensor(), 1e-5f);
     },
     "layernorm_forward: rstd is f32[3] on {dev}, expected 2 elements"},
    {"a column range",
     [](const Device& d) { slice_cols(d.stream, d.make(Shape{2, 3}), d.make(Shape{2, 6}), 5); },
     "slice_cols: columns [5, +3) of f32[2,6] on {dev} as f32[2,3] on {dev}"},
    {"a partial overlap",
     [](const Device& d) {
       const Tensor buf = d.make(Shape{8});
       copy(d.stream, buf.sub(1, Shape{4}), buf.sub(0, Shape{4}));
     },
     "copy: dst f32[4] on {dev} and src f32[4] on {dev} overlap"},
    {"an output partly over an input",
     [](const Device& d) {
       const Tensor buf = d.make(Shape{8});
       add(d.stream, buf.sub(2, Shape{4}), buf.sub(0, Shape{4}), d.make(Shape{4}));
     },
     "add: out f32[4] on {dev} and a f32[4] on {dev} overlap"},
    {"an output's shape",
     [](const Device& d) {
       conv2d_forward(d.stream, d.make(Shape{1, 2, 3, 3}), d.make(Shape{1, 1, 3, 3}), d.make(Shape{2, 1, 2, 2}),
                      Tensor(), 1, 0);
     },
     "conv2d_forward: out is f32[1,2,3,3] on {dev}, expected f32[1,2,2,2]"},
    {"an undefined tensor",
     [](const Device& d) { sum_squares(d.stream, Tensor(), d.make(Shape{3})); }, "sum_squares: out is undefined"},
    {"a tensor on the other device",
     [](const Device& d) {
       const Device other{d.kind == DeviceKind::CPU ? DeviceKind::CUDA : DeviceKind::CPU, d.stream};
       gelu_forward(d.stream, d.make(Shape{3}), other.make(Shape{3}));
     },
     "gelu_forward: in is f32[3] on {other}, expected a {dev} tensor"},
};

class ContractDeathTest : public ::testing::TestWithParam<size_t> {};

TEST_P(ContractDeathTest, SameMessageOnCpuAndCudaBeforeAnyBackend) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const BrokenCall& c = kBroken[GetParam()];
  FakeCudaStream fake;
  for (const Device& d : {Device{DeviceKind::CPU, cpu_backend().default_stream()}, Device{DeviceKind::CUDA, fake}})
    EXPECT_DEATH(c.call(d), expected(c.message, d)) << c.what << " on " << d.name();
}

INSTANTIATE_TEST_SUITE_P(Ops, ContractDeathTest, ::testing::Range(size_t(0), std::size(kBroken)));

// What each backend's kernels take (contract.h, Kernels): the CPU's float ops also take
// f64, CUDA's only f32, and only CUDA writes a bf16 GEMM output. Each message says which
// dtypes the device takes.
TEST(ContractDeathTest, DtypesAreTheDevices) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  FakeCudaStream fake;
  const Device cpu{DeviceKind::CPU, cpu_backend().default_stream()}, gpu{DeviceKind::CUDA, fake};
  EXPECT_DEATH(gelu_forward(gpu.stream, gpu.make(Shape{3}, DType::F64), gpu.make(Shape{3}, DType::F64)),
               expected("gelu_forward: in: unsupported dtype f64 on cuda (f32)", gpu));
  EXPECT_DEATH(gelu_forward(cpu.stream, cpu.make(Shape{3}, DType::I32), cpu.make(Shape{3}, DType::I32)),
               expected("gelu_forward: in: unsupported dtype i32 on cpu (f32/f64)", cpu));
  EXPECT_DEATH(matmul(cpu.stream, cpu.make(Shape{2, 2}, DType::BF16), cpu.make(Shape{2, 3}, DType::BF16),
                      cpu.make(Shape{3, 2}, DType::BF16), {}),
               expected("matmul: C: unsupported dtype bf16 on cpu (f32)", cpu));
  EXPECT_DEATH(matmul(gpu.stream, gpu.make(Shape{2, 2}, DType::F64), gpu.make(Shape{2, 3}, DType::F64),
                      gpu.make(Shape{3, 2}, DType::F64), {}),
               expected("matmul: A: unsupported dtype f64 on cuda (f32/bf16)", gpu));
}

// The f64 the CPU takes runs (the gradient checks depend on it): gelu(1) in f64.
TEST(Contract, CpuTakesF64) {
  Stream& s = cpu_backend().default_stream();
  const Tensor in = Tensor::from_vector(std::vector<double>{1.0}, Shape{1});
  const Tensor out = Tensor::zeros(cpu_backend(), Shape{1}, DType::F64);
  gelu_forward(s, out, in);
  const double k = std::sqrt(2.0 / std::numbers::pi);
  EXPECT_DOUBLE_EQ(to_vector_f64(out)[0], 0.5 * (1.0 + std::tanh(k * (1.0 + 0.044715))));
}

// The table names every op once (op_names is generated from it, as the ops are).
TEST(Contract, OpNamesAreTheTable) {
  const std::vector<std::string_view>& names = op_names();
  EXPECT_EQ(std::set<std::string_view>(names.begin(), names.end()).size(), names.size());
  for (const char* op : {"matmul", "copy_from_host", "attention_decode", "row_stats_backward"})
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
}

}  // namespace
}  // namespace vlm
