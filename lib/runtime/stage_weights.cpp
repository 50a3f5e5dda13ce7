#include "runtime/stage_weights.h"

#include <vector>

#include "support/dtypes.h"
#include "support/error.h"
#include "weights/binding.h"

namespace pipecut::runtime {

StageWeights::StageWeights(const Manifest& m, const std::string& dir, const weights::BindOptions& o, bool copies)
    : dir_(dir), copies_(copies) {
  size_t external = 0;
  for (const auto& st : m.stages) external += st.external.size();
  if (!o.given()) {
    if (external)
      throw Error(ErrorKind::InvalidInput, dir, "manifest",
                  "is a weightless split: its stages hold no bytes for " + std::to_string(external) + " tensors" +
                      (m.metaExport ? " (the program was exported on the meta device)" : "") +
                      "; give the model's checkpoint with --weights (and, for what checkpoints lack, a further "
                      "--weights file)");
    return;
  }
  if (!external)
    throw Error(ErrorKind::InvalidInput, dir, "manifest",
                "lists no external tensors: the split holds its weights, so there is nothing for --weights to bind "
                "(split a meta export without --weights, or with --bind-at run, to bind at run time)");
  source_ = std::make_shared<const weights::WeightSource>(o);
}

StageWeights::~StageWeights() = default;

std::map<std::string, pt2::StoredTensor> StageWeights::bind(const Stage& st) const {
  std::map<std::string, pt2::StoredTensor> out;
  if (!source_) return out;
  std::vector<std::string> missing;
  for (const ExternalTensor& e : st.external) {
    const weights::CheckpointTensor* c = source_->find(e.name);
    for (size_t a = 0; !c && a < e.aliases.size(); ++a) c = source_->find(e.aliases[a]);
    if (!c) {
      missing.push_back(e.name);
      continue;
    }
    const support::DType* dtype = support::dtypeFromTorchName(e.tensor.dtype);
    if (!dtype) throw Error(ErrorKind::InvalidInput, dir_, "stage " + std::to_string(st.index) + ": " + e.name,
                            "unknown dtype '" + e.tensor.dtype + "' in the manifest");
    std::vector<int64_t> shape;
    for (const DimSpec& d : e.tensor.shape) shape.push_back(d.size);
    const std::string& path = source_->checkpoint().files()[c->file].path;
    if (!e.xxh3_128.empty() && weights::tensorDigest(c->bytes) != e.xxh3_128)
      throw Error(ErrorKind::InvalidInput, path, c->name,
                  "holds other bytes than the split pinned for '" + e.name + "' (its manifest's xxh3_128 " +
                      e.xxh3_128 + "): another checkpoint, or this one changed since");
    pt2::StoredTensor t;
    t.fqn = e.name;
    t.isParam = e.kind == "parameter";
    ir::TensorMeta meta;
    meta.dtype = dtype->code;
    meta.requiresGrad = t.isParam && (dtype->torchName == std::string("float32") || dtype->torchName == std::string("float64") ||
                                      dtype->torchName == std::string("float16") || dtype->torchName == std::string("bfloat16"));
    int64_t stride = 1;
    meta.strides.resize(shape.size());
    for (size_t i = shape.size(); i-- > 0;) {
      meta.strides[i].value = stride;
      stride *= std::max<int64_t>(shape[i], 1);
    }
    for (int64_t d : shape) meta.sizes.push_back(ir::SymInt{false, d, "", nullptr});
    t.meta = std::move(meta);
    t.data = source_->bytesFor(*c, e.name, *dtype, shape);
    out.emplace(e.name, std::move(t));
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
    const std::string prefix = weights::prefixHint(*source_, missing.front());
    throw Error(ErrorKind::InvalidInput, dir_, "stage " + std::to_string(st.index),
                "needs " + std::to_string(missing.size()) + " tensor" + (missing.size() == 1 ? "" : "s") +
                    " no --weights source holds: " + list +
                    (prefix.empty() ? "" : ". The checkpoint holds '" + missing.front().substr(prefix.size()) +
                                               "': give --weights-prefix " + prefix) +
                    ". Checkpoints lack non-persistent buffers and constants (rotary inv_freq, for one): give them "
                    "in a further --weights file (scripts/export_meta.py writes one beside the program)");
  }
  return out;
}

void StageWeights::bindPackage(const Stage& st, pt2::Package& stage) const {
  for (auto& [fqn, bound] : bind(st))
    for (auto* table : {&stage.weights, &stage.constants})
      if (auto it = table->find(fqn); it != table->end()) weights::rebind(it->second, bound.data);
  // A weightless split's state (a KV cache) has no bytes either: zeros.
  weights::zeroExternalState(stage);
}

}  // namespace pipecut::runtime
