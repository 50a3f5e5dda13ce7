#pragma once
// `pipecut inspect`: what a person (or a script, with --json) needs to know
// before cutting a program: versions, the calling convention, operators,
// higher-order regions and the module tree with sizes; optionally the
// program drawn as Graphviz, nodes grouped by module.
#include <ostream>
#include <string>

#include "driver/support_targets.h"
#include "weights/options.h"

namespace pipecut::driver {

struct InspectRequest {
  std::string model;    // the .pt2
  bool json = false;    // one JSON object instead of text
  std::string dotFile;  // also draw the program here ("": do not)
  bool force = false;   // --dot may replace a file pipecut did not write
  // --weights: also what the checkpoint would bind (weights/binding.h), as
  // pipecut split binds it: each tensor the program needs and where it comes
  // from, what no source holds, and the checkpoint tensors it does not use.
  weights::BindOptions weights;
  // --support: also each operator's verdict under the target, and every
  // node it refuses with the reason (partition/support.h), on the program
  // as split sees it (normalized).
  SupportOptions support;
};

// Writes the summary to `os`. Throws pipecut::Error: InvalidInput for an
// unreadable program, a malformed weight source or a --dot destination in
// the way, Environment for what the OS refuses. Missing tensors are
// reported, not thrown.
void inspect(const InspectRequest& request, std::ostream& os);

}  // namespace pipecut::driver
