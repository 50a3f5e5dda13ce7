#pragma once
// Human-readable views of a split: the preview text and a Graphviz drawing.
#include <string>

#include "manifest/manifest.h"

namespace pipecut::driver {

// Per stage: nodes, parameter bytes, bytes sent per sample, modules, the
// values crossing boundaries and what is recomputed; then the tied groups.
std::string previewText(const Manifest& m);
// The stages and the values between them (dot).
std::string stagesDot(const Manifest& m);

}  // namespace pipecut::driver
