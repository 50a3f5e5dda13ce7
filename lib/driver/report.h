#pragma once
// Human-readable views of a split: the preview text and a Graphviz drawing.
#include <string>
#include <vector>

#include "manifest/manifest.h"
#include "partition/balance.h"
#include "support/staging.h"
#include "weights/binding.h"

namespace pipecut::driver {

// Per stage: nodes, parameter bytes, bytes sent per sample, modules, the
// values crossing boundaries and what is recomputed; then the tied groups.
std::string previewText(const Manifest& m);
// What --balance chose: per stage its cost and unit range, the imbalance
// (heaviest / mean), the bytes crossing each cut and the spec it amounts to.
std::string balanceText(const partition::BalanceResult& b);
// The stages and the values between them (dot), starting with kDotMarker.
std::string stagesDot(const Manifest& m);
// What binding the weights did, for stderr after a split: tensors and
// bytes from each checkpoint file, tensors that kept the .pt2's bytes, and
// the checkpoint tensors the program does not use (all of them with
// `listUnused`, else their count). Lines start with "pipecut: ".
std::string bindingSummary(const weights::Binding& b, const weights::WeightSource& source, bool listUnused);
// `s` as a Graphviz quoted string: in double quotes, '"' and '\\' escaped.
std::string dotQuoted(const std::string& s);

// The first line of every Graphviz file pipecut writes: a later --dot may
// replace a file that starts with it, and no other (support/staging.h).
inline constexpr const char* kDotMarker = "// written by pipecut\n";
// A --dot destination: replaces only a file that starts with kDotMarker.
support::Destination dotDestination(const std::string& path, std::vector<std::string> inputs, bool force);

}  // namespace pipecut::driver
