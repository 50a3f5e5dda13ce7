#include "runtime/run_identity.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>

#include "support/digest.h"

namespace pipecut::runtime {

namespace {

// Doubles in their shortest exact form: two ranks given "0.1" and "1e-1" agree.
std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string ranks(const std::vector<int>& r) {
  std::string out;
  for (size_t i = 0; i < r.size(); ++i) out += (i ? "," : "") + std::to_string(r[i]);
  return out;
}

// "a" "b" as one line: each item quoted, so that no two lists read alike.
std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : " ") + nlohmann::json(i).dump();
  return out;
}

// A file's content, not its path.
std::string fileDigest(const std::string& path) { return path.empty() ? "none" : digestFile(Digest::Xxh3_128, path); }

}  // namespace

RunIdentity commonIdentity(const std::string& mode, const SessionOptions& o, const std::string& manifestSha256,
                           const std::vector<int>& stageRank, const std::string& backend) {
  return {
      {"pipecut version", std::string(PIPECUT_VERSION) + " (rendezvous messages v1)"},
      {"mode", mode},
      {"split directory (manifest.pb SHA-256)", manifestSha256},
      {"--stage-format", stageFormatName(o.stageFormat)},
      // Training runs ATen's BLAS whatever the option says (runtime/cpu_matmul.h).
      {"--cpu-matmul", mode == "training" ? "blas" : cpuMatmulName(o.cpuMatmul)},
      {"--stage-ranks", ranks(stageRank)},
      {"--backend", backend},
      // Each rank may read its own copy of the checkpoint (another path on
      // another machine); how names and dtypes bind must agree.
      {"--weights (given or not)", o.weights.given() ? "yes" : "no"},
      {"--weights-rename", joined(o.weights.renames)},
      {"--weights-prefix", o.weights.prefix},
      {"--weights-cast", o.weights.cast ? "yes" : "no"},
  };
}

RunIdentity inferenceIdentity(const InferenceOptions& o, const std::string& manifestSha256, const std::vector<int>& stageRank,
                              const std::string& backend) {
  RunIdentity id = commonIdentity("inference", o.session, manifestSha256, stageRank, backend);
  id.push_back({"--microbatches", std::to_string(o.session.microbatches)});
  id.push_back({"--schedule", o.schedule == Schedule::GPipe ? "gpipe" : "1f1b"});
  id.push_back({"--iterations", std::to_string(o.iterations)});
  id.push_back({"--warmup", std::to_string(o.warmup)});
  const InputOptions& in = o.inputs;
  id.push_back({"inputs", in.randomInputs ? "random, --seed " + std::to_string(in.seed) + " --batch-size " +
                                                std::to_string(in.batch) + " --int-high " + std::to_string(in.intHigh)
                                          : "--inputs with XXH3-128 " + fileDigest(in.inputsPath)});
  return id;
}

RunIdentity trainingIdentity(const TrainOptions& o, const std::string& manifestSha256, const std::vector<int>& stageRank,
                             const std::string& backend, const std::string& schedule) {
  RunIdentity id = commonIdentity("training", o.session, manifestSha256, stageRank, backend);
  const OptimizerOptions& opt = o.optimizer;
  id.push_back({"--microbatches", std::to_string(o.session.microbatches)});
  id.push_back({"--schedule", schedule});
  id.push_back({"--steps", std::to_string(o.steps)});
  id.push_back({"--optimizer", opt.name});
  id.push_back({"--lr", number(opt.lr)});
  id.push_back({"--momentum", number(opt.momentum)});
  id.push_back({"--weight-decay", number(opt.weightDecay)});
  id.push_back({"--betas", number(opt.beta1) + "," + number(opt.beta2)});
  id.push_back({"--eps", number(opt.eps)});
  id.push_back({"--seed", std::to_string(o.seed)});  // the compiled stages' dropout: every rank must draw alike
  id.push_back({"--data (XXH3-128)", fileDigest(o.dataPath)});
  id.push_back({"--load-checkpoint (checkpoint.json XXH3-128)",
                o.loadCheckpoint.empty() ? "none" : fileDigest((std::filesystem::path(o.loadCheckpoint) / "checkpoint.json").string())});
  id.push_back({"--save-checkpoint (given or not)", o.saveCheckpoint.empty() ? "no" : "yes"});
  return id;
}

}  // namespace pipecut::runtime
