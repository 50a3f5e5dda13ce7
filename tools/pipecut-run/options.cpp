#include "options.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <CLI/CLI.hpp>

#include "runtime/train/schedule.h"
#include "support/sha256.h"
#include "weights_flags.h"

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
  runtime::SessionOptions& s = cmd.inference.session;  // copied to the training options at the end
  runtime::InputOptions& in = cmd.inference.inputs;
  runtime::InferenceOptions& o = cmd.inference;
  runtime::TrainOptions& t = cmd.train;
  CLI::App app{"pipecut-run: run a pipecut split directory as a micro-batched pipeline on CPUs and GPUs, "
               "in one process or across processes (torch.distributed c10d; torchrun --no-python works)"};
  // Without NativeRT (a torch 2.15 wheel), --stage-format pt2 cannot run: said here too.
  app.set_version_flag("--version", std::string("pipecut-run ") + PIPECUT_VERSION + " (LibTorch " +
                                        PIPECUT_LIBTORCH_VERSION + (PIPECUT_HAVE_NATIVERT ? ")" : ", without NativeRT)"));
  std::string devices = "cpu", schedule = "gpipe", stageRanks, stageFormat = "torchscript", cpuMatmul = "auto", betas;
  bool noVerify = false, training = false;

  // What every mode has (runtime::SessionOptions).
  app.add_option("dir", s.dir, "directory written by pipecut split")->required();
  // Every further positional lands here and is refused after parsing, as
  // CLI11 would: CLI11 2.1 itself takes an unexpected empty argument for the
  // empty name of an option group and parses forever (found by the
  // run_options fuzzer: `pipecut-run DIR "" -q x`).
  std::vector<std::string> unexpected;
  app.add_option("unexpected", unexpected)->expected(0, CLI::detail::expected_max_vector_size)->group("");
  app.add_option("--devices", devices, "cpu, cuda:N or cuda (= cuda:LOCAL_RANK); one for all stages or one per stage")
      ->capture_default_str();
  app.add_option("--supported-device", s.supportedDevice,
                 "a split cut with pipecut split --support: where its supported stages run (over --devices), e.g. "
                 "cuda:0");
  app.add_option("--fallback-device", s.fallbackDevice,
                 "a split cut with pipecut split --support: where its other stages run (over --devices), e.g. cpu");
  app.add_option("-m,--microbatches", s.microbatches, "micro-batches per batch (the batch splits along dimension 0)")
      ->capture_default_str()
      ->check(atLeast(1));
  app.add_option("--schedule", schedule, "inference: gpipe (fill-drain, the default) or 1f1b (at most one micro-batch per stage in flight); "
                 "--train: gpipe, 1f1b (the default), interleaved-1f1b (stages round robin, several per rank) or zb1p "
                 "(zero bubble: backward split into input and weight gradients)")
      ->capture_default_str();
  app.add_option("--stage-ranks", stageRanks, "rank of each stage, e.g. 0,0,1,1 (default: spread evenly)");
  app.add_option("--timeout", s.timeoutSeconds, "seconds before a silent peer counts as failed")
      ->capture_default_str()
      ->check(realIn(0, 86400 * 7, true, false, "a positive number of seconds (at most a week)"));
  app.add_option("--backend", s.backend, "auto (NCCL when every stage is on CUDA and no two ranks share a GPU, else Gloo), gloo, nccl, or "
                 "gloo-strict (Gloo matching messages by order alone, as NCCL does; for tests)")->capture_default_str();
  app.add_option("--threads", s.threads, "intra-op threads (default: cores / (local stages x LOCAL_WORLD_SIZE))")
      ->check(atLeast(1));
  auto* trace = app.add_option("--trace", s.tracePath, "write a Chrome trace (Perfetto) of compute and transfer spans");
  app.add_flag("--json", cmd.json, "print the report as JSON");
  app.add_flag("-q,--quiet", cmd.quiet, "no progress line");
  auto* noVerifyFlag = app.add_flag("--no-verify", noVerify, "skip checking stage files against the manifest's hashes");
  app.add_option("--expect-manifest", s.expectManifestSha256,
                 "refuse the split directory unless manifest.pb's SHA-256 is this one (as pipecut split printed it); "
                 "stage files are then checked by their SHA-256 (split --sha256)")
      ->check([](const std::string& v) { return isSha256Hex(v) ? std::string() : "expected 64 hex digits"; })
      ->excludes(noVerifyFlag);  // a pin whose stage files go unchecked pins nothing
  app.add_flag("--force", s.force,
               "let --output, --trace, --profile and --save-checkpoint replace what pipecut did not write (never an "
               "input, the directory holding one, /, the current or the home directory)");
  auto* stageFormatOpt = app.add_option("--stage-format", stageFormat,
                                        "which stage files run: torchscript (.pt), pt2 (.pt2 through LibTorch's NativeRT; "
                                        "CPU, inference), aoti (AOTInductor packages from pipecut compile; CPU and "
                                        "CUDA, inference) or auto (each stage the best it has for its device: its "
                                        "package, else its .pt, else its .pt2; --json reports which)")
                             ->capture_default_str();
  auto* cpuMatmulOpt = app.add_option("--cpu-matmul", cpuMatmul,
                                      "what runs a TorchScript stage's float32 linear layers on a CPU: onednn (oneDNN, "
                                      "chosen by the CPU's instruction sets), blas (ATen's BLAS, MKL: what PyTorch "
                                      "runs) or auto (blas on Intel CPUs, where MKL runs its best code, onednn on "
                                      "other x86 CPUs); training always runs blas")
                           ->capture_default_str();

  // A weightless split's tensors, from the model's checkpoint: every mode.
  addWeightFlags(&app, s.weights);

  // Where a forward pass's inputs come from (runtime::InputOptions): inference and --profile.
  CLI::App* inputs = app.add_option_group("inputs", "the inputs of inference and --profile");
  auto* inputsPath = inputs->add_option("--inputs", in.inputsPath, "inputs: .safetensors (input.N keys) or a torch.save'd tuple/dict");
  auto* random = inputs->add_flag("--random-inputs", in.randomInputs, "draw inputs from the manifest's shapes and dtypes");
  inputsPath->excludes(random);

  auto* batchSize = inputs->add_option("--batch-size", in.batch, "micro-batch size along dynamic (symbolic) dimensions, for --random-inputs")
      ->check(atLeast(1));
  auto* intHigh = inputs->add_option("--int-high", in.intHigh, "random integer inputs lie in [0, N)")->capture_default_str()->check(atLeast(1));
  auto* decodeStep = inputs->add_flag("--decode-step", in.decodeStep,
                                      "--profile of a KV-cache program (as --generate runs): one decode step, token ids "
                                      "[B, 1] drawn from the vocabulary (--seed), cache position 0");
  for (CLI::Option* other : {inputsPath, random, batchSize, intHigh}) decodeStep->excludes(other);
  auto* iterations = inputs->add_option("--iterations", o.iterations, "measured passes over the batch (--profile: 10)")
                         ->capture_default_str()
                         ->check(atLeast(1));
  auto* warmup = inputs->add_option("--warmup", o.warmup, "unmeasured passes first (--profile: 2)")
                     ->capture_default_str()
                     ->check(atLeast(0));

  // Inference's pipeline only (runtime::InferenceOptions).
  CLI::App* pipeline = app.add_option_group("inference", "the micro-batched pipeline");
  pipeline->add_option("--check", o.checkPath, "reference outputs (.safetensors, output.N keys); exit 4 on mismatch");
  pipeline->add_option("--atol", o.atol, "absolute tolerance for --check (default: by dtype, as torch.testing)")
      ->check(nonNegativeReal());
  pipeline->add_option("--rtol", o.rtol, "relative tolerance for --check (default: by dtype, as torch.testing)")
      ->check(nonNegativeReal());
  pipeline->add_flag("--exact", o.exact, "--check demands bitwise equality (for references computed on this machine)");
  pipeline->add_option("--queue-depth", o.queueDepth, "micro-batches a stage may receive ahead")
      ->capture_default_str()
      ->check(atLeast(1));


  // Shared by inference, generation and compiled training.
  auto* seedOpt = app.add_option("--seed", in.seed,
                                 "seed for --random-inputs, --generate's top-p draws and the random ops (dropout) of "
                                 "--train --stage-format aoti")
                      ->capture_default_str();
  auto* outputOpt = app.add_option("--output", o.outputPath,
                                   "write the merged outputs (.safetensors); --generate: the tokens (JSON lines)");

  // Training (runtime::TrainOptions).
  CLI::App* trainGroup = app.add_option_group("training", "--train and what it takes");
  auto* train = trainGroup->add_flag("--train", training, "train: the program's single output is a scalar loss; one optimizer "
                                                          "step per batch of M micro-batches (gradients of the mean micro-batch loss)");
  std::vector<CLI::Option*> trainOnly = {
      trainGroup->add_option("--data", t.dataPath, "training data (.safetensors, input.<i> keys): dimension 0 holds the steps' "
                                                   "batches one after another"),
      trainGroup->add_option("--steps", t.steps, "optimizer steps (default: every step the data holds)")->check(atLeast(1)),
      trainGroup->add_option("--optimizer", t.optimizer.name, "sgd or adamw")->capture_default_str(),
      trainGroup->add_option("--lr", t.optimizer.lr, "learning rate")->capture_default_str()->check(positiveReal()),
      trainGroup->add_option("--momentum", t.optimizer.momentum, "SGD momentum")->capture_default_str()->check(nonNegativeReal()),
      trainGroup->add_option("--weight-decay", t.optimizer.weightDecay, "weight decay (AdamW: decoupled)")
          ->capture_default_str()
          ->check(nonNegativeReal()),
      trainGroup->add_option("--betas", betas, "AdamW betas, e.g. 0.9,0.999"),
      trainGroup->add_option("--eps", t.optimizer.eps, "AdamW epsilon")->capture_default_str()->check(positiveReal()),
      trainGroup->add_option("--save-checkpoint", t.saveCheckpoint, "after the last step, write parameters and optimizer state "
                                                                    "here (a directory, replaced atomically)"),
      trainGroup->add_option("--load-checkpoint", t.loadCheckpoint, "resume from a checkpoint written by --save-checkpoint"),
      trainGroup->add_option("--schedule-file", t.scheduleFile,
                             "run this schedule: torch.distributed.pipelining's action CSV (compute-only: a row per rank, "
                             "cells {stage}{F|B|I|W}{microbatch}), checked by simulation first"),
      trainGroup->add_option("--dump-schedule", t.dumpSchedule,
                             "write the schedule run, in the same CSV format (replaced atomically)")};
  for (auto* opt : trainOnly) opt->needs(train);
  // Training takes its data, not inference's inputs or pipeline; it needs
  // autograd, which runs .pt stages.
  inputs->excludes(train);
  pipeline->excludes(train);
  train->excludes(cpuMatmulOpt);
  train->excludes(outputOpt);

  // Generation (runtime::GenerateOptions).
  runtime::GenerateOptions& g = cmd.generate;
  bool generating = false;
  std::string sampling = "greedy";
  int64_t eos = -1;
  CLI::App* genGroup = app.add_option_group("generation", "--generate and what it takes");
  auto* generate = genGroup->add_flag("--generate", generating,
                                      "generate tokens: the program is a decode step with its KV cache (state); prompts in, "
                                      "tokens out, several sequence groups (slots) in flight");
  std::vector<CLI::Option*> genOnly = {
      genGroup->add_option("--prompts", g.promptsPath, "prompts (JSON lines: {\"id\": ..., \"prompt\": [token ids]})"),
      genGroup->add_option("--max-new-tokens", g.maxNewTokens, "tokens to generate per sequence")
          ->capture_default_str()
          ->check(atLeast(1)),
      genGroup->add_option("--eos", eos, "a sequence ends when it generates this token")->check(atLeast(0)),
      genGroup->add_option("--sampling", sampling, "greedy (argmax) or top-p")->capture_default_str(),
      genGroup->add_option("--temperature", g.temperature, "top-p: logits are divided by this")
          ->capture_default_str()
          ->check(positiveReal()),
      genGroup->add_option("--top-p", g.topP, "top-p: the smallest set of tokens whose probability reaches this")
          ->capture_default_str()
          ->check(realIn(0, 1, true, false, "a number in (0, 1]")),
      genGroup->add_option("--slots", g.slots, "sequence groups in flight, one exported batch each (default: one more than the stages; 1 for one stage)")
          ->check(atLeast(1)),
      genGroup->add_option("--prefill-chunk", g.prefillChunk,
                           "most prompt tokens per step (default: as many as the program takes); smaller chunks "
                           "interleave prefill with the other slots' decoding, fewer bubbles")
          ->check(atLeast(1)),
      genGroup->add_option("--check-tokens", g.checkTokensPath,
                           "reference tokens (JSON lines as --output writes them); exit 4 at the first that differs")};
  for (auto* opt : genOnly) opt->needs(generate);
  // --seed and --output are shared with inference; --generate reads them too.
  inputs->excludes(generate);
  generate->excludes(train);
  for (const char* name : {"--check", "--atol", "--rtol", "--exact", "--queue-depth"})
    generate->excludes(app.get_option(name));

  // --profile: one stage, one process, one call per batch.
  auto* profile = app.add_option("--profile", cmd.profilePath,
                                 "time every node of a one-stage split (spec {\"split_points\": {}}) and write the "
                                 "times to this JSON file; the whole batch is one forward call");
  profile->excludes(train);
  profile->excludes(stageFormatOpt);
  pipeline->excludes(profile);
  for (const char* name : {"--microbatches", "--schedule", "--stage-ranks", "--timeout", "--backend", "--trace"})
    profile->excludes(app.get_option(name));
  profile->excludes(generate);
  profile->excludes(outputOpt);
  (void)trace;

  try {
    app.parse(argc, argv);
    if (!unexpected.empty()) throw CLI::ExtrasError(unexpected);
    // A path given as "" names nothing: a usage error, not a directory "".
    const std::pair<const char*, const std::string*> paths[] = {
        {"dir", &s.dir},           {"--profile", &cmd.profilePath}, {"--inputs", &in.inputsPath},
        {"--check", &o.checkPath}, {"--output", &o.outputPath},     {"--trace", &s.tracePath},
        {"--data", &t.dataPath},   {"--save-checkpoint", &t.saveCheckpoint}, {"--load-checkpoint", &t.loadCheckpoint},
        {"--prompts", &g.promptsPath}, {"--check-tokens", &g.checkTokensPath},
        {"--schedule-file", &t.scheduleFile}, {"--dump-schedule", &t.dumpSchedule}};
    for (const auto& [name, value] : paths)
      if (app.get_option(name)->count() && value->empty()) throw CLI::ValidationError(name, "expected a path, got an empty one");
    for (const std::string& w : s.weights.sources)
      if (w.empty()) throw CLI::ValidationError("--weights", "expected a path, got an empty one");
    auto format = runtime::parseStageFormat(stageFormat);
    if (!format) throw CLI::ValidationError("--stage-format", "expected torchscript, pt2, aoti or auto");
    s.stageFormat = *format;
    auto matmul = runtime::parseCpuMatmul(cpuMatmul);
    if (!matmul) throw CLI::ValidationError("--cpu-matmul", "expected auto, onednn or blas");
    s.cpuMatmul = *matmul;
    s.devices.clear();
    for (size_t start = 0;;) {
      size_t comma = devices.find(',', start);
      std::string d = devices.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (d.empty()) throw CLI::ValidationError("--devices", "expected cpu, cuda or cuda:N separated by commas, got '" + devices + "'");
      s.devices.push_back(d);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!stageRanks.empty()) s.stageRanks = rankList(stageRanks);
    if (training) {
      if (!t.scheduleFile.empty() && app.get_option("--schedule")->count())
        throw CLI::ValidationError("--schedule-file", "is a schedule itself: leave out --schedule");
      auto kind = runtime::parseTrainSchedule(app.get_option("--schedule")->count() ? schedule : "1f1b");
      if (!kind) throw CLI::ValidationError("--schedule", "expected gpipe, 1f1b, interleaved-1f1b or zb1p");
      t.schedule = *kind;
      // Training runs a stage through autograd over its TorchScript module,
      // or through pipecut compile --train's programs.
      if (s.stageFormat != runtime::StageFormat::TorchScript && s.stageFormat != runtime::StageFormat::Aoti)
        throw CLI::ValidationError("--stage-format", "--train runs torchscript (autograd) or aoti (pipecut compile --train's programs)");
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
      if (seedOpt->count() && s.stageFormat != runtime::StageFormat::Aoti)
        throw CLI::ValidationError("--seed", "with --train, seeds the random ops of --stage-format aoti's programs; "
                                             "TorchScript stages draw from the process's generator");
    } else if (schedule == "gpipe") {
      o.schedule = runtime::Schedule::GPipe;
    } else if (schedule == "1f1b") {
      o.schedule = runtime::Schedule::OneFOneB;
    } else {
      throw CLI::ValidationError("--schedule", "expected gpipe or 1f1b (interleaved-1f1b and zb1p: with --train)");
    }
    if (profile->count() && cmd.profilePath.empty()) throw CLI::ValidationError("--profile", "needs a file name");
    if (decodeStep->count() && !profile->count())
      throw CLI::ValidationError("--decode-step", "times one decode step: give it with --profile PROFILE.json");
    if (generating) {
      if (g.promptsPath.empty()) throw CLI::ValidationError("--prompts", "--generate needs --prompts FILE.jsonl");
      if (sampling == "greedy") g.sampling = runtime::Sampling::Greedy;
      else if (sampling == "top-p") g.sampling = runtime::Sampling::TopP;
      else throw CLI::ValidationError("--sampling", "expected greedy or top-p");
      if (eos >= 0) g.eos = eos;
      if (app.get_option("--schedule")->count()) throw CLI::ValidationError("--schedule", "--generate keeps its own order");
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
  s.verifyHashes = !noVerify;
  s.progress = !cmd.quiet && !cmd.json && isatty(STDERR_FILENO);
  if (profile->count()) {
    // One pass is too few to time: the first calls of a TorchScript method
    // profile and optimize it. An explicit --warmup/--iterations is kept.
    if (warmup->count() == 0) o.warmup = 2;
    if (iterations->count() == 0) o.iterations = 10;
    cmd.mode = RunCommand::Mode::Profile;
  } else {
    cmd.mode = training ? RunCommand::Mode::Train : generating ? RunCommand::Mode::Generate : RunCommand::Mode::Run;
  }
  t.session = s;
  g.session = s;
  g.seed = in.seed;
  t.seed = in.seed;
  g.outputPath = o.outputPath;
  return cmd;
}

}  // namespace pipecut::cli
