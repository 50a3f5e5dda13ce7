#pragma once
// Grouped-query attention without the copies. transformers' `repeat_kv`
// (Llama, Qwen2, Mistral, ... whenever key/value heads are fewer than query
// heads) widens the key and the value before attention:
//
//   x[:, :, None].expand(b, kv, n, s, d).reshape(b, kv * n, s, d)
//
// and export records it as unsqueeze(x, 2) -> expand -> reshape. The reshape
// of an expanded tensor copies: at a decode step that is the whole KV cache,
// n times over, twice a layer (hidden 768, 12/4 heads, 128 rows, cache 64:
// 50 MB a layer). `scaled_dot_product_attention(..., enable_gqa=True)`
// computes the same thing from the narrow key and value (query head h reads
// key/value head h / n, which is what that expand and reshape lay out), and
// LibTorch's attention kernels read the narrow tensors in place (CPU flash
// attention and CUDA's flash, memory-efficient and cuDNN kernels accept GQA;
// on CPU the outputs are bitwise those of the widened call).
//
// So where an attention call's key and value are both such a widening of
// tensors with the same heads, and the query has kv * n heads, the pass
// passes the narrow tensors and sets enable_gqa. dead-code then drops the
// widening when nothing else reads it. Calls with dropout are left as they
// are (the random mask would be drawn by another kernel).
#include <cstddef>

#include "ir/ir.h"

namespace pipecut::passes {

inline constexpr const char* kAttentionTarget = "torch.ops.aten.scaled_dot_product_attention.default";

// Returns how many attention calls now read the narrow key and value (in
// nested bodies too).
size_t useGroupedQueryAttention(ir::Program& p);

}  // namespace pipecut::passes
