// ArchiveWriter: the .pt2 container, written byte for byte as LibTorch's
// PyTorchStreamWriter (miniz underneath) writes it, without LibTorch.
//
// Why our own: PyTorchStreamWriter computes the CRC-32 of every record it
// writes, a pass over each weight the split only copies (~0.5 s of CPU per
// 2 GB, on top of hashing and writing the same bytes). A weight copied from
// the source archive has the CRC-32 the source's central directory states,
// so the caller passes it in. test_zip_writer.cpp compares every layout
// decision below with PyTorchStreamWriter's bytes, zip64 cases included.
//
// The layout, per record (name "archive/<name>"):
//   local header: version 0, flags 0x808 (UTF-8 names, sizes and CRC in a
//     data descriptor after the data) or 0x800 for an empty record (no
//     descriptor), stored, time and date 0, CRC and sizes 0;
//   name; a zip64 extra field when the record is >= 4 GiB or starts at or
//     past 4 GiB; an "FB" extra field of 'Z's that puts the data on a
//     64-byte boundary; the data;
//   data descriptor: signature, CRC-32, compressed and uncompressed size
//     (64-bit sizes exactly when the zip64 extra field is present).
// Then ".data/version", "byteorder" and ".data/serialization_id" records,
// the central directory, and the zip64 end record, its locator and the end
// record (the zip64 ones always: torch's writer asks miniz for them).
#include <zlib.h>

#include <functional>
#include <iomanip>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "pt2/zip_archive.h"
#include "support/error.h"
#include "support/little_endian.h"

namespace pipecut::pt2 {

namespace {

constexpr uint32_t kLocalSignature = 0x04034b50;
constexpr uint32_t kDescriptorSignature = 0x08074b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint64_t kMax32 = 0xffffffff;
constexpr size_t kAlignment = 64;  // where every record's data starts (torch mmaps them)
constexpr uint16_t kUtf8 = 0x800, kHasDescriptor = 0x8;
constexpr const char* kTopFolder = "archive/";
// The container version torch's PT2 archive writer asks for
// (PyTorchStreamWriter::setMinVersion(6)), which is what ".data/version" says.
constexpr const char* kVersionRecord = "6\n";
constexpr const char* kSerializationIdName = ".data/serialization_id";

struct Bytes {
  std::vector<uint8_t> b;
  void u16(uint64_t v) { for (int i = 0; i < 2; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void u32(uint64_t v) { for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void u64(uint64_t v) { for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i))); }
  void str(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }
  void append(const Bytes& o) { b.insert(b.end(), o.b.begin(), o.b.end()); }
};

// c10::hash_combine (Boost's), which the serialization id is made of.
uint64_t hashCombine(uint64_t seed, uint64_t value) { return seed ^ (value + 0x9e3779b9 + (seed << 6u) + (seed >> 2u)); }

// miniz's zip64 extra field (id 1): the fields that overflow, in this
// order. In the local header the compressed size is 0: miniz writes the
// header before the data, when it has not counted it yet.
Bytes zip64Extra(const uint64_t* size, uint64_t compressed, const uint64_t* offset) {
  Bytes e;
  e.u16(1);
  e.u16((size ? 16 : 0) + (offset ? 8 : 0));
  if (size) {
    e.u64(*size);
    e.u64(compressed);
  }
  if (offset) e.u64(*offset);
  return e;
}

}  // namespace

struct ArchiveWriter::Impl {
  struct Entry {
    std::string name;  // with the top folder
    uint16_t flags = 0;
    uint32_t crc = 0;
    uint64_t size = 0, offset = 0;
  };

  std::function<size_t(const void*, size_t)> sink;
  uint64_t pos = 0;
  std::vector<Entry> entries;
  // What PyTorchStreamWriter keeps to make the serialization id: the names in
  // an unordered_set (the id hashes them in that set's iteration order), and
  // the CRC-32s it sees go by in data descriptors.
  std::unordered_set<std::string> written;
  uint64_t combinedCrc = 0;
  bool finished = false;

  // One write as miniz issues it. PyTorchStreamWriter's write callback takes
  // any write that begins with a data descriptor's signature for a descriptor
  // and folds the CRC-32 after it into the serialization id: record data
  // that happens to begin so counts too, and is reproduced here.
  void put(const void* data, size_t n) {
    if (n == 0) return;
    if (n >= 8 && support::littleEndian(data, 4) == kDescriptorSignature)
      combinedCrc = hashCombine(combinedCrc, support::littleEndian(static_cast<const uint8_t*>(data) + 4, 4));
    if (sink(data, n) != n) internalError("", "writing the archive failed");
    pos += n;
  }
  void put(const Bytes& b) { put(b.b.data(), b.b.size()); }

  void add(const std::string& name, const void* data, uint64_t size, std::optional<uint32_t> knownCrc,
           bool own = false) {
    if (finished) internalError(name, "record added after the archive was finished");
    // A serialization id of the caller's would not describe this archive:
    // torch's writer drops it and writes its own.
    if (name == kSerializationIdName && !own) return;
    if (written.count(name)) internalError(name, "record written twice");
    Entry e;
    e.name = kTopFolder + name;
    e.size = size;
    e.offset = pos;
    e.flags = size ? (kUtf8 | kHasDescriptor) : kUtf8;
    e.crc = knownCrc ? *knownCrc : static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(data), size));

    const bool big = size >= kMax32, far = pos >= kMax32;
    Bytes zip64;
    if (big || far) zip64 = zip64Extra(big ? &size : nullptr, 0, far ? &e.offset : nullptr);
    size_t start = pos + 30 + e.name.size() + zip64.b.size() + 4;
    size_t padding = (kAlignment - start % kAlignment) % kAlignment;

    Bytes header;
    header.u32(kLocalSignature);
    header.u16(0);  // version needed: miniz writes 0 for stored records
    header.u16(e.flags);
    header.u16(0);  // stored
    header.u16(0);  // time
    header.u16(0);  // date
    header.u32(0);  // CRC-32, sizes: in the data descriptor
    header.u32(0);
    header.u32(0);
    header.u16(e.name.size());
    header.u16(zip64.b.size() + 4 + padding);
    put(header);
    put(e.name.data(), e.name.size());
    put(zip64);
    Bytes fb;
    fb.str("FB");
    fb.u16(padding);
    fb.b.insert(fb.b.end(), padding, 'Z');
    put(fb);
    put(data, size);
    if (size) {
      Bytes dd;
      dd.u32(kDescriptorSignature);
      dd.u32(e.crc);
      if (zip64.b.empty()) {
        dd.u32(size);
        dd.u32(size);
      } else {
        dd.u64(size);
        dd.u64(size);
      }
      put(dd);
    }
    entries.push_back(std::move(e));
    written.insert(name);
  }

  void finish() {
    if (finished) return;
    if (!written.count(".data/version") && !written.count("version")) add(".data/version", kVersionRecord, 2, {});
    if (!written.count("byteorder")) add("byteorder", "little", 6, {});
    uint64_t names = 0;
    for (const std::string& n : written) names = hashCombine(names, std::hash<std::string>{}(n));
    std::ostringstream id;
    id << std::setfill('0') << std::setw(20) << names << std::setfill('0') << std::setw(20) << combinedCrc;
    const std::string idText = id.str();
    add(kSerializationIdName, idText.data(), idText.size(), {}, /*own=*/true);
    finished = true;

    const uint64_t cdOffset = pos;
    Bytes cd;
    for (const Entry& e : entries) {
      const bool big = e.size >= kMax32, far = e.offset >= kMax32;
      Bytes extra;
      if (big || far) extra = zip64Extra(big ? &e.size : nullptr, e.size, far ? &e.offset : nullptr);
      cd.u32(kCentralSignature);
      cd.u16(0);  // made by
      cd.u16(0);  // version needed
      cd.u16(e.flags);
      cd.u16(0);  // stored
      cd.u16(0);  // time
      cd.u16(0);  // date
      cd.u32(e.crc);
      cd.u32(std::min(e.size, kMax32));
      cd.u32(std::min(e.size, kMax32));
      cd.u16(e.name.size());
      cd.u16(extra.b.size());
      cd.u16(0);  // comment
      cd.u16(0);  // disk
      cd.u16(0);  // internal attributes
      cd.u32(0);  // external attributes
      cd.u32(std::min(e.offset, kMax32));
      cd.str(e.name);
      cd.append(extra);
    }
    put(cd);
    const uint64_t cdSize = cd.b.size(), count = entries.size(), zip64End = pos;
    Bytes end;
    end.u32(kZip64EndSignature);
    end.u64(44);      // size of what follows
    end.u16(0x031e);  // made by: Unix, 3.0
    end.u16(0x002d);  // needed: 4.5, zip64
    end.u32(0);
    end.u32(0);
    end.u64(count);
    end.u64(count);
    end.u64(cdSize);
    end.u64(cdOffset);
    end.u32(kZip64LocatorSignature);
    end.u32(0);
    end.u64(zip64End);
    end.u32(1);
    end.u32(kEndSignature);
    end.u16(0);
    end.u16(0);
    end.u16(std::min<uint64_t>(count, 0xffff));
    end.u16(std::min<uint64_t>(count, 0xffff));
    end.u32(std::min(cdSize, kMax32));
    end.u32(std::min(cdOffset, kMax32));
    end.u16(0);  // comment
    put(end);
  }
};

ArchiveWriter::ArchiveWriter(std::function<size_t(const void*, size_t)> sink) : impl_(std::make_unique<Impl>()) {
  impl_->sink = std::move(sink);
}

ArchiveWriter::~ArchiveWriter() = default;

void ArchiveWriter::add(const std::string& name, const void* data, size_t size, std::optional<uint32_t> crc32) {
  impl_->add(name, data, size, crc32);
}

void ArchiveWriter::finish() { impl_->finish(); }

}  // namespace pipecut::pt2
