#include "manifest/verify.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "support/error.h"
#include "support/digest.h"
#include "support/parallel.h"

namespace pipecut {

namespace {

struct Selected {
  const Stage* stage;
  const StageFile* file;
  std::string path;
};

std::vector<Selected> selectFiles(const std::string& dir, const Manifest& m, const StageFileCheck& check) {
  std::vector<Selected> out;
  for (const auto& st : m.stages)
    for (const auto& f : st.files)
      if (!check.select || check.select(st, f)) out.push_back({&st, &f, dir + "/" + f.path});
  return out;
}

std::string where(const Selected& s) {
  return "stage " + std::to_string(s.stage->index) + " file '" + s.file->path + "'";
}

// The digest to compare for `f`.
Digest checkedDigest(const StageFile& f, const StageFileCheck& check) {
  return check.sha256 || f.xxh3_128.empty() ? Digest::Sha256 : Digest::Xxh3_128;
}

}  // namespace

uint64_t stageFileBytes(const Manifest& m, const StageFileCheck& check) {
  uint64_t n = 0;
  for (const auto& s : selectFiles("", m, check)) n += s.file->bytes;
  return n;
}

StageFilesVerified verifyStageFiles(const std::string& dir, const Manifest& m, const StageFileCheck& check) {
  std::vector<Selected> files = selectFiles(dir, m, check);
  // Sizes first: cheap, and a truncated file is reported as such rather than
  // as a hash mismatch after reading gigabytes.
  std::vector<std::string> paths;
  for (const auto& s : files) {
    struct stat st {};
    if (::stat(s.path.c_str(), &st) != 0) {
      if (errno == ENOENT) throw Error(ErrorKind::InvalidInput, dir, where(s), "missing");
      throw Error(ErrorKind::InvalidInput, dir, where(s), std::string("cannot read: ") + std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::InvalidInput, dir, where(s), "is not a regular file");
    if (check.sha256 && s.file->sha256.empty())
      throw Error(ErrorKind::InvalidInput, dir, where(s),
                  "the manifest records no sha256 for it (pipecut split --sha256 records one); its xxh3_128 can be "
                  "checked without --sha256");
    if (static_cast<uint64_t>(st.st_size) != s.file->bytes)
      throw Error(ErrorKind::InvalidInput, dir, where(s),
                  "is " + std::to_string(st.st_size) + " bytes, the manifest says " + std::to_string(s.file->bytes));
    paths.push_back(s.path);
  }
  std::vector<std::string> digests(files.size());
  try {
    support::parallelFor(files.size(), check.threads, [&](size_t i) {
      digests[i] = digestFile(checkedDigest(*files[i].file, check), paths[i], check.progress);
    });
  } catch (const Error& e) {
    throw Error(e.kind(), dir, e.file(), e.message());
  }
  StageFilesVerified result;
  result.files = files.size();
  for (size_t i = 0; i < files.size(); ++i) {
    const StageFile& f = *files[i].file;
    const Digest d = checkedDigest(f, check);
    const std::string& recorded = d == Digest::Sha256 ? f.sha256 : f.xxh3_128;
    if (digests[i] != recorded)
      throw Error(ErrorKind::InvalidInput, dir, where(files[i]),
                  std::string(digestName(d)) + " " + digests[i] + " differs from the manifest's " + recorded);
    (d == Digest::Sha256 ? result.sha256 : result.xxh3_128) = true;
  }
  return result;
}

}  // namespace pipecut
