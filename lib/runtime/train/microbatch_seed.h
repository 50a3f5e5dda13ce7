#pragma once
// The random seed of one micro-batch's forward in compiled training: the
// "rng:0" input of a stage's training programs (runtime/train/compiled_stage.h,
// scripts/train_compile.py's SeededRandom), from which every random op of
// the stage (dropout) draws, in F and again where a backward program
// recomputes it. A pure function of (--seed, step, stage, micro-batch):
// the draws do not depend on which thread or rank runs the stage, on the
// schedule, or on whether the run resumed from a checkpoint (the step is
// the global one, counted from the first step of the first run).
#include <cstdint>
#include <initializer_list>

namespace pipecut::runtime {

// Only the low 32 bits are read by the programs; the value is below 2^32.
inline int64_t microbatchSeed(uint64_t seed, uint64_t step, uint32_t stage, uint32_t microbatch) {
  uint64_t x = seed;
  // splitmix64's finalizer after each word: neighbouring steps, stages and
  // micro-batches give unrelated seeds.
  for (uint64_t word : {step, static_cast<uint64_t>(stage), static_cast<uint64_t>(microbatch)}) {
    x ^= word + 0x9E3779B97F4A7C15ull + (x << 6) + (x >> 2);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
  }
  return static_cast<int64_t>(x >> 32);
}

}  // namespace pipecut::runtime
