// runtime/attention_kernels.h on a TorchScript stage pipecut emitted. Its
// own file: torch/script.h defines a CHECK of its own (c10's logging), so it
// comes first and Catch's replaces it, which no unity group may see.
#include <torch/script.h>
#undef CHECK

#include <catch2/catch.hpp>

#include <sstream>

#include "emit/torchscript.h"
#include "passes/pass_manager.h"
#include "pt2/package.h"
#include "runtime/attention_kernels.h"
#include "test_util.h"

using namespace pipecut;

TEST_CASE("on a GPU, masked grouped-query attention is widened again to the kernels it was exported for", "[emit]") {
  // llama_tiny: 4 query heads over 2 KV heads, with a mask; normalizing
  // hands its attention calls the narrow key and value (enable_gqa).
  pt2::Package pkg = pt2::readPackage(test::fixture("llama_tiny"));
  passes::PassManager pm;
  passes::addNormalizePipeline(pm, {});
  pm.run(pkg.program);
  std::string bytes;
  emit::writeTorchScript(pkg, "stage_000", [&](const void* d, size_t n) {
    bytes.append(static_cast<const char*>(d), n);
    return n;
  });
  auto load = [&] {
    std::istringstream in(bytes);
    torch::jit::Module m = torch::jit::load(in);
    m.eval();
    return m;
  };
  torch::jit::Module narrow = load(), wide = load();
  const ir::TensorMeta& ids = *pkg.program.graph.inputs.back().value()->meta;
  std::vector<int64_t> sizes;
  for (const auto& s : ids.sizes) sizes.push_back(s.value);
  at::Tensor input = at::randint(0, 64, sizes, at::TensorOptions().dtype(at::kLong));

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
