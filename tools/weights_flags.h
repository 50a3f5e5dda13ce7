#pragma once
// The weight-source flags pipecut split, pipecut inspect and pipecut-run
// share (weights/options.h says what each means).
#include <CLI/CLI.hpp>

#include "weights/options.h"

namespace pipecut::cli {

// Adds --weights (repeatable), --weights-rename (repeatable),
// --weights-prefix and --weights-cast; the last three need --weights.
// Returns --weights.
inline CLI::Option* addWeightFlags(CLI::App* app, weights::BindOptions& w) {
  auto* sources = app->add_option("--weights", w.sources,
                                  "the model's own checkpoint: a .safetensors file, a *.safetensors.index.json (shards "
                                  "beside it) or a directory holding model.safetensors[.index.json]; repeat to add "
                                  "sources (a file of what checkpoints lack: non-persistent buffers, constants)")
                      ->expected(1)
                      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                      ->allow_extra_args(false);
  app->add_option("--weights-rename", w.renames,
                  "REGEX=REPLACEMENT: rename checkpoint tensors (\\1 or $1 for groups); repeatable, the first pattern "
                  "that matches a name rewrites it, as transformers' key_mapping")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->needs(sources);
  app->add_option("--weights-prefix", w.prefix,
                  "prepend to every checkpoint name (after renaming): the attribute a wrapper holds the model under")
      ->needs(sources);
  app->add_flag("--weights-cast", w.cast,
                "convert a checkpoint tensor of another floating dtype to the program's (round to nearest even, as "
                "torch's .to); shapes must match")
      ->needs(sources);
  return sources;
}

}  // namespace pipecut::cli
