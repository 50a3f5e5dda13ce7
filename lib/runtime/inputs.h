#pragma once
// Where a run's user inputs come from, and how a batch becomes micro-batches.
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "manifest/manifest.h"

namespace pipecut::runtime {

// Flat user inputs in manifest order, from: a reference file (.safetensors,
// keys input.<i>), or a torch.save'd tuple / list / dict (keyed by input name)
// / (args, kwargs) pair. Throws pipecut::Error naming the file and input.
std::vector<at::Tensor> loadInputs(const std::string& path, const Manifest& m);

// Inputs drawn from the manifest's dtypes and shapes with a fixed seed: floats
// standard normal, integers uniform in [0, intHigh), bools fair. Dimension 0
// holds `microbatches` micro-batches: of the exported size, or of `batch`
// where that dimension is symbolic (a dynamic batch); other symbolic
// dimensions take `batch` too.
std::vector<at::Tensor> randomInputs(const Manifest& m, uint64_t seed, int64_t batch, int microbatches,
                                     int64_t intHigh);


// Splits each batched input (dimension 0 equal to the batch size) into M equal
// chunks; other inputs are shared by every micro-batch. Checks each chunk
// against the static shapes the stages were exported with.
std::vector<std::vector<at::Tensor>> splitMicrobatches(const std::vector<at::Tensor>& inputs, const Manifest& m,
                                                       int microbatches);

// Concatenates per-micro-batch outputs along dimension 0.
std::vector<at::Tensor> mergeMicrobatches(const std::vector<std::vector<at::Tensor>>& perMicrobatch);

}  // namespace pipecut::runtime
