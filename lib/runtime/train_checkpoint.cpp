#include "runtime/train_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "manifest/checkpoint.h"
#include "runtime/reference.h"
#include "support/error.h"
#include "support/sha256.h"
#include "support/staging.h"

namespace pipecut::runtime {

namespace {

namespace fs = std::filesystem;

std::string stageFileName(uint32_t s) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "stage_%03u.safetensors", s);
  return buf;
}

CheckpointStage writeStage(const fs::path& dir, uint32_t s, const TrainableStage& st, const OptimizerOptions& o,
                           uint64_t step) {
  CheckpointStage cs;
  cs.index = s;
  cs.file = stageFileName(s);
  auto tensors = checkpointTensors(st, o);
  for (const auto& [name, t] : tensors)
    if (name.rfind("optimizer/", 0) != 0) cs.tensors.push_back(name);
  std::string path = (dir / cs.file).string();
  cs.sha256 = writeSafetensors(path, tensors, {{"format", kCheckpointFormat}, {"step", std::to_string(step)}});
  cs.bytes = fs::file_size(path);
  return cs;
}

Checkpoint header(const Manifest& m, uint64_t step, const OptimizerOptions& o) {
  Checkpoint c;
  c.step = step;
  c.sourceSha256 = m.sourceSha256;
  c.sourceDirectorySha256 = m.sourceDirectorySha256;
  c.splitSpec = m.splitSpec;
  c.optimizer = o.name;
  c.hyper = {{"lr", o.lr}, {"weight_decay", o.weightDecay}};
  if (o.name == "sgd") c.hyper["momentum"] = o.momentum;
  else c.hyper.insert({{"beta1", o.beta1}, {"beta2", o.beta2}, {"eps", o.eps}});
  // Only groups of state-dict tensors: a manifest also lists, say, a
  // non-persistent buffer every stage reads.
  for (const auto& g : m.tiedGroups) {
    bool state = false;
    for (const auto& st : m.stages)
      for (const auto& p : st.parameters)
        state |= (p.kind == "parameter" || p.kind == "buffer") &&
                 std::find(g.names.begin(), g.names.end(), p.name) != g.names.end();
    if (state) c.tiedGroups.push_back(g);
  }
  return c;
}

}  // namespace

void saveTrainCheckpoint(const std::string& path, const Manifest& m, uint64_t step, const OptimizerOptions& o,
                         const std::map<uint32_t, TrainableStage*>& local, DistContext* dist) {
  Checkpoint c = header(m, step, o);
  c.stages.resize(m.stages.size());
  auto writeAll = [&](const fs::path& dir, bool collect) {
    for (const auto& [s, st] : local) {
      CheckpointStage cs = writeStage(dir, s, *st, o, step);
      if (dist) dist->put("ckpt/stage/" + std::to_string(s), checkpointStageToJson(cs));
      c.stages[s] = cs;
    }
    if (!collect) return;
    if (dist)
      for (uint32_t s = 0; s < m.stages.size(); ++s)
        c.stages[s] = checkpointStageFromJson(dist->get("ckpt/stage/" + std::to_string(s)), s, "the store");
    std::string json = checkpointToJson(c);
    std::FILE* f = std::fopen((dir / "checkpoint.json").c_str(), "wb");
    if (!f || std::fwrite(json.data(), 1, json.size(), f) != json.size() || std::fclose(f) != 0)
      throw Error(ErrorKind::Internal, (dir / "checkpoint.json").string(), "", "cannot write");
  };
  if (!dist || dist->rank() == 0) {
    // Rank 0 makes the temporary directory, the others write into it (a
    // shared file system across machines), and rank 0 renames it into place
    // once every stage file is listed.
    support::writeStaged(path, support::StagedKind::Directory, [&](const fs::path& temp) {
      if (dist) dist->put("ckpt/dir", fs::absolute(temp).string());
      writeAll(temp, true);
    });
    if (dist) dist->put("ckpt/done", "1");
  } else {
    fs::path temp = dist->get("ckpt/dir");
    writeAll(temp, false);
    dist->get("ckpt/done");
  }
}

uint64_t loadTrainCheckpoint(const std::string& path, const Manifest& m, const OptimizerOptions& o,
                             std::map<uint32_t, TrainableStage*>& local) {
  Checkpoint c = readCheckpoint(path);
  std::string json = path + "/checkpoint.json";
  // Each identity the checkpoint and the split both have must agree (the
  // whole file's hash only exists with split --hash-source; checkpoints
  // from before source_directory_sha256 lack that one).
  auto sameModel = [&](const std::string& field, const std::string& ours, const std::string& theirs) {
    if (ours.empty() || theirs.empty() || ours == theirs) return;
    throw Error(ErrorKind::InvalidInput, json, field,
                "the checkpoint is of another model (" + theirs.substr(0, 12) + "..., this split's is " +
                    ours.substr(0, 12) + "...)");
  };
  sameModel("source_directory_sha256", m.sourceDirectorySha256, c.sourceDirectorySha256);
  sameModel("source_sha256", m.sourceSha256, c.sourceSha256);
  if (c.splitSpec != m.splitSpec || c.stages.size() != m.stages.size())
    throw Error(ErrorKind::InvalidInput, json, "split_spec",
                "the checkpoint is of another split of this model (" + std::to_string(c.stages.size()) + " stages, spec " +
                    c.splitSpec + ")");
  if (c.optimizer != o.name)
    throw Error(ErrorKind::InvalidInput, json, "optimizer",
                "the checkpoint holds " + c.optimizer + " state; this run trains with --optimizer " + o.name);
  for (auto& [s, st] : local) {
    const CheckpointStage& cs = c.stages.at(s);
    std::string file = path + "/" + cs.file;
    if (sha256File(file) != cs.sha256)
      throw Error(ErrorKind::InvalidInput, file, "", "does not match its sha256 in checkpoint.json (damaged or replaced)");
    restoreCheckpoint(*st, o, readSafetensors(file), file);
  }
  return c.step;
}

}  // namespace pipecut::runtime
