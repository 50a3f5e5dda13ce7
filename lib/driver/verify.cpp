#include "driver/verify.h"

#include <atomic>
#include <filesystem>
#include <set>

#include "manifest/directory.h"
#include "manifest/manifest.h"
#include "manifest/verify.h"
#include "support/error.h"
#include "support/files.h"
#include "support/progress.h"

namespace pipecut::driver {

namespace fs = std::filesystem;

VerifyResult verifyDirectory(const VerifyRequest& r) {
  const SplitDirectory dir = openSplitDirectory(r.dir, r.expectManifestSha256);
  const Manifest& m = dir.manifest;
  const std::vector<std::string> files = listedFiles(m);
  std::set<std::string> listed(files.begin(), files.end());
  // Unlisted files first: cheap, and no reason to hash gigabytes of a directory that is wrong anyway.
  for (const auto& e : fs::directory_iterator(r.dir)) {
    std::string name = e.path().filename().string();
    if (!listed.count(name))
      throw Error(ErrorKind::InvalidInput, r.dir, "file '" + name + "'", "is not listed in the manifest");
  }

  std::atomic<uint64_t> hashed{0};
  StageFileCheck check;
  check.threads = r.threads;
  check.sha256 = r.sha256;
  check.progress = [&](size_t n) { hashed += n; };
  const double total = static_cast<double>(stageFileBytes(m, check));
  support::ProgressLine line(r.progress, [&](double s) {
    double done = static_cast<double>(hashed.load());
    return "pipecut: verified " + support::humanBytes(done) + " of " + support::humanBytes(total) + ", " +
           support::humanBytes(done / s) + "/s";
  });
  const StageFilesVerified verified = verifyStageFiles(r.dir, m, check);
  VerifyResult result;
  result.files = verified.files;
  result.manifestSha256 = dir.manifestSha256;
  if (verified.xxh3_128) result.digests = digestName(Digest::Xxh3_128);
  if (verified.sha256) result.digests += std::string(result.digests.empty() ? "" : " and ") + digestName(Digest::Sha256);
  return result;
}

}  // namespace pipecut::driver
