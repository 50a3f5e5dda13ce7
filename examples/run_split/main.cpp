// run_split: opens a split directory with libpipecut, then runs inference
// through its stages (or, with --train, training steps; with --generate,
// greedy decoding of a split LLM) and prints the report. A consumer of the
// installed package (examples/run_split/README.md).
//
//   run_split DIR [--inputs F.safetensors] [--check REF.safetensors] [-m N] [--iterations N]
//   run_split DIR --train DATA.safetensors [--steps N] [-m N]
//   run_split DIR --generate PROMPTS.jsonl [--max-new-tokens N] [--check-tokens REF.jsonl]
//
// Without --inputs it runs random inputs. Exit codes as pipecut-run's
// (docs/exit-codes.md): 0 ok, 1 usage, 2 invalid input, 3 a bug, 4 --check
// found a difference, 6 the environment refused.
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <pipecut/pipecut.h>

namespace {

int usage(const std::string& why) {
  std::cerr << "run_split: " << why << "\n"
            << "usage: run_split DIR [--inputs F] [--check REF] [-m N] [--iterations N]\n"
            << "       run_split DIR --train DATA [--steps N] [-m N]\n"
            << "       run_split DIR --generate PROMPTS [--max-new-tokens N] [--check-tokens REF]\n";
  return 1;
}

void printSplit(const pipecut::runtime::SplitInfo& s) {
  std::cout << "split " << s.dir << ": " << s.stages.size() << " stages, manifest sha256 " << s.manifestSha256
            << ", " << s.verifiedFiles << " files verified (" << s.digests << ", " << s.verifiedBytes << " bytes)\n";
  for (const auto& st : s.stages) {
    std::cout << "  stage " << st.index << ": " << st.nodeCount << " nodes, " << st.parameterBytes
              << " parameter bytes, files";
    for (const auto& f : st.files) std::cout << " " << f.path << " (" << f.format << ")";
    std::cout << "\n";
  }
}

void printStages(const std::vector<pipecut::runtime::StageStats>& stats) {
  for (const auto& s : stats) {
    char line[160];
    std::snprintf(line, sizeof line, "  stage %u on %s: busy %.2f ms (%.0f%%)\n", s.stage, s.device.c_str(), s.busyMs,
                  100 * s.busyFraction);
    std::cout << line;
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace rt = pipecut::runtime;
  if (argc < 2) return usage("no split directory given");
  std::string dir = argv[1], inputs, check, trainData, prompts, checkTokens;
  int microbatches = 1, iterations = 1, steps = 1, maxNewTokens = 16;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage(flag + " needs a value");
    const std::string value = argv[++i];
    try {
      if (flag == "--inputs") inputs = value;
      else if (flag == "--check") check = value;
      else if (flag == "--train") trainData = value;
      else if (flag == "--generate") prompts = value;
      else if (flag == "--check-tokens") checkTokens = value;
      else if (flag == "--max-new-tokens") maxNewTokens = std::stoi(value);
      else if (flag == "-m") microbatches = std::stoi(value);
      else if (flag == "--iterations") iterations = std::stoi(value);
      else if (flag == "--steps") steps = std::stoi(value);
      else return usage("unknown option " + flag);
    } catch (const std::exception&) {
      return usage(flag + " takes a number, not '" + value + "'");
    }
  }

  try {
    // The directory first: both manifests, every stage file's digest.
    const rt::SplitInfo split = rt::openSplit(dir);
    printSplit(split);

    if (!prompts.empty()) {
      rt::GenerateOptions o;
      o.session.dir = dir;
      o.session.verifyHashes = false;
      o.session.expectManifestSha256 = split.manifestSha256;
      o.promptsPath = prompts;
      o.maxNewTokens = maxNewTokens;
      o.checkTokensPath = checkTokens;
      const rt::GenerateReport r = rt::runGeneration(o);
      std::cout << "generate: " << r.stages << " stages, " << r.slots << " slots, " << r.sequences << " sequences, "
                << r.generatedTokens << " tokens in " << r.wallMs << " ms: " << r.decodeTokensPerSecond
                << " decode tokens/s\n";
      printStages(r.stageStats);
      if (r.checked) {
        std::cout << "check tokens: " << (r.checkOk ? "ok" : "FAILED")
                  << (r.checkMessage.empty() ? "" : ": " + r.checkMessage) << "\n";
        if (!r.checkOk) return 4;
      }
      return 0;
    }

    if (!trainData.empty()) {
      rt::TrainOptions o;
      o.session.dir = dir;
      o.session.microbatches = microbatches;
      o.session.verifyHashes = false;  // openSplit has just checked them
      o.session.expectManifestSha256 = split.manifestSha256;  // the directory checked, nothing else
      o.dataPath = trainData;
      o.steps = steps;
      const rt::TrainReport r = rt::runTraining(o);
      std::cout << "train: " << r.stages << " stages, " << r.microbatches << " micro-batches a step (" << r.schedule
                << ", " << r.optimizer << "), " << r.losses.size() << " steps in " << r.wallMs
                << " ms: " << r.samplesPerSecond << " samples/s\n";
      for (size_t k = 0; k < r.losses.size(); ++k) {
        char line[80];
        std::snprintf(line, sizeof line, "  step %llu: loss %.9g\n", static_cast<unsigned long long>(r.firstStep + k + 1),
                      r.losses[k]);
        std::cout << line;
      }
      printStages(r.stageStats);
      return 0;
    }

    rt::InferenceOptions o;
    o.session.dir = dir;
    o.session.microbatches = microbatches;
    o.session.verifyHashes = false;
    o.session.expectManifestSha256 = split.manifestSha256;
    if (inputs.empty()) o.inputs.randomInputs = true;
    o.inputs.inputsPath = inputs;
    o.checkPath = check;
    o.iterations = iterations;
    const rt::RunReport r = rt::runInference(o);
    std::cout << "inference: " << r.stages << " stages, " << r.microbatches << " micro-batches, " << r.samples
              << " samples in " << r.wallMs << " ms: " << r.samplesPerSecond << " samples/s\n";
    printStages(r.stageStats);
    if (r.checked) {
      std::cout << "check: " << (r.checkOk ? "ok" : "FAILED") << ", max abs error " << r.maxAbsError
                << (r.checkMessage.empty() ? "" : ": " + r.checkMessage) << "\n";
      if (!r.checkOk) return 4;
    }
    return 0;
  } catch (const pipecut::Error& e) {
    // e.what() names the file and where in it; the kind maps to an exit code.
    std::cerr << "run_split: error: " << e.what() << "\n";
    return e.exitCode();
  } catch (const std::exception& e) {
    std::cerr << "run_split: internal error: " << e.what() << "\n";
    return 3;
  }
}
