#include "runtime/chain.h"

#include <torch/script.h>

#include "manifest/manifest.h"
#include "runtime/compare.h"
#include "runtime/tensor_io.h"
#include "runtime/stage_program.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

std::vector<at::Tensor> runChain(const std::string& dir, const std::vector<at::Tensor>& inputs,
                                 const std::string& referencePath, const torch::Device& device) {
  Manifest m = readManifest(dir);
  if (inputs.size() != m.inputs.size())
    throw Error(ErrorKind::InvalidInput, referencePath, "",
                "holds " + std::to_string(inputs.size()) + " inputs, the manifest of " + dir + " expects " +
                    std::to_string(m.inputs.size()));
  c10::InferenceMode guard;
  std::vector<std::vector<at::Tensor>> results(m.stages.size());
  for (const Stage& st : m.stages) {
    const StageFile* file = nullptr;
    try {
      file = &stageFileOf(st, StageFormat::TorchScript);
    } catch (const Error& e) {
      e.rethrowWithFile(dir);
    }
    torch::jit::Module mod = torch::jit::load(dir + "/" + file->path, device);
    mod.eval();
    std::vector<c10::IValue> args;
    for (const auto& in : st.inputs) {
      if (in.source.kind == ValueSource::Kind::UserInput) args.emplace_back(inputs.at(in.source.userInput).to(device));
      else args.emplace_back(results.at(in.source.stage).at(in.source.output));
    }
    c10::IValue out = mod.forward(args);
    for (const auto& v : out.toTupleRef().elements()) results[st.index].push_back(v.toTensor());
  }
  std::vector<at::Tensor> got;
  for (size_t j = 0; j < m.outputs.size(); ++j) {
    const auto& src = m.outputs[j].source;
    if (!src) throw Error(ErrorKind::InvalidInput, dir, "outputs[" + std::to_string(j) + "]", "no source");
    got.push_back(src->kind == ValueSource::Kind::UserInput ? inputs.at(src->userInput)
                                                           : results.at(src->stage).at(src->output));
  }
  return got;
}

}  // namespace

ChainReport checkChain(const std::string& dir, const std::string& referencePath, const ChainOptions& o) {
  ReferenceSet ref = readReference(referencePath);
  torch::Device device(o.device);
  std::vector<at::Tensor> got = runChain(dir, ref.inputs, referencePath, device);
  Tolerance tol;
  tol.atol = o.atol;
  tol.rtol = o.rtol;
  if (auto it = ref.metadata.find("compute_dtype"); it != ref.metadata.end()) tol.computeDtype = it->second;
  Comparison c = compareOutputs(got, ref.outputs, tol);
  ChainReport r;
  r.outputs = got.size();
  r.ok = c.ok;
  r.exact = c.exact;
  r.maxAbsError = c.maxAbsError;
  r.message = c.message;
  if (!o.wholeDir.empty()) {
    Tolerance bitwise;
    bitwise.exact = true;
    Comparison w = compareOutputs(got, runChain(o.wholeDir, ref.inputs, referencePath, device), bitwise);
    r.matchesWhole = w.ok;
    if (!w.ok && r.message.empty()) r.message = "against the unsplit program " + o.wholeDir + ": " + w.message;
  }
  return r;
}

}  // namespace pipecut::runtime
