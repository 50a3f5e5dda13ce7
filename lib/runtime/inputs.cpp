#include "runtime/inputs.h"

#include <fstream>

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "emit/dtypes.h"
#include "manifest/shapes.h"
#include "runtime/tensor_io.h"
#include "support/error.h"

namespace pipecut::runtime {

namespace {

at::ScalarType dtypeOf(const std::string& name, const std::string& where) {
  if (auto t = emit::scalarTypeFromTorchName(name)) return *t;
  invalidInput(where, "unsupported input dtype '" + name + "'");
}

void flattenInto(const c10::IValue& v, std::vector<at::Tensor>& out, const std::string& path) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) flattenInto(e, out, path);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) flattenInto(e, out, path);
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) flattenInto(kv.value(), out, path);
  } else {
    throw Error(ErrorKind::InvalidInput, path, "", std::string("holds a ") + v.tagKind() + ", expected tensors");
  }
}

}  // namespace

std::vector<at::Tensor> loadInputs(const std::string& path, const Manifest& m) {
  std::vector<at::Tensor> inputs;
  if (path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0) {
    inputs = readReference(path).inputs;
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorKind::InvalidInput, path, "", "cannot open the inputs file");
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
    c10::IValue v;
    try {
      v = torch::jit::pickle_load(bytes);
    } catch (const c10::Error& e) {
      std::string msg = e.what_without_backtrace();
      throw Error(ErrorKind::InvalidInput, path, "", "not a torch.save file: " + firstLine(msg));
    } catch (const std::exception& e) {
      // The unpickler also throws plain std:: errors on some malformed streams.
      std::string msg = e.what();
      throw Error(ErrorKind::InvalidInput, path, "", "not a torch.save file: " + firstLine(msg));
    }
    if (v.isGenericDict()) {
      // Keyed by input name: put them in manifest order.
      auto dict = v.toGenericDict();
      for (const auto& u : m.inputs) {
        auto it = dict.find(c10::IValue(u.name));
        if (it == dict.end()) throw Error(ErrorKind::InvalidInput, path, "input '" + u.name + "'", "missing from the dict");
        if (!it->value().isTensor())
          throw Error(ErrorKind::InvalidInput, path, "input '" + u.name + "'",
                      std::string("holds a ") + it->value().tagKind() + ", expected a tensor");
        inputs.push_back(it->value().toTensor());
      }
    } else {
      flattenInto(v, inputs, path);
    }
  }
  if (inputs.size() != m.inputs.size())
    throw Error(ErrorKind::InvalidInput, path, "", "holds " + std::to_string(inputs.size()) + " input tensors; the stages take " +
                                                       std::to_string(m.inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& want = m.inputs[i].tensor;
    std::string got = c10::toString(inputs[i].scalar_type());
    if (!want.dtype.empty() && dtypeOf(want.dtype, "input") != inputs[i].scalar_type())
      throw Error(ErrorKind::InvalidInput, path, "input '" + m.inputs[i].name + "'",
                  "is " + got + ", the program takes " + want.dtype);
  }
  return inputs;
}

std::vector<at::Tensor> randomInputs(const Manifest& m, uint64_t seed, int64_t batch, int microbatches, int64_t intHigh) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::vector<at::Tensor> out;
  for (const auto& u : m.inputs) {
    std::vector<int64_t> shape;
    for (size_t d = 0; d < u.tensor.shape.size(); ++d) {
      const DimSpec& dim = u.tensor.shape[d];
      int64_t size = dim.symbol.empty() ? dim.size : batch;
      if (d == 0) size *= microbatches;
      shape.push_back(size);
    }
    at::ScalarType t = dtypeOf(u.tensor.dtype, "input '" + u.name + "'");
    auto opts = at::TensorOptions().dtype(t);
    if (t == at::kBool) out.push_back(at::rand(shape, gen, at::TensorOptions()).lt(0.5));
    else if (at::isFloatingType(t)) out.push_back(at::randn(shape, gen, at::TensorOptions()).to(t));
    else out.push_back(at::randint(0, intHigh, shape, gen, opts));
  }
  return out;
}

std::vector<std::vector<at::Tensor>> splitMicrobatches(const std::vector<at::Tensor>& inputs, const Manifest& m,
                                                       int microbatches) {
  if (microbatches < 1) invalidInput("--microbatches", "must be at least 1");
  int64_t batch = -1;
  for (const auto& t : inputs)
    if (t.dim() > 0) {
      batch = t.size(0);
      break;
    }
  std::vector<std::vector<at::Tensor>> mbs(static_cast<size_t>(microbatches));
  std::vector<ShapeBinder> binders(static_cast<size_t>(microbatches), ShapeBinder(m.symbols));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    bool batched = t.dim() > 0 && t.size(0) == batch;
    if (batched && batch % microbatches != 0)
      invalidInput("input '" + m.inputs[i].name + "'",
                   "a batch of " + std::to_string(batch) + " does not split into " + std::to_string(microbatches) +
                       " equal micro-batches");
    auto parts = batched ? t.chunk(microbatches, 0) : std::vector<at::Tensor>(static_cast<size_t>(microbatches), t);
    for (int k = 0; k < microbatches; ++k) {
      at::Tensor part = parts[static_cast<size_t>(k)].contiguous();
      // Static exports fix each stage's shapes: say so plainly instead of
      // letting a reshape deep inside a stage fail.
      const auto& spec = m.inputs[i].tensor.shape;
      if (static_cast<size_t>(part.dim()) != spec.size())
        invalidInput("input '" + m.inputs[i].name + "'",
                     "has " + std::to_string(part.dim()) + " dimensions, the program takes " + std::to_string(spec.size()));
      for (size_t d = 0; d < spec.size(); ++d)
        if (spec[d].symbol.empty() && spec[d].size != part.size(static_cast<int64_t>(d)))
          invalidInput("input '" + m.inputs[i].name + "'",
                       "micro-batch shape " + c10::str(part.sizes()) + " does not match the exported shape (dimension " +
                           std::to_string(d) + " is " + std::to_string(spec[d].size) + "); the program was exported for " +
                           "micro-batches of " + std::to_string(spec[0].symbol.empty() ? spec[0].size : 0) +
                           ", so give a batch of that size times --microbatches");
      // Dynamic dimensions: within the exported ranges, and equal where the
      // program says they are (one symbol for the batch of every input).
      std::string wrong = binders[static_cast<size_t>(k)].bind(m.inputs[i].name, m.inputs[i].tensor, {part.sizes().data(), part.sizes().size()});
      if (!wrong.empty())
        invalidInput("input '" + m.inputs[i].name + "'", "micro-batch shape " + c10::str(part.sizes()) + ": " + wrong);
      mbs[static_cast<size_t>(k)].push_back(part);
    }
  }
  return mbs;
}

std::vector<at::Tensor> mergeMicrobatches(const std::vector<std::vector<at::Tensor>>& per) {
  std::vector<at::Tensor> out;
  if (per.empty()) return out;
  for (size_t j = 0; j < per[0].size(); ++j) {
    std::vector<at::Tensor> parts;
    for (const auto& mb : per) parts.push_back(mb[j]);
    out.push_back(parts.size() == 1 ? parts[0] : at::cat(parts, 0));
  }
  return out;
}

}  // namespace pipecut::runtime
