#pragma once
// Tensors to and from safetensors files (8-byte little-endian header length,
// JSON header, raw data; support/safetensors.h parses and writes the layout):
// references and inputs (what scripts/fixtures writes for every fixture,
// keys input.<i> and output.<j>), --output, checkpoints. Readable without Python.
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipecut::runtime {

struct ReferenceSet {
  std::vector<at::Tensor> inputs;   // input.0, input.1, ...
  std::vector<at::Tensor> outputs;  // output.0, ...
  std::map<std::string, std::string> metadata;
};

// Every tensor of a safetensors file, in key order. Throws pipecut::Error
// (InvalidInput) naming the file and key.
std::vector<std::pair<std::string, at::Tensor>> readSafetensors(const std::string& path,
                                                                std::map<std::string, std::string>* metadata = nullptr);
// Throws pipecut::Error (InvalidInput) naming the file and key.
ReferenceSet readReference(const std::string& path);
// Host copies of `tensors` through support::writeSafetensors (canonical
// layout, tensors in key order); returns the file's SHA-256, hashed on the way
// out. Throws pipecut::Error (Internal) naming the file.
std::string writeSafetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata);

}  // namespace pipecut::runtime
