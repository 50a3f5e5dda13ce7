#include "support/safetensors.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "support/dtypes.h"
#include "support/error.h"
#include "support/files.h"
#include "support/little_endian.h"

namespace pipecut::support {

namespace {
// The format's own bound on the header (safetensors' MAX_HEADER_SIZE): a
// corrupt length never makes us allocate gigabytes.
constexpr uint64_t kMaxHeader = 100u << 20;
}  // namespace

int safetensorsItemSize(std::string_view code) {
  const DType* d = dtypeFromSafetensors(code);
  return d ? d->itemSize : 0;
}

std::string safetensorsInTheWay(const std::string& path, const std::string& format) {
  const std::string notOurs = "is a file pipecut did not write (no safetensors metadata format '" + format + "')";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return notOurs;
  unsigned char len[8];
  std::string header;
  bool ok = std::fread(len, 1, 8, f) == 8;
  uint64_t n = ok ? littleEndian(len, 8) : 0;
  if (ok && n <= kMaxHeader) {
    header.resize(n);
    ok = std::fread(header.data(), 1, n, f) == n;
  }
  std::fclose(f);
  if (!ok || n > kMaxHeader) return notOurs;
  auto h = nlohmann::json::parse(header, nullptr, false);
  if (h.is_discarded() || !h.is_object()) return notOurs;
  auto m = h.find("__metadata__");
  if (m == h.end() || !m->is_object()) return notOurs;
  auto fmt = m->find("format");
  return fmt != m->end() && fmt->is_string() && fmt->get<std::string>() == format ? "" : notOurs;
}

SafetensorsFile parseSafetensors(std::string_view bytes) {
  using Json = nlohmann::json;
  if (bytes.size() < 8) invalidInput("", "too short for a safetensors file (" + std::to_string(bytes.size()) + " bytes)");
  const uint64_t headerLen = littleEndian(bytes.data(), 8);
  if (headerLen > kMaxHeader) invalidInput("header", "header length " + std::to_string(headerLen) + " exceeds 100 MiB");
  if (headerLen > bytes.size() - 8)
    invalidInput("header", "header length " + std::to_string(headerLen) + " runs past the end of the file");
  Json h = Json::parse(bytes.substr(8, headerLen), nullptr, false);
  if (h.is_discarded() || !h.is_object()) invalidInput("header", "not a JSON object");

  SafetensorsFile f;
  f.dataOffset = 8 + headerLen;
  const uint64_t dataLen = bytes.size() - f.dataOffset;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& key = it.key();
    const Json& e = it.value();
    if (key == "__metadata__") {
      if (!e.is_object()) invalidInput(key, "expected an object of strings");
      for (auto m = e.begin(); m != e.end(); ++m) {
        if (!m.value().is_string()) invalidInput(key + "." + m.key(), "expected a string");
        f.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!e.is_object()) invalidInput(key, "expected an object with dtype, shape and data_offsets");
    SafetensorsEntry t;
    t.key = key;
    auto dtype = e.find("dtype");
    if (dtype == e.end() || !dtype->is_string()) invalidInput(key + ".dtype", "expected a string");
    t.dtype = dtype->get<std::string>();
    t.itemSize = safetensorsItemSize(t.dtype);
    if (!t.itemSize) invalidInput(key + ".dtype", "unsupported dtype '" + t.dtype + "'");
    auto shape = e.find("shape");
    if (shape == e.end() || !shape->is_array()) invalidInput(key + ".shape", "expected a list of sizes");
    unsigned __int128 numel = 1;
    for (size_t d = 0; d < shape->size(); ++d) {
      const Json& s = (*shape)[d];
      std::string at = key + ".shape[" + std::to_string(d) + "]";
      if (!s.is_number_integer() || (s.is_number_unsigned() && s.get<uint64_t>() > INT64_MAX) || s.get<int64_t>() < 0)
        invalidInput(at, "expected a size >= 0");
      t.shape.push_back(s.get<int64_t>());
      numel *= static_cast<uint64_t>(t.shape.back());
      if (numel > dataLen) numel = static_cast<unsigned __int128>(dataLen) + 1;  // too big either way; no overflow
    }
    auto off = e.find("data_offsets");
    if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      invalidInput(key + ".data_offsets", "expected [begin, end]");
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end || t.end > dataLen)
      invalidInput(key + ".data_offsets", "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                                              "] is outside the data section of " + std::to_string(dataLen) + " bytes");
    if (numel * static_cast<unsigned>(t.itemSize) != t.end - t.begin)
      invalidInput(key + ".data_offsets", "spans " + std::to_string(t.end - t.begin) + " bytes; dtype and shape need " +
                                              (numel > dataLen ? std::string("more than the file holds")
                                                               : std::to_string(static_cast<uint64_t>(numel) * t.itemSize)));
    f.tensors.push_back(std::move(t));
  }
  // No two tensors' bytes overlap (the format's own rule): a file that says
  // otherwise would have one write show through another.
  std::vector<const SafetensorsEntry*> byOffset;
  for (const auto& t : f.tensors)
    if (t.end > t.begin) byOffset.push_back(&t);
  std::sort(byOffset.begin(), byOffset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->begin < byOffset[i - 1]->end)
      invalidInput(byOffset[i]->key + ".data_offsets",
                   "[" + std::to_string(byOffset[i]->begin) + ", " + std::to_string(byOffset[i]->end) + "] overlaps '" +
                       byOffset[i - 1]->key + "' at [" + std::to_string(byOffset[i - 1]->begin) + ", " +
                       std::to_string(byOffset[i - 1]->end) + "]");
  return f;
}

std::string writeSafetensors(const std::string& path, std::vector<SafetensorsTensorRef> tensors,
                             const std::map<std::string, std::string>& metadata) {
  using Json = nlohmann::json;
  std::sort(tensors.begin(), tensors.end(),
            [](const SafetensorsTensorRef& a, const SafetensorsTensorRef& b) { return a.key < b.key; });
  Json h = Json::object();  // std::map underneath: keys sorted
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensorRef& t = tensors[i];
    if (t.key == "__metadata__" || (i > 0 && tensors[i - 1].key == t.key))
      throw Error(ErrorKind::Internal, path, t.key, t.key == "__metadata__" ? "reserved key" : "key given twice");
    int itemSize = safetensorsItemSize(t.dtype);
    if (!itemSize) throw Error(ErrorKind::Internal, path, t.key + ".dtype", "unsupported dtype '" + t.dtype + "'");
    unsigned __int128 need = static_cast<unsigned>(itemSize);
    for (int64_t d : t.shape) {
      if (d < 0) throw Error(ErrorKind::Internal, path, t.key + ".shape", "negative size " + std::to_string(d));
      need *= static_cast<uint64_t>(d);
      if (need > UINT64_MAX) need = static_cast<unsigned __int128>(UINT64_MAX);  // disagrees below either way
    }
    if (need != t.bytes || (t.bytes > 0 && !t.data))
      throw Error(ErrorKind::Internal, path, t.key,
                  std::to_string(t.bytes) + " bytes given; dtype and shape need " +
                      std::to_string(static_cast<uint64_t>(need)));
    h[t.key] = Json{{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", Json::array({offset, offset + t.bytes})}};
    offset += t.bytes;
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>((static_cast<uint64_t>(header.size()) >> (8 * i)) & 0xff);
  HashingWriter out(path);
  out.write(length, sizeof length);
  out.write(header.data(), header.size());
  for (const SafetensorsTensorRef& t : tensors)
    if (t.bytes) out.write(t.data, static_cast<size_t>(t.bytes));
  return out.finish();
}

}  // namespace pipecut::support
