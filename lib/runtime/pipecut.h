#pragma once
// libpipecut's API in one include (installed as <pipecut/pipecut.h>; see
// docs/embedding.md). Every header below is torch-free: a program that uses
// them needs neither torch's headers nor its libraries to build.
//   openSplit       runtime/split_info.h  a split directory, checked, as plain data
//   runInference    runtime/inference.h   micro-batches through the stages
//   runTraining     runtime/train/train.h       optimizer steps
//   runGeneration   runtime/generate/generate.h    token-by-token decoding
//   the options     runtime/options.h     and the reports: runtime/report.h
//   pipecut::Error  support/error.h       what every call throws, with its exit code
#include "runtime/generate/generate.h"
#include "runtime/inference.h"
#include "runtime/options.h"
#include "runtime/report.h"
#include "runtime/split_info.h"
#include "runtime/train/train.h"
#include "support/error.h"
