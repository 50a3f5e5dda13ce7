#pragma once
// Stage graphs and schedule kinds the training-schedule tests sweep over.
#include <cstdint>
#include <vector>

#include "runtime/train/schedule.h"

namespace pipecut::test {

// producers[s]: the stages s reads from.
using Producers = std::vector<std::vector<uint32_t>>;

inline Producers chainOf(uint32_t stages) {
  Producers p(stages);
  for (uint32_t s = 1; s < stages; ++s) p[s].push_back(s - 1);
  return p;
}

// The sweeps' three graphs: 0 a chain; 1 every stage also reading the one
// two back; 2 stage 0 feeding every stage, as an embedding might.
inline Producers graphOf(uint32_t stages, int graph) {
  Producers p = chainOf(stages);
  if (graph == 1)
    for (uint32_t s = 2; s < stages; ++s) p[s].insert(p[s].begin(), s - 2);
  if (graph == 2)
    for (uint32_t s = 2; s < stages; ++s) p[s].push_back(0);
  return p;
}

inline constexpr runtime::TrainScheduleKind kAllKinds[] = {
    runtime::TrainScheduleKind::GPipe, runtime::TrainScheduleKind::OneFOneB,
    runtime::TrainScheduleKind::Interleaved1F1B, runtime::TrainScheduleKind::ZB1P};

// Whether planTraining accepts `kind` on this shape: interleaved 1F1B needs
// a multiple of the ranks, at least 2 stages per rank.
inline bool plannable(runtime::TrainScheduleKind kind, uint32_t stages, uint32_t ranks) {
  return kind != runtime::TrainScheduleKind::Interleaved1F1B || (stages % ranks == 0 && stages / ranks >= 2);
}

}  // namespace pipecut::test
