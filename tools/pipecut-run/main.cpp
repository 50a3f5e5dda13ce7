// pipecut-run: execute a pipecut split directory as a micro-batched pipeline,
// (--train) train it, or (--profile) time each node of a one-stage split.
// Exit codes: 0 ok, 1 usage, 2 invalid input, 3 a bug in pipecut,
// 4 --check mismatch, 5 a rank failed or timed out in a multi-process run,
// 6 the environment refused (disk full, read-only, permission).
#include <cstdlib>
#include <iostream>

#include "options.h"
#include "runtime/generate/generate.h"
#include "runtime/inference.h"
#include "runtime/profile.h"
#include "runtime/train/train.h"
#include "support/error.h"
#include "support/exit_status.h"

int main(int argc, char** argv) {
  using namespace pipecut;
  cli::RunCommand cmd = cli::parseRunCommand(argc, argv);
  try {
    switch (cmd.mode) {
      case cli::RunCommand::Mode::Exit:
        (cmd.exitCode == 0 ? std::cout : std::cerr) << cmd.text;
        return cmd.exitCode;
      case cli::RunCommand::Mode::Profile: {
        runtime::ProfileReport r = runtime::runProfile(cmd.inference, cmd.profilePath);
        std::cout << (cmd.json ? runtime::profileSummaryJson(r) + "\n" : runtime::profileText(r));
        return 0;
      }
      case cli::RunCommand::Mode::Train: {
        runtime::TrainReport r = runtime::runTraining(cmd.train);
        if (r.rank == 0) std::cout << (cmd.json ? runtime::trainReportJson(r) + "\n" : runtime::trainReportText(r));
        return 0;
      }
      case cli::RunCommand::Mode::Generate: {
        runtime::GenerateReport r = runtime::runGeneration(cmd.generate);
        if (r.rank == 0) std::cout << (cmd.json ? runtime::generateReportJson(r) + "\n" : runtime::generateReportText(r));
        return r.checked && !r.checkOk ? 4 : 0;
      }
      case cli::RunCommand::Mode::Run: {
        runtime::RunReport r = runtime::runInference(cmd.inference);
        if (r.rank == 0) std::cout << (cmd.json ? runtime::reportJson(r) + "\n" : runtime::reportText(r));
        return r.checked && !r.checkOk ? 4 : 0;
      }
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::RankFailed) {
      // "rank R: cause", as every rank prints it. The process ends here, not
      // through destructors: c10d's threads may still wait on a dead peer.
      std::cerr << "pipecut-run: " << e.what() << std::endl;
      std::_Exit(e.exitCode());
    }
    return support::exitStatusFor(std::current_exception(), "pipecut-run");
  } catch (...) {
    return support::exitStatusFor(std::current_exception(), "pipecut-run");
  }
  return 3;
}
