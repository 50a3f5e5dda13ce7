// pipecut: cut torch.export programs into pipeline stages.
// Exit codes: 0 ok, 1 usage, 2 invalid input, 3 a bug in pipecut, 6 the
// environment refused (disk full, read-only, permission): support/exit_status.h.
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "weights_flags.h"
#include "support/sha256.h"
#include "support/error.h"
#include "support/exit_status.h"
#include "support/phase_times.h"

int main(int argc, char** argv) {
  using namespace pipecut;
  CLI::App app{"pipecut: cut torch.export (.pt2) programs into pipeline stages"};
  app.set_version_flag("--version", std::string("pipecut ") + PIPECUT_VERSION + " (LibTorch " + PIPECUT_LIBTORCH_VERSION + ")");
  app.require_subcommand(1);

  cli::InspectOptions inspect;
  auto* ins = app.add_subcommand("inspect", "Describe a .pt2: versions, inputs and outputs, operators, "
                                            "higher-order regions, the module tree with parameter bytes");
  ins->add_option("model", inspect.model, "the .pt2 file")->required();
  ins->add_flag("--json", inspect.json, "machine-readable output");
  ins->add_option("--dot", inspect.dotFile, "also write a Graphviz drawing, one cluster per module");
  const char* forceHelp = "replace an output pipecut did not write (a file, a link, a directory of other files); "
                          "never an input, the directory holding one, /, the current or the home directory";
  ins->add_flag("--force", inspect.force, forceHelp);
  cli::addWeightFlags(ins, inspect.weights);
  const char* supportHelp =
      "a target whose support ends cut stages (split) or whose verdicts are reported (inspect): aoti, aoti-cuda "
      "(what pipecut compile compiles), nativert (what NativeRT in this LibTorch loads), torchscript (what pipecut "
      "emits as TorchScript), or an operator dictionary in torch.fx's OperatorSupport shape, as a JSON file or "
      "inline ('{\"aten.linear.default\": null, \"aten.gelu.default\": [[\"bfloat16\"]]}')";
  ins->add_option("--support", inspect.support, supportHelp);
  ins->add_flag("--inline-grad-regions", inspect.inlineGradRegions,
                "--support nativert: as for stages split with --inline-grad-regions (grad regions inlined, top-level maps "
                "rewritten)");

  cli::NormalizeOptions norm;
  auto* nrm = app.add_subcommand("normalize", "Rewrite a .pt2 with placeholders first, a stable topological "
                                              "order, duplicate attribute reads merged and dead code removed");
  nrm->add_option("model", norm.model, "the .pt2 file")->required();
  nrm->add_option("-o,--output", norm.output, "output .pt2 (written atomically)")->required();
  nrm->add_flag("--module-contiguous", norm.moduleContiguous,
                "keep each module call's nodes together where data flow allows");
  nrm->add_flag("--verify-each", norm.verifyEach, "verify the graph after every pass");
  nrm->add_flag("--force", norm.force, forceHelp);

  cli::SplitOptions split;
  auto* spl = app.add_subcommand("split", "Cut a .pt2 into pipeline stages: one TorchScript (.pt) and one .pt2 module per "
                                          "stage plus a manifest of which value flows where");
  spl->add_option("model", split.model, "the .pt2 file")->required();
  auto* splSpec = spl->add_option("--spec", split.spec, "split spec (JSON): split_points, stages or split_after_nodes");
  auto* splStages = spl->add_option("--stages", split.stages, "cut automatically into N stages (with --balance; no --spec)");
  auto* splBalance = spl->add_option("--balance", split.balance,
                                     "what --stages balances: params (parameter and buffer bytes), flops (counted "
                                     "from the graph's shapes) or time (measured: --cost)");
  auto* splCost = spl->add_option("--cost", split.cost, "--balance time: the profile written by pipecut-run --profile");
  splSpec->excludes(splStages);
  splStages->needs(splBalance);
  splBalance->needs(splStages);
  splCost->needs(splBalance);
  auto* splOut = spl->add_option("-o,--output", split.output, "output directory (replaced atomically)");
  spl->add_option("--format", split.formats, "comma-separated: torchscript, pt2")->capture_default_str();
  spl->add_flag("--no-recompute", split.noRecompute,
                "send every boundary value instead of recomputing cheap ones in the consuming stage");
  spl->add_flag("--inline-grad-regions", split.inlineGradRegions,
                "write .pt2 stages for LibTorch's NativeRT (pipecut-run --stage-format pt2): no_grad and "
                "autocast-disabling regions inlined, maps of static length unrolled; inference only");
  spl->add_flag("--preview", split.preview, "print per-stage nodes, parameter bytes and boundary bytes; write nothing");
  spl->add_flag("--hash-source", split.hashSource,
                 "also record the whole .pt2's SHA-256 in the manifest (source_sha256, as sha256sum prints it; reads every "
                 "weight). Without it the manifest identifies the source by source_directory_sha256 alone");
  spl->add_flag("--sha256", split.stageSha256,
                "also record each stage file's SHA-256 (its cryptographic identity, checked by pipecut verify "
                "--sha256; about a core-second per 2 GB written). XXH3-128 is always recorded");
  spl->add_option("--dot", split.dotFile, "write a Graphviz drawing of the stages and the values between them");
  spl->add_flag("--verify-each", split.verifyEach, "verify the graph after every pass");
  spl->add_option("-j,--jobs", split.jobs, "stage files written at once (default: two per core)");
  spl->add_flag("-q,--quiet", split.quiet, "no progress line");
  spl->add_flag("-v,--verbose", split.verbose, "also list the checkpoint tensors the program does not use");
  spl->add_flag("--force", split.force, forceHelp);
  auto* splWeights = cli::addWeightFlags(spl, split.weights);
  spl->add_option("--bind-at", split.bindAt,
                  "split: the stage files hold the checkpoint's bytes; run: they hold none, the manifest pins each "
                  "tensor's digest, and pipecut-run --weights binds them as stages load")
      ->capture_default_str()
      ->check(CLI::IsMember({"split", "run"}))
      ->needs(splWeights);
  auto* splSupport = spl->add_option("--support", split.support, supportHelp);
  spl->add_option("--min-supported-nodes", split.minSupportedNodes,
                  "--support: a supported run of fewer compute nodes joins its unsupported neighbours")
      ->capture_default_str()
      ->needs(splSupport);

  cli::VerifyOptions verify;
  auto* ver = app.add_subcommand("verify", "Check a split directory: files against the manifest's hashes, manifest against files");
  ver->add_option("dir", verify.dir, "the directory written by pipecut split")->required();
  ver->add_flag("-q,--quiet", verify.quiet, "no progress line");
  ver->add_flag("--json", verify.json, "print the result as JSON");
  ver->add_flag("--sha256", verify.sha256,
                "check each file's SHA-256 (its cryptographic identity) instead of its XXH3-128 (accidental change, "
                "at disk speed)");

  ver->add_option("--expect-manifest", verify.expectManifest,
                  "refuse the directory unless manifest.pb's SHA-256 is this one (as pipecut split printed it); "
                  "implies --sha256")
      ->check([](const std::string& v) { return isSha256Hex(v) ? std::string() : "expected 64 hex digits"; });

  cli::CompileOptions compile;
  auto* cmp = app.add_subcommand("compile", "Compile every .pt2 stage of a split into an AOTInductor package "
                                            "(pipecut-run --stage-format aoti); needs Python with torch, the one step that does");
  cmp->add_option("dir", compile.dir, "the directory written by pipecut split (updated in one step)")->required();
  cmp->add_option("--device", compile.device, "what the packages run on: cpu or cuda (compiled and tuned on this machine's GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmp->add_option("-j,--jobs", compile.jobs, "stages compiled at once (default: as cores and memory allow)")
      ->check(CLI::Range(1u, 1024u));
  cmp->add_option("--python", compile.python,
                  "the Python whose torch compiles (default: $PIPECUT_PYTHON, then the setup venv); its torch must be "
                  "the LibTorch pipecut links");
  cmp->add_option("--cache", compile.cache,
                  "where packages are kept by content, so an unchanged stage is never compiled twice (default: "
                  "$PIPECUT_CACHE_DIR/compiled, $XDG_CACHE_HOME/pipecut/compiled or ~/.cache/pipecut/compiled)");
  cmp->add_flag("--no-cache", compile.noCache, "neither read nor fill the cache")->excludes("--cache");
  cmp->add_flag("-q,--quiet", compile.quiet, "no progress line or summary");
  cmp->add_flag("--json", compile.json, "print the result as JSON");
  cmp->add_flag("--verbose", compile.verbose, "show the compiler's own output");
  cmp->add_option("--inductor-config", compile.inductorConfig,
                  "Inductor settings as a JSON object over pipecut's defaults (e.g. '{\"freezing\": true}'); "
                  "recorded in the manifest and part of each package's key");
  cmp->add_option("--cpu-matmul", compile.cpuMatmul,
                  "what runs a CPU package's float32 linear layers: onednn (oneDNN's linear), blas (ATen's BLAS, "
                  "MKL, as PyTorch runs them) or auto (the default: as pipecut-run's auto, blas on Intel CPUs and "
                  "onednn on other x86 CPUs, by the compiling machine's); recorded, settled, with the options")
      ->check(CLI::IsMember({"auto", "onednn", "blas"}));
  auto* cmpTrain = cmp->add_flag("--train", compile.train,
                                 "compile each stage's training programs (forward; input- and weight-gradient backward) "
                                 "for pipecut-run --train --stage-format aoti, from its joint forward/backward graph");
  cmp->add_option("--recompute", compile.recompute,
                  "with --train: which activations the backward recomputes instead of F saving them: none (the "
                  "default), all (F saves only the stage's inputs), or a regular expression over module paths "
                  "(e.g. 'model\\.layers\\.[0-9]+': per-layer activation checkpointing)")
      ->needs(cmpTrain);

  cli::MergeOptions merge;
  auto* mrg = app.add_subcommand("merge", "Merge a training checkpoint (pipecut-run --save-checkpoint) into one "
                                          "safetensors state dict: every model tensor under its FQN, tied names included");
  mrg->add_option("checkpoint", merge.checkpoint, "the checkpoint directory (with checkpoint.json)")->required();
  mrg->add_option("-o,--output", merge.output, "the .safetensors file to write (replaced atomically)")->required();
  mrg->add_flag("-q,--quiet", merge.quiet, "no summary line");
  mrg->add_flag("--force", merge.force, forceHelp);

  try {
    app.parse(argc, argv);
    if (spl->parsed() && !split.preview && split.output.empty())
      throw CLI::RequiredError(splOut->get_name() + " (or --preview)");
    if (spl->parsed() && split.spec.empty() && splStages->count() == 0 && split.support.empty())
      throw CLI::RequiredError("--spec (or --stages N --balance params|flops|time, or --support TARGET)");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "pipecut: " << e.what() << "\nRun with --help for more information.\n";
    return 1;
  }

  struct PrintPhases {
    ~PrintPhases() {
      if (support::phaseTimesWanted()) support::printPhaseTimes();
    }
  } printPhases;
  try {
    if (ins->parsed()) return cli::runInspect(inspect);
    if (nrm->parsed()) return cli::runNormalize(norm);
    if (spl->parsed()) return cli::runSplit(split);
    if (ver->parsed()) return cli::runVerify(verify);
    if (mrg->parsed()) return cli::runMerge(merge);
    if (cmp->parsed()) return cli::runCompile(compile);
  } catch (...) {
    return support::exitStatusFor(std::current_exception(), "pipecut");
  }
  return 1;
}
