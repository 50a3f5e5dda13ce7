// `pipecut compile`: flags to a driver request, one line per stage to stdout.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "driver/compile.h"
#include "support/progress.h"

namespace pipecut::cli {

int runCompile(const CompileOptions& o) {
  driver::CompileRequest r;
  r.dir = o.dir;
  r.device = o.device;
  r.jobs = o.jobs;
  r.python = o.python;
  r.cacheDir = o.cache;
  r.useCache = !o.noCache;
  r.progress = !o.quiet && !o.json && support::stderrIsTerminal();
  r.verbose = o.verbose;
  r.inductorConfig = o.inductorConfig;
  r.cpuMatmul = o.cpuMatmul;
  r.train = o.train;
  r.recompute = o.recompute;
  driver::CompileResult res = driver::compileDirectory(r);
  if (o.json) {
    nlohmann::json j = {{"ok", true}, {"device", o.device}, {"python", res.python}, {"torch_version", res.torchVersion},
                        {"manifest_sha256", res.manifestSha256}, {"seconds", res.seconds}, {"stages", nlohmann::json::array()}};
    for (const auto& s : res.stages)
    {
      nlohmann::json row = {{"stage", s.stage}, {"path", s.path}, {"how", s.how}, {"compile_seconds", s.compileSeconds},
                            {"bytes", s.bytes}, {"key", s.key}};
      if (o.train) row["programs"] = s.programs;
      j["stages"].push_back(std::move(row));
    }
    std::cout << j.dump() << "\n";
    return 0;
  }
  if (o.quiet) return 0;
  for (const auto& s : res.stages) {
    if (s.how == "skipped") {
      std::cout << "stage " << s.stage << ": skipped, split --support marked it unsupported (pipecut-run "
                   "--stage-format auto runs its .pt or .pt2)\n";
      continue;
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f s", s.compileSeconds);
    std::string what = s.path;
    if (o.train) {
      what = "training programs";
      for (const auto& p : s.programs) what += " " + p;
    }
    std::cout << "stage " << s.stage << ": " << what << " " << s.how
              << (s.how == "compiled" ? std::string(" in ") + secs
                  : s.how == "cached" ? std::string(" (compiled in ") + secs + " before)"
                                      : std::string(" (unchanged)"))
              << ", " << support::humanBytes(static_cast<double>(s.bytes)) << "\n";
  }
  std::cout << "manifest sha256: " << res.manifestSha256 << "\n";
  return 0;
}

}  // namespace pipecut::cli
