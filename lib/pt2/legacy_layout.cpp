#include "pt2/legacy_layout.h"

#include "emit/libtorch_compat.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/jit/serialization/pickle.h>

#include "ir/ir.h"
#include "pt2/pickle_check.h"
#include "support/error.h"
#include "support/dtypes.h"

namespace pipecut::pt2 {

namespace {

using Json = nlohmann::json;
using Records = std::map<std::string, ArchiveReader::MemoryRecord>;

ArchiveReader::MemoryRecord textRecord(std::string text) {
  auto owned = std::make_shared<const std::string>(std::move(text));
  return {ByteView{reinterpret_cast<const uint8_t*>(owned->data()), owned->size()}, owned};
}

// A record of the source archive, shared rather than copied.
ArchiveReader::MemoryRecord sourceRecord(const std::shared_ptr<const ArchiveReader>& a, const std::string& name) {
  return {a->bytes(name), a, a->origin(name)};
}

// The parameter names the program's signature lifts: the payload marks them
// (torch's loader makes nn.Parameters of them).
std::set<std::string> parameterNames(const ArchiveReader& a, const std::string& programRecord) {
  Json j = Json::parse(a.bytes(programRecord).str(), nullptr, false);
  if (j.is_discarded()) throw Error(ErrorKind::InvalidInput, a.path(), programRecord, "invalid JSON");
  std::set<std::string> names;
  const Json* specs = nullptr;
  if (j.contains("graph_module") && j["graph_module"].contains("signature"))
    specs = &j["graph_module"]["signature"]["input_specs"];
  if (!specs || !specs->is_array()) return names;
  for (const auto& s : *specs)
    if (s.is_object() && s.contains("parameter") && s["parameter"].is_object())
      names.insert(s["parameter"].value("parameter_name", std::string()));
  return names;
}

Json tensorMeta(const at::Tensor& t, const std::string& file, const std::string& where) {
  std::string name = emit::compat::dtypeName(t.scalar_type());
  const support::DType* d = support::dtypeFromTorchName(name);
  if (!d) throw Error(ErrorKind::InvalidInput, file, where, "dtype " + name + " has no .pt2 schema code");
  Json sizes = Json::array(), strides = Json::array();
  for (int64_t s : t.sizes()) sizes.push_back({{"as_int", s}});
  for (int64_t s : t.strides()) strides.push_back({{"as_int", s}});
  return Json{{"dtype", d->code},
              {"sizes", sizes},
              {"requires_grad", t.requires_grad()},
              {"device", {{"type", "cpu"}, {"index", nullptr}}},
              {"strides", strides},
              {"storage_offset", {{"as_int", t.storage_offset()}}},
              {"layout", 7}};
}

// The bytes of a torch.save file, for torch's zip reader, without a copy.
class MemoryReadAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit MemoryReadAdapter(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - static_cast<size_t>(pos));
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::string_view bytes_;
};

// LibTorch's unpickler trusts its input (pt2/pickle_check.h): the pickle
// inside a torch.save file is walked first.
std::optional<std::string> savedFileProblem(std::string_view saved) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(std::make_shared<MemoryReadAdapter>(saved));
    if (!reader.hasRecord("data.pkl")) return "no data.pkl in it: not a torch.save file";
    auto [data, size] = reader.getRecord("data.pkl");
    return pickleProblem(std::string_view(static_cast<const char*>(data.get()), size));
  } catch (const std::exception& e) {
    return "not a torch.save zip: " + firstLine(e.what());
  }
}

// Unpickles `record` (a name -> tensor dictionary saved with torch.save) into
// raw storage records under `dir` plus their payload config, as torch >= 2.9
// writes them: one record per storage and dtype, so tied tensors stay tied.
void convertPickle(const ArchiveReader& a, const std::string& record, const std::string& dir,
                   const std::string& configName, const char* prefix, const std::set<std::string>& params,
                   Records& out) {
  auto fail = [&](const std::string& msg) { throw Error(ErrorKind::InvalidInput, a.path(), record, msg); };
  if (auto problem = savedFileProblem(a.bytes(record).str())) fail("unreadable torch.save pickle: " + *problem);
  c10::IValue v;
  try {
    v = torch::jit::pickle_load_obj(a.bytes(record).str());
  } catch (const std::exception& e) {
    fail("unreadable torch.save pickle: " + firstLine(e.what()));
  }
  if (!v.isGenericDict()) fail("expected a dictionary of tensors, found " + v.tagKind());
  Json config = Json::object();
  std::map<std::pair<const void*, int>, std::string> storages;
  std::map<std::string, at::Tensor> byName;
  for (const auto& entry : v.toGenericDict()) {
    if (!entry.key().isString()) fail("a key is " + entry.key().tagKind() + ", expected a name");
    std::string name = entry.key().toStringRef();
    if (!entry.value().isTensor())
      fail("'" + name + "' is " + entry.value().tagKind() + "; pipecut reads only tensors from older layouts");
    byName.emplace(name, entry.value().toTensor());
  }
  for (const auto& [name, t] : byName) {  // by name: record numbering does not depend on the pickle's order
    if (!t.device().is_cpu() || t.layout() != c10::kStrided)
      fail("'" + name + "' is not a dense CPU tensor; re-save the program with torch >= 2.9");
    auto key = std::make_pair(t.storage().data(), static_cast<int>(t.scalar_type()));
    auto it = storages.find(key);
    if (it == storages.end()) {
      std::string rec = prefix + std::to_string(storages.size());
      it = storages.emplace(key, rec).first;
      c10::Storage s = t.storage();
      auto owner = std::make_shared<const c10::Storage>(s);
      out[dir + rec] = {ByteView{static_cast<const uint8_t*>(s.data()), s.nbytes()}, owner, record};
    }
    config[name] = Json{{"path_name", it->second},
                        {"is_param", params.count(name) > 0},
                        {"use_pickle", false},
                        {"tensor_meta", tensorMeta(t, a.path(), record + ": " + name)}};
  }
  std::string text;
  try {
    text = Json{{"config", config}}.dump();
  } catch (const Json::type_error&) {
    fail("a tensor name in it is not valid UTF-8");
  }
  out[dir + configName] = textRecord(std::move(text));
  out[dir + configName].origin = record;
}

}  // namespace

std::shared_ptr<const ArchiveReader> upgradeLegacyLayout(std::shared_ptr<const ArchiveReader> a) {
  const std::string w = "data/weights/", c = "data/constants/";
  Records out;
  if (a->has("serialized_exported_program.json")) {
    // torch <= 2.7: rename into the current layout, program "model".
    const std::string program = "serialized_exported_program.json";
    auto params = parameterNames(*a, program);
    out["archive_format"] = textRecord("pt2");
    out["archive_version"] = textRecord("0");
    out["models/model.json"] = sourceRecord(a, program);
    if (a->has("serialized_state_dict.pt"))
      convertPickle(*a, "serialized_state_dict.pt", w, "model_weights_config.json", "weight_", params, out);
    if (a->has("serialized_constants.pt"))
      convertPickle(*a, "serialized_constants.pt", c, "model_constants_config.json", "tensor_", params, out);
    if (a->has("serialized_example_inputs.pt"))
      out["data/sample_inputs/model.pt"] = sourceRecord(a, "serialized_example_inputs.pt");
    for (const auto& r : a->records())
      if (r.rfind("extra_files/", 0) == 0) out["extra/" + r.substr(12)] = sourceRecord(a, r);
    return ArchiveReader::fromMemory(a->path(), std::move(out));
  }
  // torch 2.8: pickled payloads inside the PT2 archive, for each program.
  bool pickled = false;
  std::map<std::string, std::set<std::string>> paramsOf;  // program record -> its parameters, read once
  for (const auto& r : a->records()) {
    auto pickleIn = [&](const std::string& dir) {  // dir/<model>.pt
      return r.rfind(dir, 0) == 0 && r.find('/', dir.size()) == std::string::npos && r.size() > dir.size() + 3 &&
             r.compare(r.size() - 3, 3, ".pt") == 0;
    };
    const bool weights = pickleIn(w), constants = pickleIn(c);
    if (!weights && !constants) {
      out[r] = sourceRecord(a, r);
      continue;
    }
    const std::string& dir = weights ? w : c;
    std::string model = r.substr(dir.size(), r.size() - dir.size() - 3);
    std::string configName = model + (weights ? "_weights_config.json" : "_constants_config.json");
    if (a->has(dir + configName)) {  // the current layout's config wins; the pickle is left alone
      out[r] = sourceRecord(a, r);
      continue;
    }
    std::string programRecord = "models/" + model + ".json";
    auto params = paramsOf.find(programRecord);
    if (params == paramsOf.end())
      params = paramsOf.emplace(programRecord, a->has(programRecord) ? parameterNames(*a, programRecord)
                                                                      : std::set<std::string>{}).first;
    convertPickle(*a, r, dir, configName, weights ? "weight_" : "tensor_", params->second, out);
    pickled = true;
  }
  if (!pickled) return a;
  return ArchiveReader::fromMemory(a->path(), std::move(out));
}

}  // namespace pipecut::pt2
