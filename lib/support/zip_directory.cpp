#include "support/zip_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/error.h"
#include "support/little_endian.h"
#include "support/sha256.h"

namespace pipecut::support {

namespace {

// Signatures and sizes of the zip format's end records (APPNOTE 4.3.14 - 4.3.16).
constexpr uint32_t kEndSignature = 0x06054b50;         // end of central directory
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kCentralSignature = 0x02014b50;
constexpr size_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56;
constexpr size_t kMaxComment = 0xffff;

class File {
 public:
  explicit File(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw Error(ErrorKind::InvalidInput, path, "", std::string("cannot stat: ") + std::strerror(errno));
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~File() { ::close(fd_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint64_t size() const { return size_; }
  std::vector<uint8_t> read(uint64_t offset, uint64_t n) const {
    std::vector<uint8_t> out(n);
    uint64_t done = 0;
    while (done < n) {
      ssize_t k = ::pread(fd_, out.data() + done, n - done, static_cast<off_t>(offset + done));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) throw Error(ErrorKind::InvalidInput, path_, "", std::string("cannot read: ") + (k < 0 ? std::strerror(errno) : "unexpected end of file"));
      done += static_cast<uint64_t>(k);
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& field, const std::string& message) const {
    throw Error(ErrorKind::InvalidInput, path_, field, message);
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Where the central directory lies: [offset, offset + size), followed
// directly by the end records.
struct Directory {
  uint64_t offset = 0, size = 0;
};

Directory locateDirectory(const File& f) {
  if (f.size() < kEndSize) f.fail("end of central directory", "missing: the file is too short to be a zip");
  // The end record is the last thing in the file but for its comment.
  uint64_t tailSize = std::min<uint64_t>(f.size(), kEndSize + kMaxComment);
  uint64_t tailStart = f.size() - tailSize;
  std::vector<uint8_t> tail = f.read(tailStart, tailSize);
  int64_t end = -1;
  for (int64_t i = static_cast<int64_t>(tailSize - kEndSize); i >= 0; --i)
    if (littleEndian(&tail[static_cast<size_t>(i)], 4) == kEndSignature &&
        static_cast<uint64_t>(i) + kEndSize + littleEndian(&tail[static_cast<size_t>(i) + 20], 2) == tailSize) {
      end = i;
      break;
    }
  if (end < 0) f.fail("end of central directory", "missing: not a zip file");
  const uint8_t* e = &tail[static_cast<size_t>(end)];
  const uint64_t endPos = tailStart + static_cast<uint64_t>(end);
  uint64_t cdSize = littleEndian(e + 12, 4), cdOffset = littleEndian(e + 16, 4);
  uint64_t recordsPos = endPos;  // where the end records begin: the directory ends there
  // Zip64 records, when present, sit between the directory and the end
  // record, and hold the directory's true size and offset.
  const bool needZip64 = cdSize == 0xffffffff || cdOffset == 0xffffffff;
  std::vector<uint8_t> loc = endPos >= kLocatorSize ? f.read(endPos - kLocatorSize, kLocatorSize) : std::vector<uint8_t>{};
  if (!loc.empty() && littleEndian(loc.data(), 4) == kZip64LocatorSignature) {
    uint64_t z64 = littleEndian(loc.data() + 8, 8);
    if (z64 > endPos - kLocatorSize || endPos - kLocatorSize - z64 < kZip64EndSize)
      f.fail("zip64 end of central directory locator", "points outside the file");
    std::vector<uint8_t> rec = f.read(z64, kZip64EndSize);
    if (littleEndian(rec.data(), 4) != kZip64EndSignature) f.fail("zip64 end of central directory", "missing");
    cdSize = littleEndian(rec.data() + 40, 8);
    cdOffset = littleEndian(rec.data() + 48, 8);
    recordsPos = z64;
  } else if (needZip64) {
    f.fail("zip64 end of central directory locator", "missing");
  }
  // Also bounds what is read below by the directory's own size.
  if (cdOffset > recordsPos || cdSize != recordsPos - cdOffset)
    f.fail("end of central directory", "the central directory does not end where the end records begin");
  return {cdOffset, cdSize};
}

}  // namespace

std::string zipDirectorySha256(const std::string& path) {
  File f(path);
  Directory d = locateDirectory(f);
  // From the directory's start to the end: directory, zip64 records, end
  // record and comment.
  std::vector<uint8_t> bytes = f.read(d.offset, f.size() - d.offset);
  return sha256Bytes(bytes.data(), bytes.size());
}

std::vector<ZipEntry> zipDirectoryEntries(const std::string& path) {
  File f(path);
  Directory d = locateDirectory(f);
  std::vector<uint8_t> cd = f.read(d.offset, d.size);
  std::vector<ZipEntry> out;
  constexpr size_t kHeader = 46;  // APPNOTE 4.3.12, before the name
  auto fail = [&](const char* message) { f.fail("central directory entry " + std::to_string(out.size()), message); };
  for (size_t at = 0; at < cd.size();) {
    if (cd.size() - at < kHeader || littleEndian(&cd[at], 4) != kCentralSignature) fail("malformed");
    size_t nameLen = littleEndian(&cd[at + 28], 2), extraLen = littleEndian(&cd[at + 30], 2),
           commentLen = littleEndian(&cd[at + 32], 2);
    if (cd.size() - at - kHeader < nameLen + extraLen + commentLen) fail("runs past the directory's end");
    ZipEntry e;
    e.method = static_cast<uint16_t>(littleEndian(&cd[at + 10], 2));
    e.crc32 = static_cast<uint32_t>(littleEndian(&cd[at + 16], 4));
    e.compressedSize = littleEndian(&cd[at + 20], 4);
    e.size = littleEndian(&cd[at + 24], 4);
    e.localHeaderOffset = littleEndian(&cd[at + 42], 4);
    e.name.assign(reinterpret_cast<const char*>(&cd[at + kHeader]), nameLen);
    // A 32-bit field of all ones defers to the zip64 extra field (APPNOTE
    // 4.5.3), whose 8-byte values come in this order, only those deferred.
    uint64_t* deferred[] = {&e.size, &e.compressedSize, &e.localHeaderOffset};
    bool any = false;
    for (uint64_t* v : deferred) any = any || *v == 0xffffffff;
    if (any) {
      const uint8_t* x = &cd[at + kHeader + nameLen];
      const uint8_t* xEnd = x + extraLen;
      bool found = false;
      while (!found && xEnd - x >= 4) {
        size_t id = littleEndian(x, 2), len = littleEndian(x + 2, 2);
        if (static_cast<size_t>(xEnd - x - 4) < len) break;
        if (id == 0x0001) {
          found = true;
          const uint8_t* v = x + 4;
          for (uint64_t* field : deferred) {
            if (*field != 0xffffffff) continue;
            if (x + 4 + len - v < 8) fail("zip64 extra field too short");
            *field = littleEndian(v, 8);
            v += 8;
          }
        }
        x += 4 + len;
      }
      if (!found) fail("zip64 extra field missing");
    }
    out.push_back(std::move(e));
    at += kHeader + nameLen + extraLen + commentLen;
  }
  return out;
}

}  // namespace pipecut::support
