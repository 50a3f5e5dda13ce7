#pragma once
// Which of a stage's files pipecut-run runs (`--stage-format`): the
// TorchScript `.pt`, the `.pt2` through NativeRT, or the AOTInductor package
// `pipecut compile` made of the `.pt2` (see stage_program.h); or, with
// `auto`, each stage the best it has for its device (resolveStageFormat).
// Torch-free, like runtime/options.h.
#include <optional>
#include <string>

namespace pipecut::runtime {

enum class StageFormat { TorchScript, Pt2, Aoti, Auto };

// "torchscript", "pt2" or "aoti", as the manifest's StageFile::format says;
// "auto".
inline const char* stageFormatName(StageFormat f) {
  return f == StageFormat::Pt2 ? "pt2" : f == StageFormat::Aoti ? "aoti" : f == StageFormat::Auto ? "auto" : "torchscript";
}

inline std::optional<StageFormat> parseStageFormat(const std::string& text) {
  if (text == "torchscript") return StageFormat::TorchScript;
  if (text == "pt2") return StageFormat::Pt2;
  if (text == "aoti") return StageFormat::Aoti;
  if (text == "auto") return StageFormat::Auto;
  return std::nullopt;
}

}  // namespace pipecut::runtime
