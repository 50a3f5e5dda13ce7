#include "pt2/package.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>

#include "pt2/legacy_layout.h"
#include "pt2/payload_config.h"
#include "pt2/program_json.h"
#include "support/error.h"
#include "support/phase_times.h"
#include "support/staging.h"
#include "support/zip_directory.h"
#include "support/dtypes.h"

namespace pipecut::pt2 {

using ir::Json;

ByteView Blob::view() const {
  if (owner) return mapped;
  if (source) return source->bytes(record);
  return ByteView{reinterpret_cast<const uint8_t*>(inlineBytes.data()), inlineBytes.size()};
}

std::optional<uint32_t> Blob::crc32() const {
  return source && !owner ? source->crc32(record) : std::nullopt;
}

std::shared_ptr<const void> Blob::keepAlive() const {
  if (owner) return owner;
  return source;
}

std::pair<const void*, std::string_view> Blob::storageKey(std::string_view fqn) const {
  if (owner) return {mapped.data, record};
  if (source) return {source.get(), record};
  return {nullptr, record.empty() ? fqn : std::string_view(record)};
}

ir::Json StoredTensor::entry() const { return Json::parse(entryJson); }

uint64_t StoredTensor::logicalBytes() const {
  if (!meta) return 0;
  auto n = meta->numel();
  const support::DType* d = support::dtypeFromCode(meta->dtype);
  if (!n || !d) return 0;
  return static_cast<uint64_t>(*n) * static_cast<uint64_t>(d->itemSize);
}

const StoredTensor* Package::find(const std::string& fqn) const {
  if (auto it = weights.find(fqn); it != weights.end()) return &it->second;
  if (auto it = constants.find(fqn); it != constants.end()) return &it->second;
  return nullptr;
}

uint64_t Package::tensorBytes(const std::string& fqn) const {
  const StoredTensor* t = find(fqn);
  return t ? t->logicalBytes() : 0;
}

std::vector<std::pair<std::string_view, uint64_t>> Package::liftedTensorBytes() const {
  return liftedTensorBytes(TensorIndex(*this));
}

std::vector<std::pair<std::string_view, uint64_t>> Package::liftedTensorBytes(const TensorIndex& index) const {
  std::vector<std::pair<std::string_view, uint64_t>> out;
  for (const auto& s : program.inputSpecs)
    if (s.kind == ir::InputKind::Parameter || s.kind == ir::InputKind::Buffer) out.emplace_back(s.target, index.bytes(s.target));
  return out;
}

TensorIndex::TensorIndex(const Package& pkg) {
  byFqn_.reserve(pkg.weights.size() + pkg.constants.size());
  for (const auto* table : {&pkg.weights, &pkg.constants})
    for (const auto& [fqn, t] : *table) byFqn_.emplace(fqn, &t);  // a weight wins over a constant
}

const StoredTensor* TensorIndex::find(std::string_view fqn) const {
  auto it = byFqn_.find(fqn);
  return it == byFqn_.end() ? nullptr : it->second;
}

uint64_t TensorIndex::bytes(std::string_view fqn) const {
  const StoredTensor* t = find(fqn);
  return t ? t->logicalBytes() : 0;
}

namespace {

constexpr const char* kWeightsDir = "data/weights/";
constexpr const char* kConstantsDir = "data/constants/";

std::map<std::string, StoredTensor> readPayloadConfig(const std::shared_ptr<const ArchiveReader>& a,
                                                      const std::string& dir, const std::string& configName) {
  std::string configRecord = dir + configName;
  std::vector<PayloadEntry> entries;
  try {
    entries = parsePayloadConfig(a->bytes(configRecord).str(), dir, configRecord,
                                 [&](const std::string& record) -> std::optional<uint64_t> { return a->sizeIfPresent(record); });
  } catch (const Error& e) {
    e.rethrowWithFile(a->path());
  }
  std::map<std::string, StoredTensor> out;
  for (PayloadEntry& e : entries) {
    StoredTensor t;
    t.fqn = e.fqn;
    t.entryJson = std::move(e.entryJson);
    t.meta = std::move(e.meta);
    t.isParam = e.isParam;
    t.usePickle = e.usePickle;
    t.external = e.external;
    // An external tensor's record says nothing: torch.export.save puts every
    // meta tensor of a dtype in one. Each is its own storage until a
    // declared tie (kTiedWeightsExtra) says otherwise.
    if (t.external) t.data.record = "external:" + e.fqn;
    else t.data = Blob{a, e.record, {}};
    out.emplace(e.fqn, std::move(t));
  }
  return out;
}

}  // namespace

Package readPackage(const std::string& path) {
  Package pkg;
  pkg.path = path;
  std::shared_ptr<const ArchiveReader> archive = upgradeLegacyLayout(ArchiveReader::open(path));
  pkg.archive = archive;
  auto fail = [&](const std::string& where, const std::string& msg) {
    throw Error(ErrorKind::InvalidInput, path, where, msg);
  };

  if (!archive->has("archive_format"))
    fail("archive_format", "missing record: this zip is not a torch.export .pt2 archive");
  std::string format = archive->text("archive_format");
  if (format != "pt2") fail("archive_format", "expected 'pt2', found '" + format.substr(0, 40) + "'");

  // torch.export.save names its program "model"; accept a single program of another name.
  std::vector<std::string> models;
  for (const auto& r : archive->records())
    if (r.rfind("models/", 0) == 0 && r.size() > 12 && r.compare(r.size() - 5, 5, ".json") == 0) models.push_back(r);
  if (models.empty()) fail("models/model.json", "missing record: the archive holds no exported program");
  std::string modelRecord = "models/model.json";
  if (!archive->has(modelRecord)) {
    if (models.size() != 1) fail("models/", "several programs and none named 'model'");
    modelRecord = models[0];
  }
  pkg.modelName = modelRecord.substr(7, modelRecord.size() - 12);

  try {
    support::ScopedPhase phase("read program");
    ByteView record = archive->bytes(modelRecord);
    pkg.program = parseProgram(record.str(), archive->readableAfter(record));
  } catch (const Error& e) {
    throw Error(e.kind(), path, archive->origin(modelRecord) + (e.where().empty() ? "" : ": " + e.where()), e.message());
  }

  const std::string& m = pkg.modelName;
  if (archive->has(kWeightsDir + m + "_weights_config.json")) {
    pkg.weights = readPayloadConfig(archive, kWeightsDir, m + "_weights_config.json");
  }
  if (archive->has(kConstantsDir + m + "_constants_config.json")) {
    pkg.constants = readPayloadConfig(archive, kConstantsDir, m + "_constants_config.json");
  }

  // Every lifted input must have its payload.
  for (const auto& s : pkg.program.inputSpecs) {
    const char* table = nullptr;
    bool found = false;
    switch (s.kind) {
      case ir::InputKind::Parameter:
        table = "weights";
        found = pkg.weights.count(s.target);
        break;
      case ir::InputKind::Buffer:
        table = s.persistent.value_or(true) ? "weights" : "constants";
        found = pkg.weights.count(s.target) || pkg.constants.count(s.target);
        break;
      case ir::InputKind::TensorConstant:
      case ir::InputKind::CustomObj:
        table = "constants";
        found = pkg.constants.count(s.target);
        break;
      default:
        found = true;
    }
    if (!found)
      fail(archive->origin(modelRecord) + ": graph_module.signature",
           std::string(ir::inputKindKey(s.kind)) + " '" + s.target + "' has no entry in the " + table + " payload config");
  }

  std::string sample = "data/sample_inputs/" + m + ".pt";
  if (archive->has(sample)) pkg.sampleInputs = Blob{archive, sample, {}};
  for (const auto& r : archive->records())
    if (r.rfind("extra/", 0) == 0 && r.substr(6) != kOutputMarkerExtra && r.substr(6) != kTiedWeightsExtra)
      pkg.extra.emplace(r.substr(6), Blob{archive, r, {}});
  for (const auto* table : {&pkg.weights, &pkg.constants})
    for (const auto& [fqn, t] : *table) pkg.metaExport |= t.external;
  if (archive->has(std::string("extra/") + kTiedWeightsExtra)) {
    const std::string record = std::string("extra/") + kTiedWeightsExtra;
    try {
      applyDeclaredTies(pkg, archive->text(record));
    } catch (const Error& e) {
      throw Error(e.kind(), path, archive->origin(record) + (e.where().empty() ? "" : ": " + e.where()), e.message());
    }
  }
  return pkg;
}

void applyDeclaredTies(Package& pkg, std::string_view text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tied") || !j["tied"].is_array())
    invalidInput("", "expected {\"tied\": [[name, name, ...], ...]}");
  const Json& groups = j["tied"];
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string at = "tied[" + std::to_string(g) + "]";
    if (!groups[g].is_array() || groups[g].size() < 2) invalidInput(at, "expected a list of at least two tensor names");
    std::vector<StoredTensor*> members;
    for (size_t k = 0; k < groups[g].size(); ++k) {
      const Json& name = groups[g][k];
      const std::string w = at + "[" + std::to_string(k) + "]";
      if (!name.is_string()) invalidInput(w, "expected a tensor name");
      StoredTensor* t = nullptr;
      for (auto* table : {&pkg.weights, &pkg.constants})
        if (auto it = table->find(name.get<std::string>()); it != table->end() && !t) t = &it->second;
      if (!t) invalidInput(w, "'" + name.get<std::string>() + "' is no tensor of the program");
      members.push_back(t);
    }
    // Ties of tensors with bytes are their records' to say; a group must
    // agree in dtype and shape to be one tensor.
    const StoredTensor& first = *members[0];
    for (size_t k = 1; k < members.size(); ++k) {
      const StoredTensor& t = *members[k];
      if (!first.meta || !t.meta || first.meta->dtype != t.meta->dtype || first.meta->shapeStr() != t.meta->shapeStr())
        invalidInput(at, "'" + first.fqn + "' and '" + t.fqn + "' differ in dtype or shape; tied tensors are one tensor");
    }
    for (StoredTensor* t : members)
      if (t->external) t->data.record = "external:" + first.fqn;
  }
}

namespace {

// Canonical record names: numbered in FQN order, one record per distinct source
// storage, so tensors that shared a storage still share it.
struct PayloadPlan {
  Json config = Json{{"config", Json::object()}};
  std::vector<std::pair<std::string, const Blob*>> records;  // new name, bytes
};

PayloadPlan planPayload(const std::map<std::string, StoredTensor>& table, const std::set<std::string>& keep,
                        const char* tensorPrefix) {
  PayloadPlan plan;
  std::map<std::pair<const void*, std::string>, std::string> assigned;
  std::map<std::string, int> counters;
  for (const auto& [fqn, t] : table) {
    if (!keep.count(fqn)) continue;
    Json e = t.entry();
    // An external tensor gets a 0-byte record of its own, as torch.export.save
    // would write it; which tensors are one is the manifest's to say
    // (ExternalTensor::aliases), not the records'.
    auto [holder, name] = t.data.storageKey(t.fqn);
    auto key = std::make_pair(holder, t.external ? "external:" + t.fqn : std::string(name));
    auto it = assigned.find(key);
    if (it == assigned.end()) {
      // Keep the kind of record the loader expects (tensor_, custom_obj_, ...).
      std::string old = e.value("path_name", std::string(tensorPrefix));
      std::string prefix = old.substr(0, old.find_last_not_of("0123456789") + 1);
      if (prefix.empty()) prefix = tensorPrefix;
      std::string name = prefix + std::to_string(counters[prefix]++);
      it = assigned.emplace(key, name).first;
      plan.records.emplace_back(name, &t.data);
    }
    e["path_name"] = it->second;
    plan.config["config"][fqn] = std::move(e);
  }
  return plan;
}

}  // namespace

void writePackage(const Package& pkg, const std::function<size_t(const void*, size_t)>& sink, bool markAsOutput) {
  std::set<std::string> keep;
  for (const auto& s : pkg.program.inputSpecs)
    if (s.kind != ir::InputKind::UserInput && s.kind != ir::InputKind::ConstantInput && s.kind != ir::InputKind::Token)
      keep.insert(s.target);

  const std::string& m = pkg.modelName;
  PayloadPlan weights = planPayload(pkg.weights, keep, "weight_");
  PayloadPlan constants = planPayload(pkg.constants, keep, "tensor_");

  ArchiveWriter w(sink);
  // Copied records keep their source's CRC-32: the writer need not read
  // gigabytes of weights once more to compute it.
  for (const auto& [name, blob] : weights.records) {
    ByteView v = blob->view();
    w.add(kWeightsDir + name, v.data, v.size, blob->crc32());
  }
  w.add(std::string(kWeightsDir) + m + "_weights_config.json", dumpJson(weights.config));
  for (const auto& [name, blob] : constants.records) {
    ByteView v = blob->view();
    w.add(kConstantsDir + name, v.data, v.size, blob->crc32());
  }
  w.add(std::string(kConstantsDir) + m + "_constants_config.json", dumpJson(constants.config));
  w.add("models/" + m + ".json", dumpJson(serializeProgram(pkg.program)));
  {
    ByteView v = pkg.sampleInputs ? pkg.sampleInputs->view() : ByteView{};
    w.add("data/sample_inputs/" + m + ".pt", v.data, v.size, pkg.sampleInputs ? pkg.sampleInputs->crc32() : std::nullopt);
  }
  for (const auto& [name, blob] : pkg.extra) {
    ByteView v = blob.view();
    w.add("extra/" + name, v.data, v.size, blob.crc32());
  }
  if (markAsOutput) w.add(std::string("extra/") + kOutputMarkerExtra, std::string_view("pipecut normalize\n"));
  w.add("archive_format", std::string_view("pt2"));
  w.add("archive_version", std::string_view("0"));
  w.finish();
}

namespace {

std::string packageInTheWay(const std::string& path) {
  const std::string notOurs = "is a file pipecut did not write (no extra/" + std::string(kOutputMarkerExtra) + " record)";
  try {
    for (const auto& e : support::zipDirectoryEntries(path)) {
      size_t slash = e.name.find('/');
      if (slash != std::string::npos && e.name.compare(slash + 1, std::string::npos,
                                                       std::string("extra/") + kOutputMarkerExtra) == 0)
        return "";
    }
    return notOurs;
  } catch (const Error&) {
    return "is a file pipecut did not write (not a zip archive)";
  }
}

}  // namespace

support::Destination packageDestination(const std::string& path, std::vector<std::string> inputs, bool force) {
  support::Destination d;
  d.path = path;
  d.what = ".pt2 output";
  d.previousOutput = [](const std::filesystem::path& p) { return packageInTheWay(p.string()); };
  d.inputs.assign(inputs.begin(), inputs.end());
  d.force = force;
  return d;
}

void writePackageFile(const Package& pkg, const support::Destination& d) {
  support::writeFileStaged(d, [&](const support::ByteSink& sink) {
    writePackage(pkg, [&](const void* data, size_t n) {
      sink(data, n);
      return n;
    }, /*markAsOutput=*/true);
  });
}

Package withProgram(const Package& pkg, ir::Program program) {
  Package out;
  out.path = pkg.path;
  out.modelName = pkg.modelName;
  out.program = std::move(program);
  out.weights = pkg.weights;
  out.constants = pkg.constants;
  out.sampleInputs = pkg.sampleInputs;
  out.extra = pkg.extra;
  out.archive = pkg.archive;
  return out;
}

}  // namespace pipecut::pt2
