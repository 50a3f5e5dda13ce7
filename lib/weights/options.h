#pragma once
// What a command line says about weights from a model's own checkpoint
// (weights/binding.h binds them). Plain data, torch-free and free of the
// rest of the compiler, so that pipecut-run's option types carry it.
#include <string>
#include <vector>

namespace pipecut::weights {

struct BindOptions {
  std::vector<std::string> sources;  // --weights SOURCE, repeatable, in order
  std::vector<std::string> renames;  // --weights-rename REGEX=REPLACEMENT, repeatable, first match wins
  std::string prefix;                // --weights-prefix: prepended after renaming
  bool cast = false;                 // --weights-cast: convert floating dtypes to the program's
  bool given() const { return !sources.empty(); }
};

}  // namespace pipecut::weights
