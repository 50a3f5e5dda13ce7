// The operator rules of ir/op_traits.h and the dtype table of
// support/dtypes.h with its c10 adapter (emit/dtypes.h).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "emit/dtypes.h"
#include "ir/op_traits.h"
#include "support/dtypes.h"

using namespace pipecut;

namespace {

ir::Node node(const std::string& target) {
  ir::Node n;
  n.target = target;
  return n;
}

}  // namespace

TEST_CASE("op targets split into namespace, op and overload; other targets are not ops", "[op_traits]") {
  auto t = ir::parseOpTarget("torch.ops.aten.add_.Tensor");
  REQUIRE(t);
  CHECK(t->ns == "aten");
  CHECK(t->op == "add_");
  CHECK(t->overload == "Tensor");
  t = ir::parseOpTarget("torch.ops.higher_order.cond");
  REQUIRE(t);
  CHECK(t->ns == "higher_order");
  CHECK(t->op == "cond");
  CHECK(t->overload.empty());
  t = ir::parseOpTarget("torch.ops.mylib.fused.default");
  REQUIRE(t);
  CHECK(t->ns == "mylib");
  CHECK_FALSE(ir::parseOpTarget("_operator.add"));
  CHECK_FALSE(ir::parseOpTarget("math.ceil"));
  CHECK(ir::atenOp(node("torch.ops.aten.mm.default")) == "mm");
  CHECK(ir::atenOp(node("torch.ops.mylib.mm.default")).empty());
  CHECK(ir::atenOp(node("_operator.mul")).empty());
}

TEST_CASE("effects: what must stay, what may be repeated", "[op_traits]") {
  struct Row {
    const char* target;
    bool sideEffects, changesState;
  };
  const Row rows[] = {
      {"torch.ops.aten.add.Tensor", false, false},
      {"torch.ops.aten.add_.Tensor", true, true},             // in-place
      {"torch.ops.aten.__and__.Tensor", false, false},        // dunder, not in-place
      {"torch.ops.aten.add.out", true, true},                 // out= overload
      {"torch.ops.aten.dropout.default", true, true},         // RNG
      {"torch.ops.aten.randn_like.default", true, true},
      {"torch.ops.aten._native_batch_norm_legit.default", true, true},  // running stats
      {"torch.ops.aten._assert_scalar.default", true, false},           // assertions repeat
      {"torch.ops.aten.sym_constrain_range_for_size.default", true, false},
      {"torch.ops.mylib.fused.default", true, true},          // custom: unknown
      {"_operator.add", false, false},
      {"math.ceil", false, false},
      {"torch.sym_max", false, false},
      {"builtins.print", true, true},                          // unknown Python callable
      {"torch.ops.higher_order.some_new_hop", true, true},     // unknown HOP
  };
  for (const Row& r : rows) {
    INFO(r.target);
    ir::Node n = node(r.target);
    CHECK(ir::hasSideEffects(n) == r.sideEffects);
    CHECK(ir::changesState(n) == r.changesState);
  }
  CHECK(ir::isInPlace(node("torch.ops.aten.index_copy_.default")));
  CHECK_FALSE(ir::isInPlace(node("torch.ops.aten.__or__.Tensor")));
  CHECK_FALSE(ir::isInPlace(node("torch.ops.mylib.write_.default")));  // aten only: custom ops are unknown anyway
}

TEST_CASE("export guards and dense compute are known by name", "[op_traits]") {
  CHECK(ir::isExportGuard(node("torch.ops.aten._assert_tensor_metadata.default")));
  CHECK(ir::isExportGuard(node("torch.ops.aten._assert_scalar.default")));
  CHECK(ir::isExportGuard(node("torch.ops.aten.sym_constrain_range_for_size.default")));
  CHECK_FALSE(ir::isExportGuard(node("torch.ops.aten._assert_async.msg")));  // a runtime check: kept
  CHECK_FALSE(ir::isExportGuard(node("torch.ops.mylib._assert_scalar.default")));
  for (const char* heavy : {"torch.ops.aten.linear.default", "torch.ops.aten.mm.default", "torch.ops.aten.conv2d.default",
                            "torch.ops.aten.convolution.default", "torch.ops.aten.scaled_dot_product_attention.default",
                            "torch.ops.aten._scaled_dot_product_flash_attention.default", "torch.ops.aten.embedding.default",
                            "torch.ops.aten.einsum.default", "torch.ops.aten.baddbmm.default"}) {
    INFO(heavy);
    CHECK(ir::isComputeHeavy(node(heavy)));
  }
  for (const char* light : {"torch.ops.aten.add.Tensor", "torch.ops.aten.embedding_dense_backward.default",
                            "torch.ops.mylib.mm.default", "_operator.mul"}) {
    INFO(light);
    CHECK_FALSE(ir::isComputeHeavy(node(light)));
  }
}

TEST_CASE("one dtype table: every name maps back to its entry, and c10 round-trips", "[op_traits][dtypes]") {
  std::set<int> codes;
  std::set<std::string> torchNames, safetensors;
  for (const support::DType& d : support::allDTypes()) {
    INFO(d.torchName);
    CHECK(codes.insert(d.code).second);
    CHECK(torchNames.insert(d.torchName).second);
    CHECK(support::dtypeFromCode(d.code) == &d);
    CHECK(support::dtypeFromTorchName(d.torchName) == &d);
    if (*d.safetensors) {
      CHECK(safetensors.insert(d.safetensors).second);
      CHECK(support::dtypeFromSafetensors(d.safetensors) == &d);
    }
    // The adapter: c10's element size agrees with the table's, and back.
    const c10::ScalarType t = emit::toC10(d.code);
    CHECK(static_cast<int>(c10::elementSize(t)) == d.itemSize);
    CHECK(emit::fromC10(t) == &d);
    CHECK(emit::scalarTypeFromTorchName(d.torchName) == t);
  }
  CHECK(support::dtypeFromCode(0) == nullptr);
  CHECK(support::dtypeFromTorchName("float") == nullptr);
  CHECK(support::dtypeFromSafetensors("") == nullptr);
  CHECK(support::dtypeFromSafetensors("F8") == nullptr);
  CHECK(emit::scalarTypeFromSafetensors("BF16") == c10::ScalarType::BFloat16);
  CHECK(emit::fromC10(c10::ScalarType::QInt8) == nullptr);
  CHECK_THROWS_WITH(emit::toC10(99), Catch::Contains("unknown dtype code 99"));
}
