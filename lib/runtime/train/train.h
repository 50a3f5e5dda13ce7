#pragma once
// pipecut-run --train: trains a split whose program ends in its loss (the
// single user output is a scalar), one optimizer per stage, micro-batched
// under a training schedule (runtime/train/schedule.h), in one process or
// across processes over c10d. Torch-free header.
#include "runtime/options.h"
#include "runtime/report.h"

namespace pipecut::runtime {

// Throws pipecut::Error: InvalidInput for a program that is not a loss, bad
// data, options or checkpoints; RankFailed when a multi-process run stops
// (a failure on any rank ends every rank with exit 5, as for inference).
TrainReport runTraining(const TrainOptions& options);

}  // namespace pipecut::runtime
