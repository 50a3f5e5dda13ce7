// .pt2 bytes -> pt2::ArchiveReader (our own central directory parser and
// local header reads over a memory map; libzip for the older root-level
// layout), then every record as the package reader asks for it. Checked
// afterwards: the records are sorted and unique, each is present with its
// size, its bytes are that size and lie in the file (the mapping is not
// ASan's, so the first and last byte are read: outside it, a crash), and a
// parser reading ahead past a record's end stays in the file.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "pt2/zip_archive.h"
#include "support/zip_directory.h"
#include "targets.h"

namespace pipecut::fuzz {

namespace {

// The reader takes a path: one file per process, rewritten for each input.
const std::string& scratchPath() {
  static const std::string path = [] {
    const std::filesystem::path dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return (dir / ("pipecut-fuzz-archive-" + std::to_string(::getpid()) + ".pt2")).string();
  }();
  return path;
}

}  // namespace

int archive(const uint8_t* data, size_t size) {
  const std::string& path = scratchPath();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) finding("cannot write " + path);
  }
  std::string digest;
  refusesOrRuns("zipDirectorySha256", [&] { digest = support::zipDirectorySha256(path); });
  if (!digest.empty() && digest.size() != 64) finding("a digest of " + std::to_string(digest.size()) + " characters");
  lastOutcome() = {};  // the outcome is the reader's

  std::shared_ptr<pt2::ArchiveReader> a;
  if (!refusesOrRuns("ArchiveReader::open", [&] { a = pt2::ArchiveReader::open(path); })) return 0;
  const auto& records = a->records();
  if (!std::is_sorted(records.begin(), records.end())) finding("records are not sorted");
  if (std::adjacent_find(records.begin(), records.end()) != records.end()) finding("a record is listed twice");
  static volatile unsigned sink = 0;
  bool refused = false;
  for (const std::string& name : records) {
    const std::string at = "record '" + name + "': ";
    if (!a->has(name)) finding(at + "listed but not present");
    std::optional<size_t> n = a->sizeIfPresent(name);
    if (!n) finding(at + "listed but has no size");
    pt2::ByteView bytes;
    if (!refusesOrRuns("ArchiveReader::bytes", [&] { bytes = a->bytes(name); })) {
      refused = true;
      continue;
    }
    if (bytes.size != *n || a->size(name) != *n) finding(at + "bytes and size disagree");
    if (bytes.size > 0) sink = sink + bytes.data[0] + bytes.data[bytes.size - 1];
    if (a->readableAfter(bytes) > size) finding(at + "readable past its end beyond the file");
  }
  if (a->has("no/such/record") || a->sizeIfPresent("no/such/record")) finding("an absent record is present");
  if (!refused) lastOutcome() = {};
  return 0;
}

}  // namespace pipecut::fuzz
