#pragma once
// Which of a stage's files pipecut-run runs (`--stage-format`): the
// TorchScript `.pt` or the `.pt2` through NativeRT (see stage_program.h).
// Torch-free, like runtime/options.h.
#include <optional>
#include <string>

namespace pipecut::runtime {

enum class StageFormat { TorchScript, Pt2 };

// "torchscript" or "pt2", as the manifest's StageFile::format says.
inline const char* stageFormatName(StageFormat f) { return f == StageFormat::Pt2 ? "pt2" : "torchscript"; }

inline std::optional<StageFormat> parseStageFormat(const std::string& text) {
  if (text == "torchscript") return StageFormat::TorchScript;
  if (text == "pt2") return StageFormat::Pt2;
  return std::nullopt;
}

}  // namespace pipecut::runtime
