#include "runtime/chain.h"

#include <torch/script.h>

#include "manifest/manifest.h"
#include "runtime/reference.h"
#include "support/error.h"

namespace pipecut::runtime {

ChainReport checkChain(const std::string& dir, const std::string& referencePath, const ChainOptions& o) {
  Manifest m = readManifest(dir);
  ReferenceSet ref = readReference(referencePath);
  if (ref.inputs.size() != m.inputs.size())
    throw Error(ErrorKind::InvalidInput, referencePath, "",
                "holds " + std::to_string(ref.inputs.size()) + " inputs, the manifest expects " +
                    std::to_string(m.inputs.size()));
  torch::Device device(o.device);
  c10::InferenceMode guard;
  std::vector<std::vector<at::Tensor>> results(m.stages.size());
  for (const Stage& st : m.stages) {
    const StageFile* file = nullptr;
    for (const auto& f : st.files)
      if (f.format == "torchscript") file = &f;
    if (!file) throw Error(ErrorKind::InvalidInput, dir, "stage " + std::to_string(st.index), "no TorchScript file");
    torch::jit::Module mod = torch::jit::load(dir + "/" + file->path, device);
    mod.eval();
    std::vector<c10::IValue> args;
    for (const auto& in : st.inputs) {
      if (in.source.kind == ValueSource::Kind::UserInput) args.emplace_back(ref.inputs.at(in.source.userInput).to(device));
      else args.emplace_back(results.at(in.source.stage).at(in.source.output));
    }
    c10::IValue out = mod.forward(args);
    for (const auto& v : out.toTupleRef().elements()) results[st.index].push_back(v.toTensor());
  }
  ChainReport r;
  r.outputs = m.outputs.size();
  r.ok = true;
  for (size_t j = 0; j < m.outputs.size(); ++j) {
    const auto& src = m.outputs[j].source;
    if (!src) throw Error(ErrorKind::InvalidInput, dir, "outputs[" + std::to_string(j) + "]", "no source");
    at::Tensor got = src->kind == ValueSource::Kind::UserInput ? ref.inputs.at(src->userInput)
                                                              : results.at(src->stage).at(src->output);
    got = got.to(at::kCPU);
    const at::Tensor& want = ref.outputs.at(j);
    if (got.sizes() != want.sizes() || got.scalar_type() != want.scalar_type()) {
      r.ok = r.exact = false;
      if (r.message.empty())
        r.message = "output " + std::to_string(j) + ": shape/dtype " + c10::str(got.sizes(), " ", got.scalar_type()) +
                    " differs from the reference " + c10::str(want.sizes(), " ", want.scalar_type());
      continue;
    }
    if (!at::equal(got, want)) r.exact = false;
    double err = want.numel() == 0 ? 0.0
                                   : (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
    r.maxAbsError = std::max(r.maxAbsError, err);
    if (!(err <= o.atol)) {
      r.ok = false;
      if (r.message.empty()) r.message = "output " + std::to_string(j) + ": max abs error " + std::to_string(err);
    }
  }
  return r;
}

}  // namespace pipecut::runtime
