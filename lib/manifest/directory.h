#pragma once
// A split directory as pipecut writes it: manifest.pb (the manifest),
// manifest.json (the same manifest for people and scripts) and the stage
// files they list, nothing else. Every reader of a split (verify, the
// runner, its profiler and trainer) opens it here, so that all of them hold
// a directory to the same rules: both manifests present and in agreement,
// and, when the caller pins one, exactly the manifest a CI job produced.
#include <string>
#include <vector>

#include "manifest/manifest.h"

namespace pipecut {

struct SplitDirectory {
  std::string dir;
  Manifest manifest;
  // SHA-256 of manifest.pb's bytes: what `pipecut split` prints and what
  // --expect-manifest pins. The stage files are pinned through it only as
  // strongly as the manifest's digests of them: their SHA-256 (split
  // --sha256); XXH3-128 guards against accidents, not against a forger.
  std::string manifestSha256;
};

// Reads manifest.pb and manifest.json; refuses (InvalidInput, naming the
// directory and the file) a missing or malformed one, two that disagree, and
// with `expectManifestSha256` (lowercase or uppercase hex) a manifest.pb
// whose SHA-256 differs.
SplitDirectory openSplitDirectory(const std::string& dir, const std::string& expectManifestSha256 = "");

// Writes DIR/manifest.json and DIR/manifest.pb (both new files) for `m`;
// returns manifest.pb's SHA-256. What split and compile write into the
// directory they stage.
std::string writeManifests(const std::string& dir, const Manifest& m);

// manifest.json, manifest.pb and every stage file the manifest lists.
std::vector<std::string> listedFiles(const Manifest& m);

// For support::Destination::previousOutput: "" when `dir` holds a pipecut
// manifest and only what it lists, else what is in the way.
std::string splitDirectoryInTheWay(const std::string& dir);

}  // namespace pipecut
