#pragma once
// Human-readable views of a split: the preview text and a Graphviz drawing.
#include <string>

#include "manifest/manifest.h"
#include "partition/balance.h"

namespace pipecut::driver {

// Per stage: nodes, parameter bytes, bytes sent per sample, modules, the
// values crossing boundaries and what is recomputed; then the tied groups.
std::string previewText(const Manifest& m);
// What --balance chose: per stage its cost and unit range, the imbalance
// (heaviest / mean), the bytes crossing each cut and the spec it amounts to.
std::string balanceText(const partition::BalanceResult& b);
// The stages and the values between them (dot).
std::string stagesDot(const Manifest& m);

}  // namespace pipecut::driver
