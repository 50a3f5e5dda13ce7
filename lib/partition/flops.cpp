#include "partition/flops.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "ir/op_traits.h"
#include "support/error.h"

namespace pipecut::partition {

namespace {

int64_t sizeOf(const ir::SymInt& s, const ir::Node& n) {
  if (auto v = s.example()) return *v;
  invalidInput("node '" + n.label() + "'",
               "counting FLOPs needs the example value of symbolic size " + s.str() +
                   ", which the program does not record; balance by params or time instead");
}

std::vector<int64_t> shapeOf(const ir::Value* v, const ir::Node& n) {
  std::vector<int64_t> out;
  if (!v || !v->meta) return out;
  for (const auto& s : v->meta->sizes) out.push_back(sizeOf(s, n));
  return out;
}

double product(const std::vector<int64_t>& s, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < s.size(); ++i) p *= static_cast<double>(s[i]);
  return p;
}

// The first input tensor among `names` that is present.
const ir::Value* firstTensor(const ir::Node& n, std::initializer_list<std::string_view> names) {
  for (auto name : names)
    if (const ir::Value* v = n.tensorInput(name)) return v;
  return nullptr;
}

bool boolInput(const ir::Node& n, std::string_view name) {
  const ir::NamedArgument* a = n.input(name);
  return a && a->arg.tag == ir::ArgTag::Bool && a->arg.asBool();
}

double outputNumel(const ir::Node& n) {
  double total = 0;
  bool found = false;
  n.forEachOutputValue([&](const ir::Value* v) {
    if (found || !v->meta) return;
    found = true;
    total = product(shapeOf(v, n));
  });
  return total;
}

// Size of the contracted dimension from a right-hand operand [..., K, N].
double contracted(const ir::Value* rhs, const ir::Node& n) {
  auto s = shapeOf(rhs, n);
  if (s.empty()) return 0;
  return static_cast<double>(s.size() >= 2 ? s[s.size() - 2] : s[0]);
}

const std::unordered_set<std::string>& movementOps() {
  static const std::unordered_set<std::string> k = {
      "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "expand_as", "slice", "select",
      "unsqueeze", "squeeze", "contiguous", "clone", "cat", "stack", "split", "split_with_sizes", "chunk", "unbind",
      "index", "index_select", "gather", "embedding", "alias", "detach", "lift_fresh_copy", "_to_copy", "to",
      "type_as", "arange", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like",
      "new_zeros", "new_ones", "new_full", "new_empty", "scalar_tensor", "sym_size", "sym_stride", "sym_numel",
      "flatten", "unflatten", "narrow", "repeat", "repeat_interleave", "view_as", "as_strided", "diagonal", "movedim",
      "copy", "copy_", "_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range",
      "sym_constrain_range_for_size", "dropout", "lift", "item", "_local_scalar_dense", "pad", "constant_pad_nd"};
  return k;
}

const std::unordered_set<std::string>& reductionOps() {
  static const std::unordered_set<std::string> k = {"sum", "mean", "amax", "amin", "max", "min", "var", "std",
                                                    "var_mean", "std_mean", "prod", "argmax", "argmin", "norm",
                                                    "linalg_vector_norm", "all", "any", "cumsum", "logsumexp"};
  return k;
}

const std::unordered_set<std::string>& normalizingOps() {
  static const std::unordered_set<std::string> k = {
      "softmax", "_softmax", "log_softmax", "_log_softmax", "layer_norm", "native_layer_norm", "rms_norm",
      "_fused_rms_norm", "group_norm", "native_group_norm", "batch_norm", "native_batch_norm",
      "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "instance_norm"};
  return k;
}

double attentionFlops(const ir::Node& n) {
  auto q = shapeOf(firstTensor(n, {"query"}), n), k = shapeOf(firstTensor(n, {"key"}), n),
       v = shapeOf(firstTensor(n, {"value"}), n);
  if (q.size() < 2 || k.size() < 2 || v.empty()) return outputNumel(n);
  double L = static_cast<double>(q[q.size() - 2]), E = static_cast<double>(q.back());
  double S = static_cast<double>(k[k.size() - 2]), Ev = static_cast<double>(v.back());
  double B = product(q, 0) / std::max(1.0, L * E);
  return 2 * B * L * S * (E + Ev) + 5 * B * L * S;
}

double convolutionFlops(const ir::Node& n, bool transposed) {
  auto w = shapeOf(firstTensor(n, {"weight"}), n);
  if (w.empty() || w[0] == 0) return outputNumel(n);
  double bias = firstTensor(n, {"bias"}) ? outputNumel(n) : 0;
  if (transposed) {  // weight [C_in, C_out/groups, k...]: every input element scatters into a kernel
    double in = product(shapeOf(firstTensor(n, {"input"}), n));
    return 2 * in * product(w) / static_cast<double>(w[0]) + bias;
  }
  return 2 * outputNumel(n) * product(w) / static_cast<double>(w[0]) + bias;
}

}  // namespace

double nodeFlops(const ir::Node& n) {
  if (n.isHigherOrder()) {
    double total = 0;
    for (const ir::Graph* g : n.subgraphs())
      for (const auto& inner : g->nodes) total += nodeFlops(*inner);
    return total;
  }
  const std::string op(ir::atenOp(n));
  if (op.empty() || movementOps().count(op)) return 0;
  if (op == "mm" || op == "bmm") return 2 * outputNumel(n) * contracted(firstTensor(n, {"mat2"}), n);
  if (op == "addmm") return 2 * outputNumel(n) * contracted(firstTensor(n, {"mat2"}), n) + outputNumel(n);
  if (op == "baddbmm") return 2 * outputNumel(n) * contracted(firstTensor(n, {"batch2"}), n) + outputNumel(n);
  if (op == "matmul") {
    auto a = shapeOf(firstTensor(n, {"self"}), n);
    return a.empty() ? 0 : 2 * outputNumel(n) * static_cast<double>(a.back());
  }
  if (op == "linear") {
    auto w = shapeOf(firstTensor(n, {"weight"}), n);
    double bias = firstTensor(n, {"bias"}) ? outputNumel(n) : 0;
    return w.empty() ? 0 : 2 * outputNumel(n) * static_cast<double>(w.back()) + bias;
  }
  if (op == "scaled_dot_product_attention" || op.rfind("_scaled_dot_product", 0) == 0) return attentionFlops(n);
  if (op == "convolution" || op == "_convolution") return convolutionFlops(n, boolInput(n, "transposed"));
  if (op.rfind("conv_transpose", 0) == 0) return convolutionFlops(n, true);
  if (op.rfind("conv", 0) == 0 && op.size() == 6) return convolutionFlops(n, false);  // conv1d/2d/3d
  if (normalizingOps().count(op)) return 5 * product(shapeOf(firstTensor(n, {"input", "self"}), n));
  if (reductionOps().count(op)) return product(shapeOf(firstTensor(n, {"self", "input"}), n));
  return outputNumel(n);
}

}  // namespace pipecut::partition
