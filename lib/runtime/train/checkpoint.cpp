#include "runtime/train/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "manifest/checkpoint.h"
#include "runtime/tensor_io.h"
#include "runtime/control_messages.h"
#include "support/error.h"
#include "support/files.h"
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

// A stage another rank wrote into `dir`, as its message lists it: checked
// against what this rank knows (the file's name, the stage's tensors in the
// manifest, the size on disk), since the message comes through the store.
CheckpointStage remoteStage(const fs::path& dir, const Manifest& m, uint32_t s, const std::string& message) {
  const std::string where = "checkpoint stage " + std::to_string(s);
  CheckpointStage cs;
  try {
    cs = checkpointStageFromJson(message, s, "the message of stage " + std::to_string(s));
  } catch (const Error&) {
    throw Error(ErrorKind::RankFailed, "", where, "its message does not decode");  // nothing of it shown
  }
  if (cs.file != stageFileName(s)) throw Error(ErrorKind::RankFailed, "", where, "names another file than its own");
  std::set<std::string> known;
  for (const auto& p : m.stages[s].parameters) known.insert(p.name);
  for (const auto& t : cs.tensors)
    if (!known.count(t)) throw Error(ErrorKind::RankFailed, "", where, "lists a tensor the stage does not hold");
  std::error_code ec;
  if (fs::file_size(dir / cs.file, ec) != cs.bytes || ec)
    throw Error(ErrorKind::RankFailed, "", where, "its file is not the size its message says");
  return cs;
}

}  // namespace

void saveTrainCheckpoint(const support::Destination& dst, const Manifest& m, uint64_t step, const OptimizerOptions& o,
                         const std::map<uint32_t, TrainableStage*>& local, DistContext* dist) {
  Checkpoint c = header(m, step, o);
  c.stages.resize(m.stages.size());
  auto writeLocal = [&](const fs::path& dir) {
    for (const auto& [s, st] : local) {
      c.stages[s] = writeStage(dir, s, *st, o, step);
      if (dist) dist->put("ckpt/stage/" + std::to_string(s), checkpointStageToJson(c.stages[s]));
    }
  };
  if (!dist || dist->rank() == 0) {
    // Rank 0 makes the temporary directory, the others write into it (a
    // shared file system across machines), and rank 0 renames it into place
    // once every stage file is listed.
    support::writeStaged(dst, [&](const fs::path& temp) {
      if (dist) dist->put("ckpt/ready", control::encodeCounter(step));
      writeLocal(temp);
      if (dist)
        for (uint32_t s = 0; s < m.stages.size(); ++s)
          if (!local.count(s)) c.stages[s] = remoteStage(temp, m, s, dist->get("ckpt/stage/" + std::to_string(s)));
      std::string json = checkpointToJson(c);
      support::HashingWriter w((temp / "checkpoint.json").string(), false);
      w.write(json.data(), json.size());
      w.finish();
    });
    if (dist) dist->put("ckpt/done", control::encodeCounter(step));
    return;
  }
  // The directory is this rank's own --save-checkpoint, as rank 0's
  // temporary names it; the store gives only rank 0's process id (from its
  // hello, a number) and when it is ready.
  if (control::decodeCounter(dist->get("ckpt/ready")) != step)
    throw Error(ErrorKind::RankFailed, "", "rendezvous store", "rank 0 is saving the checkpoint of another step");
  const fs::path temp = support::temporaryPath(dst, static_cast<long>(dist->rank0Pid()));
  struct stat st;
  if (::lstat(temp.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(ErrorKind::InvalidInput, dst.path.string(), "",
                "rank 0's temporary checkpoint directory " + temp.string() +
                    " is not here: --save-checkpoint must name one directory every rank sees (a shared file system)");
  writeLocal(temp);
  control::decodeCounter(dist->get("ckpt/done"));
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
