#pragma once
// Running a helper program and collecting what it said: how `pipecut
// compile` drives the user's Python (the one step that needs it). Torch-free.
#include <string>
#include <utility>
#include <vector>

namespace pipecut::support {

struct ProcessRequest {
  // argv[0] is a path, or a name looked up on PATH.
  std::vector<std::string> argv;
  std::string input;  // written to the child's stdin, which is then closed
  // Set in the child's environment on top of ours.
  std::vector<std::pair<std::string, std::string>> environment;
};

struct ProcessResult {
  int exitCode = -1;  // -1 when killed by a signal
  int signal = 0;     // the signal that killed it, else 0
  // stdout and stderr, interleaved as written; the last 1 MiB when longer.
  std::string output;
};

// Runs the program to completion. Throws pipecut::Error (InvalidInput,
// naming argv[0]) when it cannot be started (not found, not executable);
// anything after the start is the caller's to judge from the result.
ProcessResult runProcess(const ProcessRequest& request);

}  // namespace pipecut::support
