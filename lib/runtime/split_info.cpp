#include "runtime/split_info.h"

#include "manifest/directory.h"
#include "manifest/verify.h"

namespace pipecut::runtime {

SplitInfo openSplit(const std::string& dir, const OpenSplitOptions& options) {
  const SplitDirectory split = openSplitDirectory(dir, options.expectManifestSha256);
  const Manifest& m = split.manifest;
  SplitInfo info;
  info.dir = dir;
  info.manifestSha256 = split.manifestSha256;
  info.sourceModel = m.sourceModel;
  info.torchVersion = m.torchVersion;
  info.pipecutVersion = m.pipecutVersion;
  for (const UserValue& v : m.inputs) info.inputs.push_back(v.name);
  for (const UserValue& v : m.outputs) info.outputs.push_back(v.name);
  for (const Stage& st : m.stages) {
    SplitStageInfo& s = info.stages.emplace_back();
    s.index = st.index;
    for (const StageFile& f : st.files) s.files.push_back({f.path, f.format, f.bytes});
    s.modules = st.modules;
    s.parameterBytes = st.parameterBytes;
    s.nodeCount = st.nodeCount;
    s.inputs = st.inputs.size();
    s.outputs = st.outputs.size();
    s.stateTensors = st.state.size();
  }
  if (options.verifyFiles) {
    StageFileCheck check;
    check.sha256 = options.sha256;
    check.threads = options.threads;
    const StageFilesVerified v = verifyStageFiles(dir, m, check);
    info.verifiedFiles = v.files;
    info.verifiedBytes = stageFileBytes(m, check);
    info.digests = v.xxh3_128 && v.sha256 ? "xxh3_128 and sha256" : v.xxh3_128 ? "xxh3_128" : v.sha256 ? "sha256" : "";
  }
  return info;
}

}  // namespace pipecut::runtime
