#pragma once
// Generation's schedule as data: which slot runs which step, decided as the
// tokens come back from the last stage. Pure (no tensors, no torch): tested
// on its own (test_generation.cpp), the runtime only executes its steps.
//
// A slot is one exported batch: `rows` sequences side by side, all at one
// cache position (the program takes one cache_position for its batch), and
// one set of each stage's state (its KV cache). So the prompts of a slot
// have one length: a free slot takes the next prompt in file order and the
// next ones of the same length, up to `rows`; rows left over are padding
// (the first prompt again, its tokens dropped). A step is one call of the
// pipeline for a slot: a prefill chunk (up to `chunk` prompt tokens; 1 for a
// program exported for one token) or one decode token. The last position of
// a slot's last prefill chunk, and of every decode step, gives each row a
// token; a row ends at `eos` or after `maxNewTokens`; a slot whose rows have
// all ended takes the next prompts (its state reset to initial values) or
// falls idle. With one row per slot this is continuous batching.
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "runtime/generate/prompts.h"

namespace pipecut::runtime {

struct GenerationConfig {
  int64_t rows = 1;          // the exported batch
  int64_t slots = 1;         // in flight
  int64_t chunk = 1;         // most prompt tokens per step
  int64_t cacheLength = 0;   // positions per sequence (0: unknown, unchecked)
  int64_t maxNewTokens = 1;
  std::optional<int64_t> eos;
};

struct GenerationStep {
  int64_t index = 0;              // consecutive over the run, in the order steps are issued
  uint32_t slot = 0;
  int64_t position = 0;           // the cache position of its first token
  int64_t length = 1;             // tokens per row
  std::vector<int64_t> tokens;    // rows x length, row-major
  bool reset = false;             // the slot's first step with new sequences: its state starts over
  bool prefill = false;
  bool samples = false;           // its last position gives each row a token
  std::vector<int64_t> sequence;  // per row: the prompt's index, or -1 for padding
  std::vector<int64_t> generated; // per row: tokens it has so far (the next one's index)
};

class GenerationPlan {
 public:
  // Throws pipecut::Error (InvalidInput) naming the prompt when its length
  // and maxNewTokens do not fit the cache.
  GenerationPlan(GenerationConfig config, std::vector<PromptRequest> prompts);

  // The first step of every slot that gets prompts, at `nowMs`.
  std::vector<GenerationStep> start(double nowMs);
  // `step` has run: `sampled` holds a token per row when it samples. The
  // slot's next step, if it has one.
  std::optional<GenerationStep> advance(const GenerationStep& step, const std::vector<int64_t>& sampled, double nowMs);
  // Every prompt has ended.
  bool done() const;

  const std::vector<PromptRequest>& prompts() const { return prompts_; }
  std::vector<GeneratedSequence> sequences() const;  // prompt order
  struct Timing {
    double admittedMs = -1;       // its first step issued
    std::vector<double> tokenMs;  // each token's arrival
  };
  const std::vector<Timing>& timings() const { return timings_; }
  uint64_t promptTokens() const { return promptTokens_; }
  uint64_t generatedTokens() const { return generatedTokens_; }
  uint64_t stepsIssued() const { return static_cast<uint64_t>(next_); }

 private:
  struct Slot {
    bool active = false;
    std::vector<int64_t> sequence;  // per row
    int64_t promptLength = 0, consumed = 0, position = 0;
  };
  std::optional<GenerationStep> fill(uint32_t slot, double nowMs);
  GenerationStep prefillStep(uint32_t slot, bool reset);
  GenerationStep decodeStep(uint32_t slot);
  GenerationStep issue(GenerationStep s);
  bool rowEnded(int64_t sequence) const;

  GenerationConfig c_;
  std::vector<PromptRequest> prompts_;
  std::deque<int64_t> queue_;                 // prompts not yet in a slot
  std::vector<Slot> slots_;
  std::vector<std::vector<int64_t>> tokens_;  // per prompt
  std::vector<std::string> finish_;           // per prompt: "" while running
  std::vector<Timing> timings_;
  int64_t next_ = 0;
  uint64_t promptTokens_ = 0, generatedTokens_ = 0;
};

}  // namespace pipecut::runtime
