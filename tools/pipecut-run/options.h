#pragma once
// pipecut-run's command line, parsed into what the runtime takes: flags only,
// no torch, so that it is fuzzed on its own (test/fuzz/run_options.cpp).
// Every numeric option is range-checked here (positive counts, finite
// positive times and rates, betas in [0, 1)), every list parsed strictly;
// a bad one is a usage error naming the option (exit 1).
#include <string>
#include <vector>

#include "runtime/options.h"

namespace pipecut::cli {

struct RunCommand {
  enum class Mode { Run, Train, Profile, Generate, Exit } mode = Mode::Run;
  runtime::InferenceOptions inference;  // Mode::Run, Mode::Profile
  runtime::TrainOptions train;          // Mode::Train (its session is inference's)
  runtime::GenerateOptions generate;    // Mode::Generate (likewise)
  std::string profilePath;              // Mode::Profile
  bool json = false, quiet = false;
  // Mode::Exit: --help, --version or a usage error: print `text` (to stdout
  // when exitCode is 0, else stderr) and exit with exitCode.
  int exitCode = 0;
  std::string text;
};

RunCommand parseRunCommand(int argc, const char* const* argv);

}  // namespace pipecut::cli
