#pragma once
// A walk over a pickle's opcodes before LibTorch's unpickler sees it. The
// unpickler trusts the stream: a memo index of 2^32 (one corrupt LONG_BINPUT)
// makes it grow its memo to 64 GB, and the process dies of it instead of
// refusing the file. This checks what can make it allocate or read out of
// bounds: every opcode is known, every argument and length fits in the
// stream, and every memo index is below the number of opcodes before it (a
// pickler numbers its memo as it goes). Torch-free; the caller attaches the
// file and record.
#include <optional>
#include <string>
#include <string_view>

namespace pipecut::pt2 {

// What is wrong with `pickle` ("opcode 0xff at byte 12 is unknown"), or
// nullopt when the walk reaches STOP with every opcode well formed.
std::optional<std::string> pickleProblem(std::string_view pickle);

}  // namespace pipecut::pt2
