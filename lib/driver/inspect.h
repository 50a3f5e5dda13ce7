#pragma once
// `pipecut inspect`: what a person (or a script, with --json) needs to know
// before cutting a program: versions, the calling convention, operators,
// higher-order regions and the module tree with sizes; optionally the
// program drawn as Graphviz, nodes grouped by module.
#include <ostream>
#include <string>

namespace pipecut::driver {

struct InspectRequest {
  std::string model;    // the .pt2
  bool json = false;    // one JSON object instead of text
  std::string dotFile;  // also draw the program here ("": do not)
  bool force = false;   // --dot may replace a file pipecut did not write
};

// Writes the summary to `os`. Throws pipecut::Error: InvalidInput for an
// unreadable program or a --dot destination in the way, Environment for
// what the OS refuses.
void inspect(const InspectRequest& request, std::ostream& os);

}  // namespace pipecut::driver
