// pipecut-run's command line -> cli::parseRunCommand (tools/pipecut-run/
// options.h). The input is the arguments after the program name, separated
// by NUL bytes. A usage error (exit 1) is the expected refusal; a parse that
// is accepted must hold what the runtime relies on: every count positive,
// every time and rate finite and in range, every list as long as its text
// says. Nothing may throw out of the parser.
#include <cmath>
#include <string>
#include <vector>

#include "../../tools/pipecut-run/options.h"
#include "targets.h"

namespace pipecut::fuzz {

int run_options(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"pipecut-run"};
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == 0) {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  args.push_back(cur);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  cli::RunCommand cmd;
  mustSucceed("parseRunCommand", [&] { cmd = cli::parseRunCommand(static_cast<int>(argv.size()), argv.data()); });
  lastOutcome() = {cmd.mode == cli::RunCommand::Mode::Exit ? "usage" : "", cmd.text};
  if (cmd.mode == cli::RunCommand::Mode::Exit) {
    if (cmd.exitCode != 0 && cmd.exitCode != 1) finding("exit code " + std::to_string(cmd.exitCode) + " from parsing");
    return 0;
  }
  const runtime::InferenceOptions& o = cmd.inference;
  const runtime::SessionOptions& ss = o.session;
  const runtime::InputOptions& in = o.inputs;
  auto need = [](bool ok, const char* what) {
    if (!ok) finding(std::string("accepted: ") + what);
  };
  need(!ss.dir.empty(), "no split directory");
  need(ss.microbatches >= 1, "micro-batches < 1");
  need(o.iterations >= 1, "iterations < 1");
  need(o.warmup >= 0, "warmup < 0");
  need(o.queueDepth >= 1, "queue depth < 1");
  need(std::isfinite(ss.timeoutSeconds) && ss.timeoutSeconds > 0, "a timeout that is not finite and positive");
  need(ss.threads >= 0, "threads < 0");
  need(in.intHigh >= 1, "int-high < 1");
  need(in.batch >= 0, "batch size < 0");
  need(!o.atol || (std::isfinite(*o.atol) && *o.atol >= 0), "atol");
  need(!o.rtol || (std::isfinite(*o.rtol) && *o.rtol >= 0), "rtol");
  need(!ss.devices.empty(), "no device");
  for (const auto& d : ss.devices) need(!d.empty(), "an empty device");
  for (int r : ss.stageRanks) need(r >= 0, "a negative rank");
  if (cmd.mode == cli::RunCommand::Mode::Train) {
    const auto& t = cmd.train.optimizer;
    need(cmd.train.steps >= 0, "steps < 0");
    need(std::isfinite(t.lr) && t.lr > 0, "lr");
    need(std::isfinite(t.momentum) && t.momentum >= 0, "momentum");
    need(std::isfinite(t.weightDecay) && t.weightDecay >= 0, "weight decay");
    need(t.beta1 >= 0 && t.beta1 < 1 && t.beta2 >= 0 && t.beta2 < 1, "betas");
    need(std::isfinite(t.eps) && t.eps > 0, "eps");
    need(t.name == "sgd" || t.name == "adamw", "optimizer");
    need(!cmd.train.dataPath.empty(), "training without data");
    need(cmd.train.session.dir == ss.dir, "training without the session's options");
  }
  if (cmd.mode == cli::RunCommand::Mode::Profile) need(!cmd.profilePath.empty(), "a profile without a file");
  return 0;
}

}  // namespace pipecut::fuzz
