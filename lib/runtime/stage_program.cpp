#include "runtime/stage_program.h"

#include <torch/nativert/ModelRunnerHandle.h>

#include "runtime/stage_failure.h"
#include "support/error.h"

namespace pipecut::runtime {

const StageFile& stageFileOf(const Stage& st, StageFormat f) {
  for (const auto& file : st.files)
    if (file.format == stageFormatName(f)) return file;
  for (const auto& missing : st.missing)
    if (missing.format == stageFormatName(f))
      throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(st.index),
                  std::string("has no ") + (f == StageFormat::Pt2 ? ".pt2" : "TorchScript (.pt)") +
                      " file, the format cannot express it (" + missing.reason + ")" +
                      (f == StageFormat::TorchScript ? "; run its .pt2 with --stage-format pt2" : ""));
  throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(st.index),
              f == StageFormat::Pt2 ? "has no .pt2 file; split with --format pt2 (or both)"
                                    : "has no TorchScript (.pt) file; split with --format torchscript");
}

StageProgram::StageProgram() = default;
StageProgram::StageProgram(StageProgram&&) noexcept = default;
StageProgram& StageProgram::operator=(StageProgram&&) noexcept = default;
StageProgram::~StageProgram() = default;

StageProgram StageProgram::load(const std::string& dir, const Stage& st, StageFormat f, c10::Device device) {
  const std::string path = dir + "/" + stageFileOf(st, f).path;
  StageProgram p;
  p.format_ = f;
  p.stage_ = st.index;
  if (f == StageFormat::Pt2 && !device.is_cpu())
    throw Error(ErrorKind::InvalidInput, path, "",
                "a .pt2 stage runs on the CPU (NativeRT here places no weights on " + device.str() +
                    "); use --stage-format torchscript for GPU stages");
  try {
    if (f == StageFormat::TorchScript) {
      p.module_ = torch::jit::load(path, device);
      p.module_->eval();
    } else {
      // The archive's one program is "model" (models/model.json).
      p.nativert_ = std::make_unique<torch::nativert::ModelRunnerHandle>(path, "model");
    }
  } catch (const c10::Error& e) {
    throw Error(ErrorKind::InvalidInput, path, "",
                std::string(f == StageFormat::Pt2 ? "NativeRT cannot load it: " : "cannot load: ") +
                    firstLine(e.what_without_backtrace()));
  } catch (const std::exception& e) {  // NativeRT also throws std::runtime_error
    throw Error(ErrorKind::InvalidInput, path, "", std::string("NativeRT cannot load it: ") + firstLine(e.what()));
  }
  return p;
}

std::vector<c10::IValue> StageProgram::forward(std::vector<c10::IValue> args) {
  auto failed = [&](const std::string& text) {
    StageFailure f = parseStageFailure(text);
    std::string node = describeFailingNode(f);
    throw Error(ErrorKind::InvalidInput, "", "stage " + std::to_string(stage_) + (node.empty() ? "" : ": " + node),
                f.cause);
  };
  try {
    if (nativert_) return nativert_->runWithFlatInputsAndOutputs(std::move(args));
    c10::IValue out = module_->forward(args);
    const auto& elements = out.toTupleRef().elements();
    return std::vector<c10::IValue>(elements.begin(), elements.end());
  } catch (const c10::OutOfMemoryError& e) {
    throw Error(ErrorKind::Environment, "", "stage " + std::to_string(stage_), firstLine(e.what_without_backtrace()));
  } catch (const c10::Error& e) {
    failed(e.what_without_backtrace());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // NativeRT's own std::runtime_error
    failed(e.what());
  }
  return {};
}

}  // namespace pipecut::runtime
