#include "weights/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "support/safetensors.h"

namespace pipecut::weights {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexSuffix = ".index.json";
constexpr const char* kDirIndex = "model.safetensors.index.json";
constexpr const char* kDirFile = "model.safetensors";
// An index lists names and shard files: megabytes at most, even at 10^5
// tensors. A larger one is not an index.
constexpr uint64_t kMaxIndex = 256u << 20;

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A shard's name as an index gives it: a file beside the index, nothing else.
bool plainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

uint64_t CheckpointTensor::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::string CheckpointTensor::shapeStr() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Checkpoint Checkpoint::open(const std::vector<std::string>& sources) {
  Checkpoint c;
  for (const std::string& s : sources) c.add(s);
  return c;
}

const CheckpointTensor* Checkpoint::find(std::string_view name) const {
  auto it = byName_.find(std::string(name));
  return it == byName_.end() ? nullptr : &tensors_[it->second];
}

void Checkpoint::add(const std::string& source) {
  const std::string kind = support::notARegularFile(source);
  std::string path = source;
  if (kind == "a directory") {
    // transformers' save_pretrained: the index when sharded, else the one file.
    const fs::path dir(source);
    if (support::notARegularFile((dir / kDirIndex).string()).empty()) path = (dir / kDirIndex).string();
    else if (support::notARegularFile((dir / kDirFile).string()).empty()) path = (dir / kDirFile).string();
    else
      throw Error(ErrorKind::InvalidInput, source, "",
                  std::string("is a directory holding neither ") + kDirIndex + " nor " + kDirFile +
                      " (a --weights source is a .safetensors file, a *.safetensors.index.json, or a directory "
                      "holding either)");
  } else if (!kind.empty() && kind.rfind("cannot", 0) != 0) {
    throw Error(ErrorKind::InvalidInput, source, "",
                "is " + kind + ", expected a .safetensors file, a *.safetensors.index.json or a checkpoint directory");
  }
  if (!endsWith(path, kIndexSuffix)) {
    addFile(source, path, nullptr, "");
    return;
  }
  auto index = support::MappedFile::open(path, "a safetensors index (JSON)");
  if (index->size() > kMaxIndex)
    throw Error(ErrorKind::InvalidInput, path, "", "is " + std::to_string(index->size()) +
                                                       " bytes; an index of shards is at most 256 MiB");
  const std::string_view text(reinterpret_cast<const char*>(index->data()), static_cast<size_t>(index->size()));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(ErrorKind::InvalidInput, path, "", "not a JSON object (expected {\"weight_map\": {name: shard}})");
  auto map = j.find("weight_map");
  if (map == j.end() || !map->is_object())
    throw Error(ErrorKind::InvalidInput, path, "weight_map", "expected an object of tensor name -> shard file");
  // Shards in name order, each opened once, with the names it must hold.
  std::map<std::string, std::vector<std::string>> byShard;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it.value().is_string())
      throw Error(ErrorKind::InvalidInput, path, "weight_map." + it.key(), "expected a shard file name");
    const std::string shard = it.value().get<std::string>();
    if (!plainFileName(shard))
      throw Error(ErrorKind::InvalidInput, path, "weight_map." + it.key(),
                  "names shard '" + shard + "'; a shard is a file beside the index (no '/')");
    byShard[shard].push_back(it.key());
  }
  const fs::path dir = fs::path(path).parent_path();
  for (const auto& [shard, names] : byShard) {
    const std::string shardPath = (dir / shard).string();
    const std::string missing = support::notARegularFile(shardPath);
    if (!missing.empty())
      throw Error(ErrorKind::InvalidInput, path, "weight_map." + names.front(),
                  "is in shard '" + shard + "', which " +
                      (missing.rfind("cannot", 0) == 0 ? missing : "is " + missing + ", not a safetensors file"));
    addFile(source, shardPath, &names, path);
  }
}

void Checkpoint::addFile(const std::string& source, const std::string& path, const std::vector<std::string>* only,
                         const std::string& index) {
  auto mapping = support::MappedFile::open(path, "a .safetensors file");
  support::SafetensorsFile parsed;
  try {
    parsed = support::parseSafetensors(
        std::string_view(reinterpret_cast<const char*>(mapping->data()), static_cast<size_t>(mapping->size())));
  } catch (const Error& e) {
    e.rethrowWithFile(path);
  }
  const auto file = static_cast<uint32_t>(files_.size());
  files_.push_back(CheckpointFile{path, source, mapping});
  auto take = [&](const support::SafetensorsEntry& e) {
    CheckpointTensor t;
    t.name = e.key;
    t.dtype = support::dtypeFromSafetensors(e.dtype);  // the parser knows every code it accepted
    t.shape = e.shape;
    t.bytes = pt2::ByteView{mapping->data() + parsed.dataOffset + e.begin, static_cast<size_t>(e.end - e.begin)};
    t.file = file;
    auto [it, fresh] = byName_.try_emplace(t.name, tensors_.size());
    if (!fresh)
      throw Error(ErrorKind::InvalidInput, path, t.name,
                  "is also in " + files_[tensors_[it->second].file].path +
                      "; each tensor must come from one --weights source");
    tensors_.push_back(std::move(t));
  };
  if (!only) {
    for (const auto& e : parsed.tensors) take(e);
    return;
  }
  // parsed.tensors is in key order.
  for (const std::string& name : *only) {
    auto it = std::lower_bound(parsed.tensors.begin(), parsed.tensors.end(), name,
                               [](const support::SafetensorsEntry& e, const std::string& n) { return e.key < n; });
    if (it == parsed.tensors.end() || it->key != name)
      throw Error(ErrorKind::InvalidInput, index, "weight_map." + name,
                  "is in shard '" + fs::path(path).filename().string() + "', which holds no such tensor");
    take(*it);
  }
}

}  // namespace pipecut::weights
