// checkpoint.json <-> Checkpoint. Torch-free and protobuf-free: plain
// nlohmann JSON, written in one fixed layout and read strictly (unknown or
// missing fields, wrong types and unsafe paths are refused by field path).
#include "manifest/checkpoint.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "support/files.h"
#include "support/sha256.h"
#include "support/staging.h"

namespace pipecut {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

std::string indexed(const std::string& path, const char* field, size_t i) {
  return path + (path.empty() ? "" : ".") + field + "[" + std::to_string(i) + "]";
}


// A stage file lies inside the checkpoint directory: a relative path without
// "." or ".." components or empty ones, and never checkpoint.json itself.
bool isSafeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/' || p.find('\0') != std::string::npos ||
      p == "checkpoint.json")
    return false;
  size_t begin = 0;
  while (begin <= p.size()) {
    size_t end = p.find('/', begin);
    if (end == std::string::npos) end = p.size();
    std::string part = p.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") return false;
    begin = end + 1;
  }
  return true;
}

// Strict field access: each helper names the field's full path when it fails.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw Error(ErrorKind::InvalidInput, file_, where, message);
  }

  // Refuses fields outside `known` (they are typos, or a newer format).
  void onlyFields(const Json& obj, const std::string& at, std::initializer_list<const char*> known) const {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok |= it.key() == k;
      if (!ok) fail(join(at, it.key()), "unknown field");
    }
  }

  const Json& field(const Json& obj, const std::string& at, const char* name) const {
    auto it = obj.find(name);
    if (it == obj.end()) fail(join(at, name), "missing");
    return *it;
  }

  std::string string(const Json& obj, const std::string& at, const char* name) const {
    const Json& v = field(obj, at, name);
    if (!v.is_string()) fail(join(at, name), "expected a string");
    return v.get<std::string>();
  }

  uint64_t unsignedInt(const Json& obj, const std::string& at, const char* name, uint64_t max = UINT64_MAX) const {
    const Json& v = field(obj, at, name);
    if (!v.is_number_unsigned()) fail(join(at, name), "expected an integer >= 0");
    uint64_t n = v.get<uint64_t>();
    if (n > max) fail(join(at, name), std::to_string(n) + " is out of range (at most " + std::to_string(max) + ")");
    return n;
  }

  const Json& array(const Json& obj, const std::string& at, const char* name) const {
    const Json& v = field(obj, at, name);
    if (!v.is_array()) fail(join(at, name), "expected a list");
    return v;
  }

  const Json& object(const Json& obj, const std::string& at, const char* name) const {
    const Json& v = field(obj, at, name);
    if (!v.is_object()) fail(join(at, name), "expected an object");
    return v;
  }

  static std::string join(const std::string& at, const std::string& name) { return at.empty() ? name : at + "." + name; }

 private:
  std::string file_;
};

OrderedJson stageToJson(const CheckpointStage& s) {
  OrderedJson st = OrderedJson::object();
  st["index"] = s.index;
  st["file"] = s.file;
  st["sha256"] = s.sha256;
  st["bytes"] = s.bytes;
  st["tensors"] = s.tensors;
  return st;
}

// One entry of "stages" at `at`, which must be stage `i`.
CheckpointStage stageFromJson(const Reader& r, const Json& sj, const std::string& at, size_t i) {
  if (!sj.is_object()) r.fail(at, "expected an object {index, file, sha256, bytes, tensors}");
  r.onlyFields(sj, at, {"index", "file", "sha256", "bytes", "tensors"});
  CheckpointStage s;
  uint64_t index = r.unsignedInt(sj, at, "index", UINT32_MAX);
  if (index != i) r.fail(at + ".index", std::to_string(index) + ", expected " + std::to_string(i));
  s.index = static_cast<uint32_t>(index);
  s.file = r.string(sj, at, "file");
  if (!isSafeRelativePath(s.file)) r.fail(at + ".file", "'" + s.file + "' is not a path inside the checkpoint directory");
  s.sha256 = r.string(sj, at, "sha256");
  if (!isSha256Hex(s.sha256, /*lowercaseOnly=*/true)) r.fail(at + ".sha256", "expected 64 lowercase hex digits");
  s.bytes = r.unsignedInt(sj, at, "bytes");
  const Json& tensors = r.array(sj, at, "tensors");
  std::set<std::string> seen;
  for (size_t k = 0; k < tensors.size(); ++k) {
    std::string tk = indexed(at, "tensors", k);
    if (!tensors[k].is_string()) r.fail(tk, "expected a tensor name");
    std::string name = tensors[k].get<std::string>();
    // "optimizer/..." keys hold the optimizer's state; a model FQN never holds '/'.
    if (name.empty() || name.find('/') != std::string::npos)
      r.fail(tk, "'" + name + "' is not a tensor FQN (non-empty, no '/')");
    if (!seen.insert(name).second) r.fail(tk, "'" + name + "' is listed twice");
    s.tensors.push_back(std::move(name));
  }
  return s;
}

Json parseJson(const Reader& r, const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    r.fail("", "JSON syntax error at byte " + std::to_string(e.byte));
  } catch (const Json::exception& e) {  // e.g. a number beyond double's range
    r.fail("", std::string("invalid JSON: ") + e.what());
  }
}

}  // namespace

std::string checkpointToJson(const Checkpoint& c) {
  // Fields in the order of the struct (ordered_json keeps insertion order);
  // hyper's keys sorted (std::map). Two-space indentation, a final newline.
  OrderedJson j = OrderedJson::object();
  j["format"] = c.format;
  j["step"] = c.step;
  j["source_sha256"] = c.sourceSha256;
  j["source_directory_sha256"] = c.sourceDirectorySha256;
  j["split_spec"] = c.splitSpec;
  j["optimizer"] = c.optimizer;
  OrderedJson hyper = OrderedJson::object();
  for (const auto& [k, v] : c.hyper) {
    // JSON has no NaN or infinity (nlohmann would write null, which the reader refuses).
    if (!std::isfinite(v)) internalError("hyper." + k, "not a finite number");
    hyper[k] = v;
  }
  j["hyper"] = std::move(hyper);
  OrderedJson stages = OrderedJson::array();
  for (const CheckpointStage& s : c.stages) stages.push_back(stageToJson(s));
  j["stages"] = std::move(stages);
  OrderedJson tied = OrderedJson::array();
  for (const TiedGroup& g : c.tiedGroups) {
    OrderedJson t = OrderedJson::object();
    t["names"] = g.names;
    t["stages"] = g.stages;
    tied.push_back(std::move(t));
  }
  j["tied_groups"] = std::move(tied);
  return j.dump(2) + "\n";
}

Checkpoint checkpointFromJson(const std::string& text, const std::string& file) {
  Reader r(file);
  Json j = parseJson(r, text);
  if (!j.is_object()) r.fail("", "a checkpoint must be a JSON object");
  r.onlyFields(j, "", {"format", "step", "source_sha256", "source_directory_sha256", "split_spec", "optimizer", "hyper", "stages", "tied_groups"});

  Checkpoint c;
  // The format first: a newer writer's file is better refused by its version
  // than by whatever field it renamed.
  c.format = r.string(j, "", "format");
  if (c.format != kCheckpointFormat)
    r.fail("format", "'" + c.format + "' is not a format this pipecut reads (" + kCheckpointFormat + ")");
  c.step = r.unsignedInt(j, "", "step");
  auto sourceHash = [&](const char* field) {  // empty, or 64 hex digits
    std::string h = r.string(j, "", field);
    if (!h.empty() && !isSha256Hex(h, /*lowercaseOnly=*/true)) r.fail(field, "expected 64 lowercase hex digits (or empty)");
    return h;
  };
  c.sourceSha256 = sourceHash("source_sha256");
  // Absent in checkpoints written before splits recorded it.
  if (j.contains("source_directory_sha256")) c.sourceDirectorySha256 = sourceHash("source_directory_sha256");
  c.splitSpec = r.string(j, "", "split_spec");
  c.optimizer = r.string(j, "", "optimizer");
  if (c.optimizer.empty()) r.fail("optimizer", "empty (expected the optimizer's name: sgd, adamw)");

  const Json& hyper = r.object(j, "", "hyper");
  for (auto it = hyper.begin(); it != hyper.end(); ++it) {
    if (!it.value().is_number()) r.fail("hyper." + it.key(), "expected a number");
    c.hyper[it.key()] = it.value().get<double>();
  }

  const Json& stages = r.array(j, "", "stages");
  if (stages.empty()) r.fail("stages", "no stages");
  std::set<std::string> files;
  for (size_t i = 0; i < stages.size(); ++i) {
    std::string at = indexed("", "stages", i);
    CheckpointStage s = stageFromJson(r, stages[i], at, i);
    if (!files.insert(s.file).second) r.fail(at + ".file", "'" + s.file + "' is listed twice");
    c.stages.push_back(std::move(s));
  }

  const Json& tied = r.array(j, "", "tied_groups");
  for (size_t g = 0; g < tied.size(); ++g) {
    std::string at = indexed("", "tied_groups", g);
    const Json& gj = tied[g];
    if (!gj.is_object()) r.fail(at, "expected an object {names, stages}");
    r.onlyFields(gj, at, {"names", "stages"});
    TiedGroup group;
    const Json& names = r.array(gj, at, "names");
    if (names.empty()) r.fail(at + ".names", "no names");
    for (size_t k = 0; k < names.size(); ++k) {
      if (!names[k].is_string() || names[k].get<std::string>().empty())
        r.fail(indexed(at, "names", k), "expected a tensor name");
      group.names.push_back(names[k].get<std::string>());
    }
    const Json& st = r.array(gj, at, "stages");
    for (size_t k = 0; k < st.size(); ++k) {
      if (!st[k].is_number_unsigned() || st[k].get<uint64_t>() >= c.stages.size())
        r.fail(indexed(at, "stages", k), "expected a stage index below " + std::to_string(c.stages.size()));
      group.stages.push_back(static_cast<uint32_t>(st[k].get<uint64_t>()));
    }
    c.tiedGroups.push_back(std::move(group));
  }
  return c;
}

Checkpoint readCheckpoint(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw Error(ErrorKind::InvalidInput, dir, "", "no such checkpoint directory");
  if (!S_ISDIR(st.st_mode)) throw Error(ErrorKind::InvalidInput, dir, "", "not a checkpoint directory");
  std::string path = (dir.empty() || dir.back() == '/' ? dir : dir + "/") + "checkpoint.json";
  return checkpointFromJson(support::readFile(path, "the checkpoint"), path);
}

std::string checkpointStageToJson(const CheckpointStage& s) { return stageToJson(s).dump(); }

CheckpointStage checkpointStageFromJson(const std::string& text, uint32_t index, const std::string& where) {
  Reader r(where);
  return stageFromJson(r, parseJson(r, text), indexed("", "stages", index), index);
}

std::string checkpointDirectoryInTheWay(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_empty(dir, ec) && !ec) return "";  // nothing to lose
  Checkpoint c;
  try {
    c = readCheckpoint(dir);
  } catch (const Error&) {
    return "is " + support::describeDirectory(dir) + ", not a checkpoint pipecut wrote (no readable checkpoint.json)";
  }
  std::vector<std::string> listed = {"checkpoint.json"};
  for (const auto& s : c.stages) listed.push_back(s.file);
  return support::unlistedEntries(dir, listed, "its checkpoint.json");
}

}  // namespace pipecut
