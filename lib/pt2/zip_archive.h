#pragma once
// The .pt2 container: a zip written by PyTorch's stream writer, every record
// under one top folder, stored uncompressed and 64-byte aligned. Read from
// our own parse of the central directory and a memory map; with
// pt2/legacy_layout.cpp (LibTorch's unpickler for older layouts), this
// target is the only part of the core that links LibTorch, and it keeps
// torch's types out of this header.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace pipecut::pt2 {

// A read-only view of record bytes; valid while the ArchiveReader lives.
struct ByteView {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::string_view str() const { return {reinterpret_cast<const char*>(data), size}; }
};

class ArchiveReader {
 public:
  // Throws pipecut::Error (InvalidInput) for a missing, empty, truncated or
  // non-zip file. A zip with no top folder (the torch <= 2.7 layout, written
  // by Python's zipfile) is read whole into memory, its records at the root.
  static std::shared_ptr<ArchiveReader> open(const std::string& path);

  // Records held in memory rather than mapped from the file: what an older
  // layout converts to (pt2/legacy_layout.h). `owner` keeps `bytes` alive.
  struct MemoryRecord {
    ByteView bytes;
    std::shared_ptr<const void> owner;
    std::string origin;  // the record of the file it was made from, when renamed or derived
  };
  static std::shared_ptr<ArchiveReader> fromMemory(std::string path, std::map<std::string, MemoryRecord> records);
  ~ArchiveReader();

  const std::string& path() const { return path_; }
  const std::string& topFolder() const { return top_; }
  // Record names relative to the top folder, sorted.
  const std::vector<std::string>& records() const { return records_; }
  bool has(const std::string& name) const;
  // The record of the file `name` stands for, for messages: `name` itself
  // except in a converted older layout.
  std::string origin(const std::string& name) const;
  size_t size(const std::string& name) const;
  // The size, or nullopt when there is no such record: one lookup where
  // has() then size() take two (10^4 tensor records at open).
  std::optional<size_t> sizeIfPresent(const std::string& name) const;
  // Zero-copy: the file is memory-mapped, and records are stored uncompressed.
  ByteView bytes(const std::string& name) const;
  // Where the record's bytes start in the file; nullopt for a memory-backed
  // record. For a copy the kernel makes (copy_file_range) without mapping them.
  std::optional<uint64_t> fileOffset(const std::string& name) const {
    if (!map_) return std::nullopt;
    return static_cast<uint64_t>(bytes(name).data - map_);
  }
  // The record's CRC-32 as the central directory states it (unchecked
  // against the bytes); nullopt for a memory-backed record.
  std::optional<uint32_t> crc32(const std::string& name) const;
  std::string text(const std::string& name) const { return std::string(bytes(name).str()); }
  // Readable bytes of the mapping after `view` (a view from bytes()): a JSON
  // parser that reads ahead in blocks can parse a record in place when the
  // archive goes on after it (the central directory always follows).
  size_t readableAfter(ByteView view) const {
    if (!map_) return 0;  // a memory-backed record ends its buffer
    return static_cast<size_t>(map_ + mapSize_ - (view.data + view.size));
  }

 private:
  ArchiveReader() = default;
  std::string path_, top_;
  std::vector<std::string> records_;
  std::map<std::string, MemoryRecord> memory_;  // memory-backed archives only
  // File-backed archives: each record as the central directory states it, by
  // name relative to the top folder. A deep model has 10^4 tensor records,
  // each asked for its size and bytes; the zip library's lookup compared
  // names in a binary search, a cache miss per step.
  struct Entry {
    uint32_t crc32 = 0;
    uint16_t method = 0;
    uint64_t size = 0;
    uint64_t localHeaderOffset = 0;
  };
  absl::flat_hash_map<std::string, Entry> entries_;
  const Entry& entry(const std::string& name) const;  // throws for a missing record
  const uint8_t* map_ = nullptr;  // null for a memory-backed archive
  size_t mapSize_ = 0;
};

// Writes records to a stream function, the bytes LibTorch's
// PyTorchStreamWriter would write (pt2/zip_writer.cpp); the top folder is
// always "archive" (what torch itself uses for in-memory archives), so the
// bytes do not depend on the output file's name.
class ArchiveWriter {
 public:
  explicit ArchiveWriter(std::function<size_t(const void*, size_t)> sink);
  ~ArchiveWriter();
  // `crc32`: the bytes' CRC-32 when the caller knows it (a record copied
  // from a source archive: ArchiveReader::crc32), else computed here.
  void add(const std::string& name, const void* data, size_t size, std::optional<uint32_t> crc32 = {});
  void add(const std::string& name, std::string_view text) { add(name, text.data(), text.size()); }
  // The version, byte order and serialization id records, the central
  // directory and the end records.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pipecut::pt2
