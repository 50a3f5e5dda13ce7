#pragma once
// pipecut-run --generate: decodes a split LLM token by token, each stage
// holding the KV cache of its layers (the manifest's state), several
// sequence groups (slots) in flight so that every stage is busy while the
// others decode. The program is a decode step exported with its static
// cache (transformers' executorch recipe: inputs input_ids [B, T] and
// cache_position [T], the logits [B, T, vocab] as output 0; T is 1, or
// symbolic for prefill chunks). Torch-free header.
//
// The run is three parts, as the other modes:
//   the plan       runtime/generate/plan.h: which slot runs which step,
//                  decided as tokens come back (pure data);
//   the transport  runtime/generate/step_channels.h: a step descriptor from the
//                  first stage's worker to the others, activations forward,
//                  the sampled tokens from the last stage back to the first;
//   the report     GenerateReport (runtime/report.h).
#include "runtime/options.h"
#include "runtime/report.h"

namespace pipecut::runtime {

// Throws pipecut::Error: InvalidInput for a program that is not a decode
// step with state, bad prompts (empty, longer than the cache, a token
// outside the vocabulary), options; RankFailed when a multi-process run
// stops. The report's `checked`/`checkOk` carry --check-tokens.
GenerateReport runGeneration(const GenerateOptions& options);

}  // namespace pipecut::runtime
