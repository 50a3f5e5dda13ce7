#include "runtime/tensor_io.h"

#include <cstring>
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "emit/dtypes.h"
#include "support/error.h"
#include "support/safetensors.h"

namespace pipecut::runtime {

std::vector<std::pair<std::string, at::Tensor>> readSafetensors(const std::string& path,
                                                                std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot open: ") + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  support::SafetensorsFile f;
  try {
    f = support::parseSafetensors(bytes);
  } catch (const Error& e) {
    e.rethrowWithFile(path);
  }
  if (metadata) *metadata = f.metadata;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& e : f.tensors) {
    const std::optional<at::ScalarType> type = emit::scalarTypeFromSafetensors(e.dtype);
    if (!type) throw Error(ErrorKind::InvalidInput, path, e.key + ".dtype", "unsupported dtype '" + e.dtype + "'");
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(*type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), bytes.data() + f.dataOffset + e.begin, e.end - e.begin);
    out.emplace_back(e.key, t);
  }
  return out;
}

ReferenceSet readReference(const std::string& path) {
  auto fail = [&](const std::string& where, const std::string& msg) -> void {
    throw Error(ErrorKind::InvalidInput, path, where, msg);
  };
  ReferenceSet r;
  std::map<uint64_t, at::Tensor> ins, outs;
  for (const auto& [key, t] : readSafetensors(path, &r.metadata)) {
    // Keys are input.<i> and output.<j>, i and j plain decimal indices.
    auto dot = key.find('.');
    std::string kind = key.substr(0, dot), index = dot == std::string::npos ? "" : key.substr(dot + 1);
    bool decimal = !index.empty() && index.size() <= 9 && index.find_first_not_of("0123456789") == std::string::npos &&
                   (index == "0" || index[0] != '0');
    if ((kind != "input" && kind != "output") || !decimal)
      fail(key, "unexpected key (expected input.<i> or output.<j>)");
    (kind == "input" ? ins : outs)[std::stoull(index)] = t;
  }
  auto ordered = [&](const std::map<uint64_t, at::Tensor>& byIndex, const char* kind, std::vector<at::Tensor>& out) {
    for (const auto& [i, t] : byIndex) {
      if (i != out.size())
        fail(std::string(kind) + "." + std::to_string(out.size()),
             "missing (the file has " + std::string(kind) + "." + std::to_string(i) + ")");
      out.push_back(t);
    }
  };
  ordered(ins, "input", r.inputs);
  ordered(outs, "output", r.outputs);
  return r;
}

std::string writeSafetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  // Host copies stay alive until the torch-free writer has written them.
  std::vector<at::Tensor> host;
  std::vector<support::SafetensorsTensorRef> refs;
  host.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    at::Tensor c = host.emplace_back(t.detach().to(at::kCPU).contiguous());
    const support::DType* d = emit::fromC10(c.scalar_type());
    const char* code = d ? d->safetensors : "";
    if (!*code) internalError(path, "'" + name + "' has a dtype without a safetensors code");
    refs.push_back({name, code, c.sizes().vec(), static_cast<const uint8_t*>(c.data_ptr()),
                    static_cast<uint64_t>(c.nbytes())});
  }
  return support::writeSafetensors(path, std::move(refs), metadata);
}

}  // namespace pipecut::runtime
