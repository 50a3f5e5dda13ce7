#pragma once
// Picking a generated token from one row of logits: greedy (the first
// maximum, as torch.argmax), or nucleus (top-p) sampling with a temperature.
// A draw depends only on (seed, the sequence's id, the position), never on
// which slot, rank or step order produced the logits: a run is reproducible
// across placements and slot counts. Torch-free; float32 logits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/options.h"

namespace pipecut::runtime {

struct SamplerOptions {
  Sampling sampling = Sampling::Greedy;
  double temperature = 1.0;  // > 0
  double topP = 1.0;         // in (0, 1]
  uint64_t seed = 0;
};

// A stable 64-bit key for a sequence's id (its JSON text), FNV-1a.
uint64_t sequenceKey(const std::string& id);

// The uniform draw in [0, 1) for (seed, key, position): splitmix64.
double uniformDraw(uint64_t seed, uint64_t key, int64_t position);

int64_t sampleToken(const float* logits, size_t vocab, const SamplerOptions& o, uint64_t key, int64_t position);

}  // namespace pipecut::runtime
