// `pipecut split` and `pipecut verify`: flags to a driver request, results to stdout.
#include <iostream>
#include <sstream>

#include "commands.h"
#include "driver/report.h"
#include "driver/split.h"
#include "driver/verify.h"
#include "support/error.h"
#include "support/phase_times.h"
#include "support/progress.h"

namespace pipecut::cli {

int runSplit(const SplitOptions& o) {
  driver::SplitRequest r;
  r.torchscript = r.pt2 = false;
  std::stringstream ss(o.formats);
  for (std::string f; std::getline(ss, f, ',');) {
    if (f == "torchscript") r.torchscript = true;
    else if (f == "pt2") r.pt2 = true;
    else throw Error(ErrorKind::Usage, "", "--format", "unknown format '" + f + "' (torchscript, pt2)");
  }
  r.model = o.model;
  r.spec = o.spec;
  partition::BalanceResult balanced;
  if (!o.balance.empty()) {
    r.balanceBy = partition::parseBalanceBy(o.balance);
    if (o.stages < 1) throw Error(ErrorKind::InvalidInput, "", "--stages", "needs at least 1 stage, got " + std::to_string(o.stages));
    r.stages = o.stages;
    if (r.balanceBy == partition::BalanceBy::Time && o.cost.empty())
      throw Error(ErrorKind::Usage, "", "--cost", "--balance time needs --cost PROFILE.json (pipecut-run DIR --profile)");
    if (r.balanceBy != partition::BalanceBy::Time && !o.cost.empty())
      throw Error(ErrorKind::Usage, "", "--cost", "a profile is for --balance time only");
    r.costProfile = o.cost;
  }
  r.output = o.output;
  r.recompute = !o.noRecompute;
  r.inlineGradRegions = o.inlineGradRegions;
  r.verifyEach = o.verifyEach;
  r.preview = o.preview;
  r.hashSource = o.hashSource;
  r.stageSha256 = o.stageSha256;
  r.dotFile = o.dotFile;
  r.jobs = o.jobs;
  r.progress = !o.quiet && support::stderrIsTerminal();
  r.exitsAfter = true;  // main returns right after
  r.force = o.force;
  r.weights = o.weights;
  r.bindAtRun = o.bindAt == "run";
  r.support = {o.support, o.inlineGradRegions};
  r.minSupportedNodes = o.minSupportedNodes;
  std::string manifestSha256;
  driver::SplitWeights bound;
  Manifest m = driver::runSplit(r, &balanced, &manifestSha256, &bound);
  if (r.stages > 0) std::cout << driver::balanceText(balanced);
  if (o.preview) {
    support::ScopedPhase phase("report");
    std::cout << driver::previewText(m) << std::flush;
  }
  else
    std::cout << "wrote " << m.stages.size() << " stages to " << o.output << "\n"
              << "manifest sha256: " << manifestSha256 << "\n";
  for (const auto& st : m.stages)
    for (const auto& missing : st.missing)
      std::cerr << "pipecut: warning: stage " << st.index << " has no " << missing.format
                << " file, the format cannot express it: " << missing.reason << "\n";
  if (bound.source) {
    std::cerr << driver::bindingSummary(bound.binding, *bound.source, o.verbose);
  } else if (m.weightless() && !o.preview) {
    size_t n = 0;
    for (const auto& st : m.stages) n += st.external.size();
    std::cerr << "pipecut: the program was exported on the meta device: a weightless split (" << n
              << " tensors to bind at run time: pipecut-run " << o.output << " --weights CHECKPOINT)\n";
  }
  return 0;
}

int runVerify(const VerifyOptions& o) {
  driver::VerifyRequest r;
  r.dir = o.dir;
  r.progress = !o.quiet && !o.json && support::stderrIsTerminal();
  r.sha256 = o.sha256 || !o.expectManifest.empty();
  r.expectManifestSha256 = o.expectManifest;
  driver::VerifyResult v = driver::verifyDirectory(r);
  if (o.json)
    std::cout << "{\"ok\": true, \"files\": " << v.files << ", \"digests\": \"" << v.digests
              << "\", \"manifest_sha256\": \"" << v.manifestSha256 << "\"}\n";
  else
    std::cout << "ok: " << v.files << " stage files match " << o.dir << "/manifest (" << v.digests << ")\n"
              << "manifest sha256: " << v.manifestSha256 << "\n";
  return 0;
}

}  // namespace pipecut::cli
