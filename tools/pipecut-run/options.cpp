#include "options.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <CLI/CLI.hpp>

#include "support/sha256.h"

namespace pipecut::cli {

namespace {

// Numbers the way a user means them: the whole text one number (no "0junk",
// no "nan" or "inf"), within the option's range.
CLI::Validator realIn(double lo, double hi, bool loOpen, bool hiOpen, const std::string& what) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end || errno == ERANGE || !std::isfinite(v)) return "expected a finite number, got '" + text + "'";
        if (v < lo || v > hi || (loOpen && v == lo) || (hiOpen && v == hi)) return "expected " + what + ", got " + text;
        return "";
      },
      what);
}
const double kInf = std::numeric_limits<double>::infinity();
CLI::Validator positiveReal() { return realIn(0, kInf, true, true, "a positive number"); }
CLI::Validator nonNegativeReal() { return realIn(0, kInf, false, true, "a number >= 0"); }
CLI::Validator atLeast(long long lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end || errno == ERANGE) return "expected a whole number, got '" + text + "'";
        if (v < lo) return "expected a whole number >= " + std::to_string(lo) + ", got " + text;
        return "";
      },
      "an integer >= " + std::to_string(lo));
}

// "0,0,1,1": every item a whole number >= 0, nothing else.
std::vector<int> rankList(const std::string& text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos)
      throw CLI::ValidationError("--stage-ranks", "expected ranks separated by commas (e.g. 0,0,1,1), got '" + text + "'");
    out.push_back(std::stoi(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

RunCommand parseRunCommand(int argc, const char* const* argv) {
  RunCommand cmd;
  auto& o = cmd.run;
  auto& t = cmd.train;
  bool& json = cmd.json;
  bool& quiet = cmd.quiet;
  std::string& profilePath = cmd.profilePath;
  CLI::App app{"pipecut-run: run a pipecut split directory as a micro-batched pipeline on CPUs and GPUs, "
               "in one process or across processes (torch.distributed c10d; torchrun --no-python works)"};
  app.set_version_flag("--version", std::string("pipecut-run ") + PIPECUT_VERSION);
  std::string devices = "cpu", schedule = "gpipe", stageRanks;
  bool noVerify = false;
  app.add_option("dir", o.dir, "directory written by pipecut split")->required();
  auto* profile = app.add_option("--profile", profilePath,
                                 "time every node of a one-stage split (spec {\"split_points\": {}}) and write the "
                                 "times to this JSON file; the whole batch is one forward call");
  app.add_option("--devices", devices, "cpu, cuda:N or cuda (= cuda:LOCAL_RANK); one for all stages or one per stage")
      ->capture_default_str();
  app.add_option("-m,--microbatches", o.microbatches, "micro-batches per batch (the batch splits along dimension 0)")
      ->capture_default_str()
      ->check(atLeast(1));
  app.add_option("--schedule", schedule, "inference: gpipe (fill-drain, the default) or 1f1b (at most one micro-batch per stage in flight); "
                 "--train: gpipe, 1f1b (the default), interleaved-1f1b (stages round robin, several per rank) or zb1p "
                 "(zero bubble: backward split into input and weight gradients)")
      ->capture_default_str();
  auto* inputs = app.add_option("--inputs", o.inputsPath, "inputs: .safetensors (input.N keys) or a torch.save'd tuple/dict");
  auto* random = app.add_flag("--random-inputs", o.randomInputs, "draw inputs from the manifest's shapes and dtypes");
  inputs->excludes(random);
  app.add_option("--seed", o.seed, "seed for --random-inputs")->capture_default_str();
  app.add_option("--batch-size", o.batch, "micro-batch size along dynamic (symbolic) dimensions, for --random-inputs")
      ->check(atLeast(1));
  app.add_option("--int-high", o.intHigh, "random integer inputs lie in [0, N)")->capture_default_str()->check(atLeast(1));
  app.add_option("--check", o.checkPath, "reference outputs (.safetensors, output.N keys); exit 4 on mismatch");
  app.add_option("--atol", o.atol, "absolute tolerance for --check (default: by dtype, as torch.testing)")
      ->check(nonNegativeReal());
  app.add_option("--rtol", o.rtol, "relative tolerance for --check (default: by dtype, as torch.testing)")
      ->check(nonNegativeReal());
  app.add_flag("--exact", o.exact, "--check demands bitwise equality (for references computed on this machine)");
  auto* iterations = app.add_option("--iterations", o.iterations, "measured passes over the batch (--profile: 10)")
                         ->capture_default_str()
                         ->check(atLeast(1));
  auto* warmup = app.add_option("--warmup", o.warmup, "unmeasured passes first (--profile: 2)")
                     ->capture_default_str()
                     ->check(atLeast(0));
  app.add_option("--queue-depth", o.queueDepth, "micro-batches a stage may receive ahead")
      ->capture_default_str()
      ->check(atLeast(1));
  app.add_option("--stage-ranks", stageRanks, "rank of each stage, e.g. 0,0,1,1 (default: spread evenly)");
  app.add_option("--timeout", o.timeoutSeconds, "seconds before a silent peer counts as failed")
      ->capture_default_str()
      ->check(realIn(0, 86400 * 7, true, false, "a positive number of seconds (at most a week)"));
  app.add_option("--backend", o.backend, "auto (NCCL when every stage is on CUDA and no two ranks share a GPU, else Gloo), gloo, nccl, or "
                 "gloo-strict (Gloo matching messages by order alone, as NCCL does; for tests)")->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads (default: cores / (local stages x LOCAL_WORLD_SIZE))")
      ->check(atLeast(1));
  app.add_option("--output", o.outputPath, "write the merged outputs (.safetensors)");
  app.add_option("--trace", o.tracePath, "write a Chrome trace (Perfetto) of compute and transfer spans");
  app.add_flag("--json", json, "print the report as JSON");
  app.add_flag("-q,--quiet", quiet, "no progress line");
  app.add_flag("--no-verify", noVerify, "skip checking stage files against the manifest's hashes");
  auto* expect = app.add_option("--expect-manifest", o.expectManifestSha256,
                 "refuse the split directory unless manifest.pb's SHA-256 is this one (as pipecut split printed it); "
                 "stage files are then checked by their SHA-256 (split --sha256)")
      ->check([](const std::string& v) { return isSha256Hex(v) ? std::string() : "expected 64 hex digits"; });
  // A pin whose stage files go unchecked pins nothing.
  expect->excludes("--no-verify");
  app.add_flag("--force", o.force,
               "let --output, --trace, --profile and --save-checkpoint replace what pipecut did not write (never an "
               "input, the directory holding one, /, the current or the home directory)");
  std::string stageFormat = "torchscript";
  auto* stageFormatOpt = app.add_option("--stage-format", stageFormat,
                                        "which stage files run: torchscript (.pt) or pt2 (.pt2 through LibTorch's NativeRT; "
                                        "CPU, inference)")
                             ->capture_default_str();
  // Pipeline options that a profile (one stage, one process, one call per
  // batch) has no use for: giving one with --profile is a usage error.
  // Training.
  std::string betas;
  bool training = false;
  auto* train = app.add_flag("--train", training, "train: the program's single output is a scalar loss; one optimizer step per "
                                        "batch of M micro-batches (gradients of the mean micro-batch loss)");
  std::vector<CLI::Option*> trainOnly = {
      app.add_option("--data", t.dataPath, "training data (.safetensors, input.<i> keys): dimension 0 holds the steps' "
                                           "batches one after another"),
      app.add_option("--steps", t.steps, "optimizer steps (default: every step the data holds)")->check(atLeast(1)),
      app.add_option("--optimizer", t.optimizer.name, "sgd or adamw")->capture_default_str(),
      app.add_option("--lr", t.optimizer.lr, "learning rate")->capture_default_str()->check(positiveReal()),
      app.add_option("--momentum", t.optimizer.momentum, "SGD momentum")->capture_default_str()->check(nonNegativeReal()),
      app.add_option("--weight-decay", t.optimizer.weightDecay, "weight decay (AdamW: decoupled)")
          ->capture_default_str()
          ->check(nonNegativeReal()),
      app.add_option("--betas", betas, "AdamW betas, e.g. 0.9,0.999"),
      app.add_option("--eps", t.optimizer.eps, "AdamW epsilon")->capture_default_str()->check(positiveReal()),
      app.add_option("--save-checkpoint", t.saveCheckpoint, "after the last step, write parameters and optimizer state here "
                                                            "(a directory, replaced atomically)"),
      app.add_option("--load-checkpoint", t.loadCheckpoint, "resume from a checkpoint written by --save-checkpoint")};
  for (auto* opt : trainOnly) opt->needs(train);
  for (const char* name : {"--inputs", "--random-inputs", "--check", "--atol", "--rtol", "--exact", "--output",
                           "--iterations", "--warmup", "--queue-depth", "--profile"})
    train->excludes(app.get_option(name));
  // Training needs autograd and the profiler a TorchScript graph: both run .pt stages.
  train->excludes(stageFormatOpt);
  profile->excludes(stageFormatOpt);
  for (const char* name : {"--microbatches", "--schedule", "--check", "--atol", "--rtol", "--exact", "--queue-depth",
                           "--stage-ranks", "--timeout", "--backend", "--output", "--trace"})
    profile->excludes(app.get_option(name));
  try {
    app.parse(argc, argv);
    auto format = runtime::parseStageFormat(stageFormat);
    if (!format) throw CLI::ValidationError("--stage-format", "expected torchscript or pt2");
    o.stageFormat = *format;
    o.devices.clear();
    for (size_t start = 0;;) {
      size_t comma = devices.find(',', start);
      std::string d = devices.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (d.empty()) throw CLI::ValidationError("--devices", "expected cpu, cuda or cuda:N separated by commas, got '" + devices + "'");
      o.devices.push_back(d);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!stageRanks.empty()) o.stageRanks = rankList(stageRanks);
    if (train->count()) {
      auto kind = runtime::parseTrainSchedule(app.get_option("--schedule")->count() ? schedule : "1f1b");
      if (!kind) throw CLI::ValidationError("--schedule", "expected gpipe, 1f1b, interleaved-1f1b or zb1p");
      t.schedule = *kind;
      if (t.dataPath.empty()) throw CLI::ValidationError("--data", "--train needs --data FILE.safetensors");
      if (!betas.empty()) {
        auto comma = betas.find(',');
        std::string b1 = betas.substr(0, comma), b2 = comma == std::string::npos ? "" : betas.substr(comma + 1);
        CLI::Validator beta = realIn(0, 1, false, true, "two numbers in [0, 1), e.g. 0.9,0.999");
        if (comma == std::string::npos || !beta(b1).empty() || !beta(b2).empty())
          throw CLI::ValidationError("--betas", "expected two numbers in [0, 1) separated by a comma, e.g. 0.9,0.999");
        t.optimizer.beta1 = std::stod(b1);
        t.optimizer.beta2 = std::stod(b2);
      }
      if (t.optimizer.name != "sgd" && t.optimizer.name != "adamw")
        throw CLI::ValidationError("--optimizer", "expected sgd or adamw");
    } else if (schedule == "gpipe") {
      o.schedule = runtime::Schedule::GPipe;
    } else if (schedule == "1f1b") {
      o.schedule = runtime::Schedule::OneFOneB;
    } else {
      throw CLI::ValidationError("--schedule", "expected gpipe or 1f1b (interleaved-1f1b and zb1p: with --train)");
    }
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" of exit code 0.
    std::ostringstream out, err;
    cmd.mode = RunCommand::Mode::Exit;
    const bool ok = app.exit(e, out, err) == 0;
    cmd.exitCode = ok ? 0 : 1;  // every usage error is 1, whatever CLI11 numbers it
    cmd.text = ok ? out.str() : "pipecut-run: " + std::string(e.what()) + "\nRun with --help for more information.\n";
    return cmd;
  }
  o.verifyHashes = !noVerify;
  o.progress = !quiet && !json && isatty(STDERR_FILENO);
  const bool profiling = profile->count() > 0;
  if (profiling) {
    // One pass is too few to time: the first calls of a TorchScript method
    // profile and optimize it. An explicit --warmup/--iterations is kept.
    if (warmup->count() == 0) o.warmup = 2;
    if (iterations->count() == 0) o.iterations = 10;
    if (profilePath.empty()) {
      cmd.mode = RunCommand::Mode::Exit;
      cmd.exitCode = 1;
      cmd.text = "pipecut-run: --profile needs a file name\nRun with --help for more information.\n";
      return cmd;
    }
  }
  cmd.mode = profiling ? RunCommand::Mode::Profile : train->count() ? RunCommand::Mode::Train : RunCommand::Mode::Run;
  t.run = o;
  return cmd;
}

}  // namespace pipecut::cli
