// runtime/attention_kernels.h and runtime/linear_kernels.h on TorchScript stages. Its
// own file: torch/script.h defines a CHECK of its own (c10's logging), so it
// comes first and Catch's replaces it, which no unity group may see.
#include <torch/script.h>
#undef CHECK

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "emit/torchscript.h"
#include "passes/pass_manager.h"
#include "pt2/package.h"
#include "runtime/attention_kernels.h"
#include "runtime/cpu_matmul.h"
#include "runtime/linear_kernels.h"
#include "support/host_cpu.h"
#include "test_util.h"

using namespace pipecut;

namespace {

// llama_tiny (or another fixture) normalized and emitted as one TorchScript
// stage, as pipecut split writes it: 4 layers; 4 query heads over 2 KV
// heads, with a mask (normalizing hands its attention calls the narrow key
// and value, enable_gqa).
struct EmittedLlama {
  std::string bytes;
  std::vector<int64_t> idsSizes;

  explicit EmittedLlama(const std::string& fixture = "llama_tiny") {
    pt2::Package pkg = pt2::readPackage(test::fixture(fixture));
    passes::PassManager pm;
    passes::addNormalizePipeline(pm, {});
    pm.run(pkg.program);
    emit::writeTorchScript(pkg, "stage_000", [&](const void* d, size_t n) {
      bytes.append(static_cast<const char*>(d), n);
      return n;
    });
    for (const auto& s : pkg.program.graph.inputs.back().value()->meta->sizes) idsSizes.push_back(s.value);
  }
  torch::jit::Module load() const {
    std::istringstream in(bytes);
    torch::jit::Module m = torch::jit::load(in);
    m.eval();
    return m;
  }
  at::Tensor ids() const { return at::randint(0, 64, idsSizes, at::TensorOptions().dtype(at::kLong)); }
};

}  // namespace

TEST_CASE("on a GPU, masked grouped-query attention is widened again to the kernels it was exported for", "[emit]") {
  EmittedLlama llama;
  torch::jit::Module narrow = llama.load(), wide = llama.load();
  at::Tensor input = llama.ids();

  // Per graph: attention calls with enable_gqa, and repeat_interleave calls.
  auto count = [](torch::jit::Module& m) {
    std::pair<size_t, size_t> gqaAndRepeats{0, 0};
    for (torch::jit::Node* n : m.get_method("forward").graph()->nodes()) {
      gqaAndRepeats.second += n->kind() == c10::aten::repeat_interleave;
      if (n->kind() == c10::Symbol::fromQualString("aten::scaled_dot_product_attention"))
        gqaAndRepeats.first += torch::jit::toIValue(n->input(7))->toBool();
    }
    return gqaAndRepeats;
  };
  const auto [layers, none] = count(narrow);
  CHECK(layers == 4);  // one a layer
  CHECK(none == 0);
  CHECK(runtime::widenMaskedGroupedAttention(wide) == layers);
  CHECK(runtime::widenMaskedGroupedAttention(wide) == 0);  // nothing left to widen
  CHECK(count(wide) == std::pair<size_t, size_t>{0, 2 * layers});  // key and value of each
  c10::InferenceMode guard;
  at::Tensor a = narrow.forward({input}).toTuple()->elements()[0].toTensor();
  at::Tensor b = wide.forward({input}).toTuple()->elements()[0].toTensor();
  CHECK(at::equal(a, b));  // enable_gqa is repeat_interleave by definition; on the CPU, bitwise
}

TEST_CASE("--cpu-matmul auto takes ATen's BLAS on Intel CPUs and oneDNN on other x86 CPUs", "[emit]") {
  using runtime::CpuMatmul;
  CHECK(runtime::resolveCpuMatmul(CpuMatmul::Auto, "GenuineIntel") == CpuMatmul::Blas);
  CHECK(runtime::resolveCpuMatmul(CpuMatmul::Auto, "AuthenticAMD") == CpuMatmul::OneDnn);
  CHECK(runtime::resolveCpuMatmul(CpuMatmul::Auto, "HygonGenuine") == CpuMatmul::OneDnn);
  CHECK(runtime::resolveCpuMatmul(CpuMatmul::Auto, "") == CpuMatmul::Blas);  // not x86: ATen's own choice
  // This machine's, against what the kernel says of it.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line))
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
  CHECK(support::hostCpuVendor() == vendor);
  // An explicit choice stands on any CPU.
  for (const char* v : {"GenuineIntel", "AuthenticAMD", ""}) {
    CHECK(runtime::resolveCpuMatmul(CpuMatmul::OneDnn, v) == CpuMatmul::OneDnn);
    CHECK(runtime::resolveCpuMatmul(CpuMatmul::Blas, v) == CpuMatmul::Blas);
  }
  CHECK(runtime::parseCpuMatmul("auto") == CpuMatmul::Auto);
  CHECK(!runtime::parseCpuMatmul("mkl"));
}

TEST_CASE("on a CPU, float32 linear layers whose weights the module holds run through oneDNN", "[emit]") {
  REQUIRE(runtime::oneDnnAvailable());
  auto count = [](torch::jit::Module& m, const char* kind) {
    size_t n = 0;
    for (torch::jit::Node* node : m.get_method("forward").graph()->nodes())
      n += node->kind() == c10::Symbol::fromQualString(kind);
    for (torch::jit::Node* node : m.get_method("forward").graph()->nodes())
      for (torch::jit::Block* b : node->blocks())
        for (torch::jit::Node* inner : b->nodes()) n += inner->kind() == c10::Symbol::fromQualString(kind);
    return n;
  };
  SECTION("which calls: module tensors of float32, 2-D, non-empty; in control flow too") {
    torch::jit::Module m("M");
    m.register_parameter("w", at::randn({5, 3}), false);
    m.register_parameter("b", at::randn({5}), false);
    m.register_buffer("wd", at::randn({5, 3}, at::kDouble));
    m.register_buffer("empty", at::randn({5, 0}));
    m.register_buffer("wt", at::randn({3, 5}));
    m.register_buffer("b2", at::randn({1, 5}));
    m.define(R"JIT(
def forward(self, x, xd, e, x2, flag: bool):
    a = torch.linear(x, self.w, self.b)
    b = torch.linear(x, self.w)
    c = torch.linear(xd, self.wd)
    d = torch.linear(x, self.w * 2.0)
    f = torch.linear(e, self.empty)
    g = x
    if flag:
        g = torch.linear(x, self.w, self.b + 1.0)
    else:
        g = torch.linear(x, self.w, self.b)
    h = torch.mm(x2, self.w.t())
    i = torch.addmm(self.b, x2, torch.permute(self.w, [1, 0]))
    j = torch.addmm(self.b, x2, torch.transpose(self.w, 0, 1), beta=2)
    k = torch.mm(x2, self.wt)
    l = torch.addmm(self.b2, x2, self.w.t())
    return (a, b, c, d, f, g, h, i, j, k, l)
)JIT");
    torch::jit::Module original = m.clone();
    // a and b, g's else branch, and core ATen's h and i; c is float64, d's
    // weight and g's then-branch bias are computed, f's weight has an empty
    // dimension, j scales the bias, k's weight is no transposed module
    // tensor, l's bias broadcasts from [1, 5].
    CHECK(runtime::routeLinearsToOneDnn(m) == 5);
    CHECK(runtime::routeLinearsToOneDnn(m) == 0);
    CHECK(count(m, "mkldnn::_linear_pointwise") == 5);
    CHECK(count(m, "aten::linear") == 4);
    CHECK(count(m, "aten::mm") + count(m, "aten::addmm") == 3);
    c10::InferenceMode guard;
    at::Tensor x = at::randn({2, 4, 3}), xd = at::randn({2, 3}, at::kDouble), e = at::randn({2, 0}), x2 = at::randn({2, 3});
    for (bool flag : {true, false}) {
      auto got = m.forward({x, xd, e, x2, flag}).toTuple()->elements();
      auto want = original.forward({x, xd, e, x2, flag}).toTuple()->elements();
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i, flag);
        CHECK(got[i].toTensor().sizes() == want[i].toTensor().sizes());
        CHECK(at::allclose(got[i].toTensor(), want[i].toTensor(), 1e-5, 1e-6));
      }
      for (size_t i : {2, 3, 4, 8, 9, 10}) CHECK(at::equal(got[i].toTensor(), want[i].toTensor()));  // untouched calls
    }
  }
  SECTION("an emitted stage: every projection of llama_tiny, within float32 rounding of ATen's BLAS") {
    // llama_tiny_decomp is the same model in core ATen: its projections are
    // aten::mm of a permuted weight.
    const std::string fixture = GENERATE(std::string("llama_tiny"), std::string("llama_tiny_decomp"));
    CAPTURE(fixture);
    EmittedLlama llama(fixture);
    torch::jit::Module blas = llama.load(), onednn = llama.load();
    const size_t linears = count(blas, "aten::linear") + count(blas, "aten::mm") + count(blas, "aten::addmm");
    // 4 layers of q, k, v, o, gate, up, down; the LM head. Core ATen writes
    // each o_proj as a bmm of an expanded weight, which stays ATen's.
    CHECK(linears == (fixture == "llama_tiny" ? 4 * 7 + 1 : 4 * 6 + 1));
    CHECK(runtime::routeLinearsToOneDnn(onednn) == linears);
    CHECK(count(onednn, "aten::linear") + count(onednn, "aten::mm") + count(onednn, "aten::addmm") == 0);
    at::Tensor input = llama.ids();
    c10::InferenceMode guard;
    at::Tensor a = blas.forward({input}).toTuple()->elements()[0].toTensor();
    at::Tensor b = onednn.forward({input}).toTuple()->elements()[0].toTensor();
    CHECK(at::allclose(a, b, 1e-4, 1e-5));
    CHECK(at::equal(b, onednn.forward({input}).toTuple()->elements()[0].toTensor()));  // deterministic
  }
}
