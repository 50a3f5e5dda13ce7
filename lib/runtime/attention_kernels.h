#pragma once
// Which attention kernels a TorchScript stage reaches on its device.
//
// pipecut's grouped-query-attention pass (passes/grouped_query_attention.h)
// hands attention the narrow key and value with enable_gqa=True, which
// LibTorch's CPU flash kernel reads in place, bitwise as the widened call.
// On CUDA, though, a call with an attention mask and enable_gqa is one that
// neither flash attention (no masks) nor, in some releases, the
// memory-efficient kernel (no unequal head counts) accepts: it would fall to
// the math kernel, unfused, with the scores of the whole sequence in memory,
// where the exported, widened call ran fused. So on a GPU such a call gets
// its key and value widened again, by repeat_interleave(x, Hq / Hkv, -3),
// which is enable_gqa's own definition: the kernel choice the model was
// exported with, and the same values. Calls without a mask keep enable_gqa
// (flash attention takes it natively).
#include <cstddef>

#include <torch/script.h>

namespace pipecut::runtime {

// Rewrites every method of `m` (and of its submodules): returns how many
// attention calls it widened.
size_t widenMaskedGroupedAttention(torch::jit::Module& m);

}  // namespace pipecut::runtime
