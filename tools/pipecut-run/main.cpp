// pipecut-run: execute a pipecut split directory as a micro-batched pipeline,
// (--train) train it, or (--profile) time each node of a one-stage split.
// Exit codes: 0 ok, 1 usage, 2 invalid input, 3 internal error,
// 4 --check mismatch, 5 a rank failed or timed out in a multi-process run.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "runtime/pipeline.h"
#include "runtime/profile.h"
#include "runtime/train.h"
#include "support/error.h"

int main(int argc, char** argv) {
  using namespace pipecut;
  runtime::RunOptions o;
  CLI::App app{"pipecut-run: run a pipecut split directory as a micro-batched pipeline on CPUs and GPUs, "
               "in one process or across processes (torch.distributed c10d; torchrun --no-python works)"};
  app.set_version_flag("--version", std::string("pipecut-run ") + PIPECUT_VERSION);
  std::string devices = "cpu", schedule = "gpipe", stageRanks, profilePath;
  bool json = false, quiet = false, noVerify = false;
  app.add_option("dir", o.dir, "directory written by pipecut split")->required();
  auto* profile = app.add_option("--profile", profilePath,
                                 "time every node of a one-stage split (spec {\"split_points\": {}}) and write the "
                                 "times to this JSON file; the whole batch is one forward call");
  app.add_option("--devices", devices, "cpu, cuda:N or cuda (= cuda:LOCAL_RANK); one for all stages or one per stage")
      ->capture_default_str();
  app.add_option("-m,--microbatches", o.microbatches, "micro-batches per batch (the batch splits along dimension 0)")
      ->capture_default_str();
  app.add_option("--schedule", schedule, "inference: gpipe (fill-drain, the default) or 1f1b (at most one micro-batch per stage in flight); "
                 "--train: gpipe, 1f1b (the default), interleaved-1f1b (stages round robin, several per rank) or zb1p "
                 "(zero bubble: backward split into input and weight gradients)")
      ->capture_default_str();
  auto* inputs = app.add_option("--inputs", o.inputsPath, "inputs: .safetensors (input.N keys) or a torch.save'd tuple/dict");
  auto* random = app.add_flag("--random-inputs", o.randomInputs, "draw inputs from the manifest's shapes and dtypes");
  inputs->excludes(random);
  app.add_option("--seed", o.seed, "seed for --random-inputs")->capture_default_str();
  app.add_option("--batch-size", o.batch, "micro-batch size along dynamic (symbolic) dimensions, for --random-inputs");
  app.add_option("--int-high", o.intHigh, "random integer inputs lie in [0, N)")->capture_default_str();
  app.add_option("--check", o.checkPath, "reference outputs (.safetensors, output.N keys); exit 4 on mismatch");
  app.add_option("--atol", o.atol, "absolute tolerance for --check (default: by dtype, as torch.testing)");
  app.add_option("--rtol", o.rtol, "relative tolerance for --check (default: by dtype, as torch.testing)");
  app.add_flag("--exact", o.exact, "--check demands bitwise equality (for references computed on this machine)");
  auto* iterations = app.add_option("--iterations", o.iterations, "measured passes over the batch (--profile: 10)")
                         ->capture_default_str();
  auto* warmup = app.add_option("--warmup", o.warmup, "unmeasured passes first (--profile: 2)")->capture_default_str();
  app.add_option("--queue-depth", o.queueDepth, "micro-batches a stage may receive ahead")->capture_default_str();
  app.add_option("--stage-ranks", stageRanks, "rank of each stage, e.g. 0,0,1,1 (default: spread evenly)");
  app.add_option("--timeout", o.timeoutSeconds, "seconds before a silent peer counts as failed")->capture_default_str();
  app.add_option("--backend", o.backend, "auto (NCCL when every stage is on CUDA and no two ranks share a GPU, else Gloo), gloo, nccl, or "
                 "gloo-strict (Gloo matching messages by order alone, as NCCL does; for tests)")->capture_default_str();
  app.add_option("--threads", o.threads, "intra-op threads (default: cores / (local stages x LOCAL_WORLD_SIZE))");
  app.add_option("--output", o.outputPath, "write the merged outputs (.safetensors)");
  app.add_option("--trace", o.tracePath, "write a Chrome trace (Perfetto) of compute and transfer spans");
  app.add_flag("--json", json, "print the report as JSON");
  app.add_flag("-q,--quiet", quiet, "no progress line");
  app.add_flag("--no-verify", noVerify, "skip checking stage files against the manifest's hashes");
  std::string stageFormat = "torchscript";
  auto* stageFormatOpt = app.add_option("--stage-format", stageFormat,
                                        "which stage files run: torchscript (.pt) or pt2 (.pt2 through LibTorch's NativeRT; "
                                        "CPU, inference)")
                             ->capture_default_str();
  // Pipeline options that a profile (one stage, one process, one call per
  // batch) has no use for: giving one with --profile is a usage error.
  // Training.
  runtime::TrainOptions t;
  std::string betas;
  bool training = false;
  auto* train = app.add_flag("--train", training, "train: the program's single output is a scalar loss; one optimizer step per "
                                        "batch of M micro-batches (gradients of the mean micro-batch loss)");
  std::vector<CLI::Option*> trainOnly = {
      app.add_option("--data", t.dataPath, "training data (.safetensors, input.<i> keys): dimension 0 holds the steps' "
                                           "batches one after another"),
      app.add_option("--steps", t.steps, "optimizer steps (default: every step the data holds)"),
      app.add_option("--optimizer", t.optimizer.name, "sgd or adamw")->capture_default_str(),
      app.add_option("--lr", t.optimizer.lr, "learning rate")->capture_default_str(),
      app.add_option("--momentum", t.optimizer.momentum, "SGD momentum")->capture_default_str(),
      app.add_option("--weight-decay", t.optimizer.weightDecay, "weight decay (AdamW: decoupled)")->capture_default_str(),
      app.add_option("--betas", betas, "AdamW betas, e.g. 0.9,0.999"),
      app.add_option("--eps", t.optimizer.eps, "AdamW epsilon")->capture_default_str(),
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
    std::stringstream ds(devices);
    o.devices.clear();
    for (std::string d; std::getline(ds, d, ',');) o.devices.push_back(d);
    std::stringstream rs(stageRanks);
    for (std::string r; std::getline(rs, r, ',');) o.stageRanks.push_back(std::stoi(r));
    if (train->count()) {
      auto kind = runtime::parseTrainSchedule(app.get_option("--schedule")->count() ? schedule : "1f1b");
      if (!kind) throw CLI::ValidationError("--schedule", "expected gpipe, 1f1b, interleaved-1f1b or zb1p");
      t.schedule = *kind;
      if (t.dataPath.empty()) throw CLI::ValidationError("--data", "--train needs --data FILE.safetensors");
      if (!betas.empty()) {
        auto comma = betas.find(',');
        if (comma == std::string::npos) throw CLI::ValidationError("--betas", "expected two numbers, e.g. 0.9,0.999");
        t.optimizer.beta1 = std::stod(betas.substr(0, comma));
        t.optimizer.beta2 = std::stod(betas.substr(comma + 1));
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
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "pipecut-run: " << e.what() << "\nRun with --help for more information.\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "pipecut-run: bad option: " << e.what() << "\n";
    return 1;
  }
  o.verifyHashes = !noVerify;
  o.progress = !quiet && !json && isatty(STDERR_FILENO);
  const bool profiling = profile->count() > 0;
  if (profiling) {
    // One pass is too few to time: the first calls of a TorchScript method
    // profile and optimize it. An explicit --warmup/--iterations is kept.
    if (warmup->count() == 0) o.warmup = 2;
    if (iterations->count() == 0) o.iterations = 10;
    const char* bad = profilePath.empty() ? "--profile needs a file name"
                      : o.iterations < 1  ? "--iterations must be at least 1 with --profile"
                      : o.warmup < 0      ? "--warmup must not be negative"
                                          : nullptr;
    if (bad) {
      std::cerr << "pipecut-run: " << bad << "\nRun with --help for more information.\n";
      return 1;
    }
  }
  try {
    if (profiling) {
      runtime::ProfileReport r = runtime::runProfile(o, profilePath);
      std::cout << (json ? runtime::profileSummaryJson(r) + "\n" : runtime::profileText(r));
      return 0;
    }
    if (train->count()) {
      t.run = o;
      runtime::TrainReport r = runtime::runTraining(t);
      if (r.rank == 0) std::cout << (json ? runtime::trainReportJson(r) + "\n" : runtime::trainReportText(r));
      return 0;
    }
    runtime::RunReport r = runtime::runPipeline(o);
    if (r.rank == 0) std::cout << (json ? runtime::reportJson(r) + "\n" : runtime::reportText(r));
    if (r.checked && !r.checkOk) return 4;
    return 0;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::RankFailed) {
      // "rank R: cause", as every rank prints it. The process ends here, not
      // through destructors: c10d's threads may still wait on a dead peer.
      std::cerr << "pipecut-run: " << e.what() << std::endl;
      std::_Exit(e.exitCode());
    }
    std::cerr << "pipecut-run: " << (e.kind() == ErrorKind::Internal ? "internal error: " : "error: ") << e.what() << "\n";
    return e.exitCode();
  } catch (const std::exception& e) {
    std::cerr << "pipecut-run: internal error: " << e.what() << "\n";
    return 3;
  }
}
