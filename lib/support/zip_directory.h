#pragma once
// A cheap identity for a zip file (a .pt2): the SHA-256 of its central
// directory and end records, i.e. of every record's name, size and CRC-32.
// Any change to a record's bytes changes its CRC-32 and so the identity (up
// to CRC collisions: an identity for telling models apart, not a defence
// against a forger). It reads kilobytes where hashing the file reads all of
// it: 2 GB of a 7B model's weights took ~1.4 s of CPU per split.
#include <cstdint>
#include <string>
#include <vector>

namespace pipecut::support {

// Lowercase hex. Throws pipecut::Error (InvalidInput) naming the file and
// the zip field at fault when the file has no readable end of central
// directory, or one pointing outside the file.
std::string zipDirectorySha256(const std::string& path);

struct ZipEntry {
  std::string name;  // as stored: top folder included
  uint32_t crc32 = 0;
  uint16_t method = 0;            // 0: stored
  uint64_t compressedSize = 0;    // zip64 values where the entry has them
  uint64_t size = 0;
  uint64_t localHeaderOffset = 0;
};
// The central directory's entries in order. Same errors, and a malformed
// entry named by its index ("central directory entry 3"), as is a zip64
// extra field missing a value the entry defers to it.
std::vector<ZipEntry> zipDirectoryEntries(const std::string& path);

}  // namespace pipecut::support
