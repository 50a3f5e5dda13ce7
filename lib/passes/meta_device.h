#pragma once
// A program exported on the meta device runs on the CPU.
//
// Exporting a 70B model with its weights means materializing it; exporting
// it on the meta device (the model and its example inputs there) takes
// seconds and gives the same graph, but one that names the meta device
// throughout: factory calls carry device=meta (aten.arange(..., device=meta),
// aten.to(..., device=meta)), and every value's tensor metadata says meta.
// Its stages are to run wherever pipecut-run places them, exactly as a CPU
// export's stages do (a CPU export names the CPU, and runtime placement
// moves the whole stage), so this pass rewrites every meta device the graph
// names, in nested bodies too, to the CPU. It leaves the lifted tensors'
// payload entries alone: an external tensor keeps "meta" there, which is
// how its stage file says it holds no bytes (pt2::StoredTensor::external);
// binding weights (weights/binding.h) makes each one a CPU tensor.
#include "ir/ir.h"

namespace pipecut::passes {

// Whether `program` was exported on the meta device: a user input or a
// lifted tensor's metadata names it.
bool namesMetaDevice(const ir::Program& program);

}  // namespace pipecut::passes
