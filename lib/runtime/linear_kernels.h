#pragma once
// A CPU stage's float32 linear layers through oneDNN (runtime/cpu_matmul.h
// says when and why).
//
// ATen runs a float32 aten::linear through its BLAS, and the pip wheel's
// BLAS is MKL, which chooses its code path by CPU vendor: on an AMD EPYC
// with AVX-512 (Zen 5) it runs its AVX2 kernels, at 70-105 GFLOP/s on one
// core where oneDNN, bundled in the same LibTorch and choosing by
// instruction set, runs the same products at 190-245 (bench/gemm_ceiling.py
// prints both). mkldnn::_linear_pointwise is the call Inductor itself emits
// for oneDNN linear layers; it takes the weight as it lies (no packed copy,
// so no second copy of the weights) and any input rank, as aten::linear does.
//
// Only what is known at load time is rewritten: a linear layer, as
// aten::linear(x, W, b) or as core ATen writes one (aten::mm(x, W^T),
// aten::addmm(b, x, W^T) with beta and alpha 1, W^T by aten::t, permute or
// transpose), whose weight W is a module tensor (a prim::GetAttr chain from
// the method's self) that is float32, 2-D, contiguous, on the CPU and has
// no empty dimension (oneDNN refuses an empty reduction), and whose bias is
// absent or such a 1-D tensor of one value per output. A computed weight
// or bias keeps ATen's call. The rewritten call
// has no backward: only modules that run without autograd (inference,
// generation, the profile) are rewritten, never a training stage.
#include <cstddef>

#include <torch/script.h>

namespace pipecut::runtime {

// Whether this LibTorch has oneDNN and lets it run (at::hasMKLDNN(), and
// torch.backends.mkldnn not switched off).
bool oneDnnAvailable();

// Rewrites every method of `m` (and of its submodules) in place; returns how
// many linear calls it rewrote (0 when oneDNN is not available). Calls it
// cannot prove eligible are left as they are.
size_t routeLinearsToOneDnn(torch::jit::Module& m);

// The same for one method's graph, whose input 0 is `self`. Each rewritten
// call becomes one node in the call's place, and the constant arguments
// they share are made once, before the graph's first node: every other
// node keeps its place relative to the others (--profile's node-by-node
// interpreter shifts its node ranges by what was added at the front).
size_t routeLinearsToOneDnn(torch::jit::Graph& graph, const c10::IValue& self);

}  // namespace pipecut::runtime
