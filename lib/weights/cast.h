#pragma once
// --weights-cast: a checkpoint tensor converted to the dtype the program
// holds it in (a bfloat16 checkpoint for a program exported in float32,
// say). Floating dtypes only (float64, float32, float16, bfloat16); values
// rounded to nearest, ties to even, as torch's Tensor.to rounds them, through
// float32 where torch goes through it (float64 to a 16-bit type). A NaN
// becomes the target's quiet NaN. Torch-free; test_weights checks the bytes
// against torch's own conversion.
#include <cstdint>
#include <string>

#include "pt2/zip_archive.h"
#include "support/dtypes.h"

namespace pipecut::weights {

// Whether castTo converts `from` to `to`.
bool castable(const support::DType& from, const support::DType& to);

// `numel` elements of `from` at `bytes` as `to`'s bytes (little-endian, as
// both files hold them). Call only when castable().
std::string castTo(const support::DType& from, const support::DType& to, pt2::ByteView bytes, uint64_t numel);

}  // namespace pipecut::weights
