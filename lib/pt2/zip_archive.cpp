#include "pt2/zip_archive.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <zip.h>

#include "support/error.h"
#include "support/little_endian.h"
#include "support/mapped_file.h"
#include "support/zip_directory.h"

namespace pipecut::pt2 {

namespace {

// An older layout's entry gets its bytes allocated at the size its header
// declares, before they are inflated: a size its compressed bytes cannot
// inflate to (deflate expands at most 1032:1) would have a few bytes of file
// ask for any amount of memory. torch's older layouts store or deflate their
// records.
void checkDeclaredSize(const zip_stat_t& st, uint64_t fileSize, const std::string& path, const std::string& name) {
  auto fail = [&](const std::string& msg) { throw Error(ErrorKind::InvalidInput, path, name, msg); };
  if (!(st.valid & ZIP_STAT_COMP_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD))
    fail("unreadable: no compressed size or method");
  if (st.comp_size > fileSize)
    fail("compressed size " + std::to_string(st.comp_size) + " beyond the file's " + std::to_string(fileSize) + " bytes");
  if (st.comp_method == ZIP_CM_STORE) {
    if (st.size != st.comp_size) fail("stored entry of " + std::to_string(st.size) + " bytes in " + std::to_string(st.comp_size));
  } else if (st.comp_method == ZIP_CM_DEFLATE) {
    if (st.size / 1032 > st.comp_size)
      fail("declares " + std::to_string(st.size) + " bytes, more than its " + std::to_string(st.comp_size) +
           " deflated bytes can hold");
  } else {
    fail("compressed with method " + std::to_string(st.comp_method) + "; pipecut reads stored and deflated entries");
  }
}

// A zip whose records sit at its root, not under a top folder:
// the torch <= 2.7 layout. libzip reads it (zip64 and compressed entries
// included) into memory; such files are converted, not streamed, anyway.
std::map<std::string, ArchiveReader::MemoryRecord> readRootZip(const std::string& path, uint64_t fileSize) {
  auto fail = [&](const std::string& where, const std::string& msg) {
    throw Error(ErrorKind::InvalidInput, path, where, msg);
  };
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &code);
  if (!z) {
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    std::string msg = zip_error_strerror(&err);
    zip_error_fini(&err);
    fail("", "not a valid zip archive: " + msg);
  }
  std::unique_ptr<zip_t, int (*)(zip_t*)> closer(z, zip_close);
  // Nothing is read from a zip that is not an exported program.
  if (zip_name_locate(z, "serialized_exported_program.json", 0) < 0)
    fail("", "a zip without a top folder and without serialized_exported_program.json: "
             "not a torch.export .pt2 archive");
  std::map<std::string, ArchiveReader::MemoryRecord> records;
  zip_int64_t n = zip_get_num_entries(z, 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE))
      fail("entry " + std::to_string(i), std::string("unreadable: ") + zip_strerror(z));
    std::string name = st.name;
    if (!name.empty() && name.back() == '/') continue;  // a directory entry
    checkDeclaredSize(st, fileSize, path, name);
    auto bytes = std::make_shared<std::string>(static_cast<size_t>(st.size), '\0');
    std::unique_ptr<zip_file_t, int (*)(zip_file_t*)> f(zip_fopen_index(z, static_cast<zip_uint64_t>(i), 0), zip_fclose);
    if (!f) fail(name, std::string("unreadable: ") + zip_strerror(z));
    zip_int64_t got = zip_fread(f.get(), bytes->data(), st.size);
    if (got < 0 || static_cast<zip_uint64_t>(got) != st.size)
      fail(name, "truncated entry (read " + std::to_string(got) + " of " + std::to_string(st.size) + " bytes)");
    ByteView view{reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()};
    records[name] = ArchiveReader::MemoryRecord{view, std::move(bytes)};
  }
  return records;
}

}  // namespace

std::shared_ptr<ArchiveReader> ArchiveReader::fromMemory(std::string path, std::map<std::string, MemoryRecord> records) {
  std::shared_ptr<ArchiveReader> a(new ArchiveReader());
  a->path_ = std::move(path);
  for (const auto& [name, r] : records) a->records_.push_back(name);  // std::map: sorted
  a->memory_ = std::move(records);
  return a;
}

std::shared_ptr<ArchiveReader> ArchiveReader::open(const std::string& path) {
  auto fail = [&](const std::string& msg) -> void { throw Error(ErrorKind::InvalidInput, path, "", msg); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(std::string("cannot open: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail("is a directory, expected a .pt2 file");
  // Opening a FIFO to read waits for a writer: refused before anything opens it.
  if (const std::string kind = support::notARegularFile(path); !kind.empty()) fail("is " + kind + ", expected a .pt2 file");
  if (st.st_size == 0) fail("empty file, expected a .pt2 zip archive");

  // The central directory, read by our own parser: torch's stream reader
  // (miniz) heap-sorted every name at open, ~20 ms for the 14k records of a
  // 10^5-node model, before pipecut looked anything up in it.
  std::vector<support::ZipEntry> directory;
  try {
    directory = support::zipDirectoryEntries(path);
  } catch (const Error& e) {
    fail("not a valid .pt2 zip archive (truncated or not a zip file): " + (e.where().empty() ? "" : e.where() + ": ") +
         e.message());
  }
  // torch's writer puts every record under one top folder, named by the
  // first record; a zip without one is the older layout.
  const size_t slash = directory.empty() ? std::string::npos : directory.front().name.find('/');
  if (slash == std::string::npos) return fromMemory(path, readRootZip(path, static_cast<uint64_t>(st.st_size)));

  std::shared_ptr<ArchiveReader> a(new ArchiveReader());
  a->path_ = path;
  a->top_ = directory.front().name.substr(0, slash);
  const std::string prefix = a->top_ + "/";
  a->records_.reserve(directory.size());
  a->entries_.reserve(directory.size());
  for (support::ZipEntry& e : directory) {
    if (e.name.compare(0, prefix.size(), prefix) != 0)
      fail("unreadable zip directory: record '" + e.name + "' is not under the top folder '" + prefix + "'");
    if (e.name.back() == '/') continue;  // a folder entry, not a record
    std::string name = e.name.substr(prefix.size());
    if (!a->entries_.emplace(name, Entry{e.crc32, e.method, e.size, e.localHeaderOffset}).second)
      fail("unreadable zip directory: record '" + e.name + "' appears twice");
    a->records_.push_back(std::move(name));
  }
  std::sort(a->records_.begin(), a->records_.end());

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) fail(std::string("cannot map: ") + std::strerror(errno));
  a->map_ = static_cast<const uint8_t*>(m);
  a->mapSize_ = static_cast<size_t>(st.st_size);
  return a;
}

ArchiveReader::~ArchiveReader() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), mapSize_);
}

bool ArchiveReader::has(const std::string& name) const {
  if (map_) return entries_.count(name) != 0;
  return memory_.count(name) != 0;
}

const ArchiveReader::Entry& ArchiveReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw Error(ErrorKind::InvalidInput, path_, name, "missing record");
  return it->second;
}

std::string ArchiveReader::origin(const std::string& name) const {
  auto it = memory_.find(name);
  return it == memory_.end() || it->second.origin.empty() ? name : it->second.origin;
}

size_t ArchiveReader::size(const std::string& name) const {
  if (!map_) return bytes(name).size;
  return entry(name).size;
}

std::optional<size_t> ArchiveReader::sizeIfPresent(const std::string& name) const {
  if (map_) {
    auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    return it->second.size;
  }
  if (!memory_.count(name)) return std::nullopt;
  return bytes(name).size;
}

std::optional<uint32_t> ArchiveReader::crc32(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  return it->second.crc32;
}

ByteView ArchiveReader::bytes(const std::string& name) const {
  if (!map_) {
    auto it = memory_.find(name);
    if (it == memory_.end()) throw Error(ErrorKind::InvalidInput, path_, name, "missing record");
    return it->second.bytes;
  }
  const Entry& e = entry(name);
  auto unreadable = [&](const std::string& why) { return Error(ErrorKind::InvalidInput, path_, name, "unreadable record: " + why); };
  if (e.method != 0) throw unreadable("compressed (method " + std::to_string(e.method) + "); a .pt2 stores records uncompressed");
  // The data follow the local header (APPNOTE 4.3.7): 30 bytes, then the
  // name and an extra field whose lengths the local header gives.
  constexpr uint64_t kLocalHeader = 30;
  if (e.localHeaderOffset > mapSize_ || mapSize_ - e.localHeaderOffset < kLocalHeader)
    throw unreadable("local header outside the file");
  const uint8_t* h = map_ + e.localHeaderOffset;
  if (support::littleEndian(h, 4) != 0x04034b50) throw unreadable("no local header where the central directory says");
  const uint64_t offset = e.localHeaderOffset + kLocalHeader + support::littleEndian(h + 26, 2) + support::littleEndian(h + 28, 2);
  if (offset > mapSize_ || e.size > mapSize_ - offset)
    throw Error(ErrorKind::InvalidInput, path_, name, "record extends past the end of the file (truncated archive)");
  return ByteView{map_ + offset, e.size};
}

}  // namespace pipecut::pt2
