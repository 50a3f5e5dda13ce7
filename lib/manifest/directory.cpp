#include "manifest/directory.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "support/error.h"
#include "support/files.h"
#include "support/sha256.h"
#include "support/staging.h"

namespace pipecut {

namespace fs = std::filesystem;

std::string writeManifests(const std::string& dir, const Manifest& m) {
  const std::string json = manifestToJson(m), binary = manifestToBinary(m);
  for (const auto& [name, text] : {std::pair<const char*, const std::string*>{"manifest.json", &json}, {"manifest.pb", &binary}}) {
    support::HashingWriter w((fs::path(dir) / name).string(), false);
    w.write(text->data(), text->size());
    w.finish();
  }
  return sha256Bytes(binary.data(), binary.size());
}

std::vector<std::string> listedFiles(const Manifest& m) {
  std::vector<std::string> out = {"manifest.json", "manifest.pb"};
  for (const auto& st : m.stages)
    for (const auto& f : st.files) out.push_back(f.path);
  return out;
}

SplitDirectory openSplitDirectory(const std::string& dir, const std::string& expect) {
  const fs::path base(dir);
  const std::string pbPath = (base / "manifest.pb").string(), jsonPath = (base / "manifest.json").string();
  std::error_code ec;
  if (!fs::is_directory(base, ec)) throw Error(ErrorKind::InvalidInput, dir, "", "is not a split directory (no such directory)");
  for (const std::string* p : {&pbPath, &jsonPath})
    if (!fs::is_regular_file(*p, ec))
      throw Error(ErrorKind::InvalidInput, dir, fs::path(*p).filename().string(),
                  "is missing: a split directory holds manifest.pb and manifest.json (pipecut split writes both)");
  SplitDirectory d;
  d.dir = dir;
  const std::string binary = support::readFile(pbPath, "the manifest");
  d.manifestSha256 = sha256Bytes(binary.data(), binary.size());
  if (!expect.empty()) {
    std::string want = expect;
    std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return std::tolower(c); });
    if (want != d.manifestSha256)
      throw Error(ErrorKind::InvalidInput, dir, "manifest.pb",
                  "is not the pinned manifest: its SHA-256 is " + d.manifestSha256 + ", --expect-manifest says " + want);
  }
  d.manifest = manifestFromBinary(binary, pbPath);
  Manifest fromJson = manifestFromJson(support::readFile(jsonPath, "the manifest"), jsonPath);
  if (manifestToBinary(fromJson) != manifestToBinary(d.manifest))
    throw Error(ErrorKind::InvalidInput, dir, "manifest.json", "disagrees with manifest.pb");
  return d;
}

std::string splitDirectoryInTheWay(const std::string& dir) {
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec) return "";  // nothing to lose
  Manifest m;
  try {
    m = readManifest(dir);
  } catch (const Error&) {
    return "is " + support::describeDirectory(dir) + ", not a split pipecut wrote (no readable manifest)";
  }
  return support::unlistedEntries(dir, listedFiles(m), "its manifest");
}

}  // namespace pipecut
