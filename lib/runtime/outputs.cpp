#include "runtime/outputs.h"


#include "manifest/checkpoint.h"
#include "support/safetensors.h"

namespace pipecut::runtime {

namespace fs = std::filesystem;

std::vector<std::string> readPaths(const SessionOptions& s, const std::vector<std::string>& extra) {
  std::vector<std::string> in = {s.dir};
  for (const auto& p : extra)
    if (!p.empty()) in.push_back(p);
  return in;
}

std::vector<std::string> readPaths(const InferenceOptions& o) {
  return readPaths(o.session, {o.inputs.inputsPath, o.checkPath});
}

std::vector<std::string> readPaths(const TrainOptions& o) {
  return readPaths(o.session, {o.dataPath, o.loadCheckpoint, o.scheduleFile});
}

namespace {

support::Destination base(const std::string& path, support::StagedKind kind, const char* what, const SessionOptions& o,
                          const std::vector<std::string>& inputs) {
  support::Destination d;
  d.path = path;
  d.kind = kind;
  d.what = what;
  d.inputs.assign(inputs.begin(), inputs.end());
  d.force = o.force;
  return d;
}

}  // namespace

support::Destination runOutputDestination(const std::string& path, const SessionOptions& o,
                                          const std::vector<std::string>& inputs) {
  auto d = base(path, support::StagedKind::File, "--output file", o, inputs);
  d.previousOutput = [](const fs::path& p) { return support::safetensorsInTheWay(p.string(), kRunOutputFormat); };
  return d;
}

support::Destination traceDestination(const std::string& path, const SessionOptions& o,
                                      const std::vector<std::string>& inputs) {
  auto d = base(path, support::StagedKind::File, "trace", o, inputs);
  d.previousOutput = [](const fs::path& p) { return support::jsonFieldInTheWay(p, "/otherData/format", kTraceFormat); };
  return d;
}

support::Destination profileDestination(const std::string& path, const SessionOptions& o,
                                        const std::vector<std::string>& inputs) {
  auto d = base(path, support::StagedKind::File, "profile", o, inputs);
  d.previousOutput = [](const fs::path& p) { return support::jsonFieldInTheWay(p, "/format", kProfileFormat); };
  return d;
}

support::Destination checkpointDestination(const std::string& dir, const SessionOptions& o,
                                           const std::vector<std::string>& inputs) {
  auto d = base(dir, support::StagedKind::Directory, "checkpoint", o, inputs);
  d.previousOutput = [](const fs::path& p) { return checkpointDirectoryInTheWay(p.string()); };
  return d;
}

}  // namespace pipecut::runtime
