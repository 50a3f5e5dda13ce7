// libFuzzer entry point for one target, picked at compile time:
// -DPIPECUT_FUZZ_TARGET=program_json (see targets.h).
#include "targets.h"

#ifndef PIPECUT_FUZZ_TARGET
#error "define PIPECUT_FUZZ_TARGET to one of the targets in targets.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return pipecut::fuzz::PIPECUT_FUZZ_TARGET(data, size);
}
