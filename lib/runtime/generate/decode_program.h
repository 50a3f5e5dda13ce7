#pragma once
// What a decode step exported with its static cache looks like in a
// manifest (transformers' executorch recipe: inputs input_ids [B, T] and
// cache_position [T], logits [B, T, vocab] as output 0, the KV caches as
// stage state; T is 1, or symbolic for prefill chunks). Read by --generate,
// which loops it, and by --profile --decode-step, which times one step of
// it. Torch-free.
#include <cstdint>
#include <string>

#include "manifest/manifest.h"
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipecut::runtime {

struct DecodeProgram {
  int64_t rows = 0;           // the exported batch
  bool chunked = false;       // the sequence length is symbolic: prefill chunks
  int64_t chunk = 1;          // most tokens per step
  int64_t vocab = 0;
  int64_t cacheLength = 0;    // 0: not known from the state's shapes
  uint32_t logitsStage = 0, logitsOutput = 0;
};

// Throws pipecut::Error (InvalidInput) naming `dir` and the manifest part
// that is not a decode step's (the inputs, the logits, no state); `option`
// (--generate, --decode-step) says which option asked for one.
DecodeProgram readDecodeProgram(const Manifest& m, const std::string& dir, const std::string& option);

// One decode step's inputs for a program runtime/generate/decode_program.h accepts:
// token ids [B, 1] drawn uniformly from the vocabulary with `seed`, cache
// position [0]. With a static cache a step's work does not depend on the
// position (attention reads every cache position, masked), so this is what
// each generated token costs. Throws pipecut::Error (InvalidInput) naming
// `dir` and the manifest part when the program is not a decode step.
std::vector<at::Tensor> decodeStepInputs(const Manifest& m, const std::string& dir, uint64_t seed);

}  // namespace pipecut::runtime
