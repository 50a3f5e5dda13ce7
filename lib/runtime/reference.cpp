#include "runtime/reference.h"

#include <cstring>
#include <fstream>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "support/error.h"

namespace pipecut::runtime {

namespace {

struct Code {
  const char* name;
  at::ScalarType type;
};
const Code kCodes[] = {{"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16},
                       {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
                       {"U8", at::kByte},    {"BOOL", at::kBool}};

}  // namespace

ReferenceSet readReference(const std::string& path) {
  auto fail = [&](const std::string& where, const std::string& msg) -> void {
    throw Error(ErrorKind::InvalidInput, path, where, msg);
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("", std::string("cannot open: ") + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  if (bytes.size() < 8) fail("", "too short for a safetensors file");
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (headerLen > bytes.size() - 8) fail("header", "header length past the end of the file");
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, headerLen), nullptr, false);
  if (h.is_discarded() || !h.is_object()) fail("header", "not a JSON object");
  const char* data = bytes.data() + 8 + headerLen;
  size_t dataLen = bytes.size() - 8 - headerLen;

  ReferenceSet r;
  std::map<size_t, at::Tensor> ins, outs;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      for (auto m = it.value().begin(); m != it.value().end(); ++m)
        if (m.value().is_string()) r.metadata[m.key()] = m.value().get<std::string>();
      continue;
    }
    const auto& e = it.value();
    std::string dtype = e.value("dtype", "");
    const Code* code = nullptr;
    for (const auto& c : kCodes)
      if (dtype == c.name) code = &c;
    if (!code) fail(it.key(), "unsupported dtype '" + dtype + "'");
    std::vector<int64_t> shape = e.at("shape").get<std::vector<int64_t>>();
    auto off = e.at("data_offsets").get<std::vector<uint64_t>>();
    if (off.size() != 2 || off[0] > off[1] || off[1] > dataLen) fail(it.key(), "data_offsets out of range");
    at::Tensor t = at::empty(shape, at::TensorOptions().dtype(code->type));
    if (static_cast<uint64_t>(t.nbytes()) != off[1] - off[0]) fail(it.key(), "size does not match dtype and shape");
    std::memcpy(t.data_ptr(), data + off[0], off[1] - off[0]);
    std::string key = it.key();
    auto dot = key.find('.');
    std::string kind = key.substr(0, dot);
    size_t idx = std::stoul(key.substr(dot + 1));
    (kind == "input" ? ins : outs)[idx] = t;
  }
  for (auto& [i, t] : ins) r.inputs.push_back(t);
  for (auto& [i, t] : outs) r.outputs.push_back(t);
  return r;
}

void writeSafetensors(const std::string& path, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::vector<at::Tensor> contiguous;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    at::Tensor c = t.detach().to(at::kCPU).contiguous();
    const char* code = nullptr;
    for (const auto& k : kCodes)
      if (k.type == c.scalar_type()) code = k.name;
    if (!code) internalError(path, "dtype without a safetensors code");
    h[name] = {{"dtype", code}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + c.nbytes()}}};
    offset += c.nbytes();
    contiguous.push_back(c);
  }
  std::string header = h.dump();
  while (header.size() % 8) header += ' ';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header;
  for (const auto& c : contiguous) out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
  if (!out) throw Error(ErrorKind::Internal, path, "", "write failed");
}

}  // namespace pipecut::runtime
