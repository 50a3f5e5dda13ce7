#pragma once
// pipecut-run's inference: loads a split directory's stages onto devices and
// streams micro-batches through them, one worker thread per stage, in one
// process or across processes (c10d Gloo/NCCL). Torch-free header.
#include "runtime/options.h"
#include "runtime/report.h"

namespace pipecut::runtime {

// Throws pipecut::Error: Usage for counts out of range; InvalidInput for bad
// directories, inputs or options and for an operator failing in a stage;
// Environment for what the OS refuses; RankFailed when a multi-process run
// stops (a failure on any rank ends every rank: DistContext::abort).
RunReport runInference(const InferenceOptions& options);

}  // namespace pipecut::runtime
