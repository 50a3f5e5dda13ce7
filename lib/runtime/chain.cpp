#include "runtime/chain.h"

#include <torch/script.h>

#include "manifest/manifest.h"
#include "runtime/compare.h"
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
  std::vector<at::Tensor> got;
  for (size_t j = 0; j < m.outputs.size(); ++j) {
    const auto& src = m.outputs[j].source;
    if (!src) throw Error(ErrorKind::InvalidInput, dir, "outputs[" + std::to_string(j) + "]", "no source");
    got.push_back(src->kind == ValueSource::Kind::UserInput ? ref.inputs.at(src->userInput)
                                                           : results.at(src->stage).at(src->output));
  }
  Comparison c = compareOutputs(got, ref.outputs, o.atol, 0);
  ChainReport r;
  r.outputs = m.outputs.size();
  r.ok = c.ok;
  r.exact = c.exact;
  r.maxAbsError = c.maxAbsError;
  r.message = c.message;
  return r;
}

}  // namespace pipecut::runtime
