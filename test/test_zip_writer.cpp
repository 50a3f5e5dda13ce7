// pt2/zip_writer.cpp against LibTorch's PyTorchStreamWriter: the same records
// must give the same bytes, the zip64 layouts included (a stage of a 70B
// model is a zip past 4 GiB).
#include <sys/mman.h>
#include <zlib.h>

#include <caffe2/serialize/inline_container.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "pt2/zip_archive.h"
#include "support/error.h"
#include "support/zip_directory.h"
#include "test_util.h"

using pipecut::pt2::ArchiveWriter;

namespace {

struct Record {
  std::string name;
  const void* data;
  size_t size;
  std::optional<uint32_t> crc;  // handed to ArchiveWriter when set
};

// What a writer emitted: small writes as bytes, large ones (record data) as
// the buffer they came from, so gigabytes compare without being hashed.
// Adjacent small writes merge, so the writers may cut their writes
// differently.
struct Stream {
  struct Piece {
    std::string bytes;
    const void* big = nullptr;
    size_t bigSize = 0;
    bool operator==(const Piece&) const = default;
  };
  std::vector<Piece> pieces;
  size_t total = 0;

  size_t write(const void* p, size_t n) {
    total += n;
    if (n > (1u << 20)) {
      pieces.push_back(Piece{{}, p, n});
    } else {
      if (pieces.empty() || pieces.back().big) pieces.emplace_back();
      pieces.back().bytes.append(static_cast<const char*>(p), n);
    }
    return n;
  }
};

Stream viaTorch(const std::vector<Record>& records) {
  Stream s;
  caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) { return s.write(p, n); });
  w.setMinVersion(6);
  for (const auto& r : records) w.writeRecord(r.name, r.data, r.size);
  w.writeEndOfFile();
  return s;
}

Stream viaPipecut(const std::vector<Record>& records) {
  Stream s;
  ArchiveWriter w([&](const void* p, size_t n) { return s.write(p, n); });
  for (const auto& r : records) w.add(r.name, r.data, r.size, r.crc);
  w.finish();
  return s;
}

uint32_t crcOf(const void* p, size_t n) { return static_cast<uint32_t>(crc32_z(0, static_cast<const Bytef*>(p), n)); }

void requireSame(const std::vector<Record>& records) {
  Stream a = viaTorch(records), b = viaPipecut(records);
  REQUIRE(a.total == b.total);
  REQUIRE(a.pieces.size() == b.pieces.size());
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    INFO("piece " << i);
    REQUIRE(a.pieces[i].big == b.pieces[i].big);
    REQUIRE(a.pieces[i].bigSize == b.pieces[i].bigSize);
    REQUIRE(a.pieces[i].bytes == b.pieces[i].bytes);
  }
}

}  // namespace

TEST_CASE("zip writer: the bytes of PyTorchStreamWriter for small archives", "[zip_writer]") {
  std::string json = R"({"a": 1})", ones(100, '\x01'), big(300000, 'q');
  // Data that begins like a data descriptor: torch's writer folds its next
  // four bytes into the serialization id as if it were one.
  std::string lookalike = std::string("PK\x07\x08", 4) + "\x11\x22\x33\x44" + "rest of it";
  std::string tiny = "ab";
  SECTION("records of many sizes and name lengths, CRC-32s computed") {
    std::vector<Record> rs = {{"serialized_exported_program.json", json.data(), json.size(), {}},
                              {"data/weights/weight_0", ones.data(), ones.size(), {}},
                              {"e", nullptr, 0, {}},
                              {"x/" + std::string(61, 'n'), tiny.data(), tiny.size(), {}},
                              {"data/weights/weight_1", big.data(), big.size(), {}},
                              {"lookalike", lookalike.data(), lookalike.size(), {}}};
    requireSame(rs);
  }
  SECTION("CRC-32s handed in, and a caller's serialization id dropped as torch drops it") {
    std::vector<Record> rs = {{"data/weights/weight_0", ones.data(), ones.size(), crcOf(ones.data(), ones.size())},
                              {".data/serialization_id", tiny.data(), tiny.size(), {}},
                              {"data/weights/weight_1", big.data(), big.size(), crcOf(big.data(), big.size())}};
    requireSame(rs);
  }
  SECTION("a caller's version and byte order records are kept, not written twice") {
    std::string version = "6\n", order = "little";
    std::vector<Record> rs = {{".data/version", version.data(), version.size(), {}},
                              {"byteorder", order.data(), order.size(), {}},
                              {"a", tiny.data(), tiny.size(), {}}};
    requireSame(rs);
  }
  SECTION("only the end records") { requireSame({}); }
}

TEST_CASE("zip writer: zip64 records and offsets as PyTorchStreamWriter writes them", "[zip_writer]") {
  // Zero pages mapped but never touched: gigabytes of record data that cost
  // no memory. Torch's writer computes their CRC-32s itself (seconds); ours
  // are handed in, combined from the CRC-32 of one zero MiB.
  const size_t gib = size_t(1) << 30, span = 4 * gib + 4096;
  void* zeros = ::mmap(nullptr, span, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(zeros != MAP_FAILED);
  std::vector<uint8_t> mib(1 << 20, 0);
  const uLong mibCrc = crc32_z(0, mib.data(), mib.size());
  auto zeroCrc = [&](size_t n) {
    uLong crc = 0;
    size_t whole = n >> 20;
    for (size_t i = 0; i < whole; ++i) crc = crc32_combine64(crc, mibCrc, 1 << 20);
    size_t rest = n & ((1 << 20) - 1);
    if (rest) crc = crc32_combine64(crc, crc32_z(0, mib.data(), rest), static_cast<z_off64_t>(rest));
    return static_cast<uint32_t>(crc);
  };
  std::string small = "after four GiB";
  const size_t huge = 4 * gib + 100;  // >= 4 GiB: zip64 sizes
  // The first huge record starts at 0 and ends past 4 GiB, so the records
  // after it start past 4 GiB (zip64 offsets); the second huge one is both.
  std::vector<Record> rs = {{"data/weights/weight_0", zeros, huge, zeroCrc(huge)},
                            {"small", small.data(), small.size(), {}},
                            {"data/weights/weight_1", zeros, 3000, zeroCrc(3000)},
                            {"data/weights/weight_2", zeros, huge, zeroCrc(huge)}};
  requireSame(rs);
  ::munmap(zeros, span);
}

TEST_CASE("zip writer: a source record's CRC-32 comes from its archive's directory", "[zip_writer]") {
  for (const std::string& name : pipecut::test::fixtureNames()) {
    INFO(name);
    auto archive = pipecut::pt2::ArchiveReader::open(pipecut::test::fixture(name));
    // torch 2.7's layout is converted into memory (pt2/legacy_layout.h): its
    // records are new bytes, whose CRC-32 the writer computes.
    const bool converted = name.find("_torch27") != std::string::npos;
    for (const std::string& record : archive->records()) {
      INFO(record);
      auto view = archive->bytes(record);
      auto crc = archive->crc32(record);
      REQUIRE(crc.has_value() == !converted);
      if (crc) CHECK(*crc == crcOf(view.data, view.size));
    }
  }
  // Broken directory entries are refused, naming the entry.
  const std::string path = pipecut::test::fixture("mlp");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  // Where the directory starts: the zip64 end record says (torch's writer
  // always adds one).
  size_t end64 = bytes.rfind(std::string("PK\x06\x06", 4));
  REQUIRE(end64 != std::string::npos);
  size_t first = 0;
  for (int i = 7; i >= 0; --i) first = (first << 8) | static_cast<uint8_t>(bytes[end64 + 48 + static_cast<size_t>(i)]);
  REQUIRE(bytes.compare(first, 4, std::string("PK\x01\x02", 4)) == 0);
  const std::string tmp = (std::filesystem::temp_directory_path() / "pipecut_zip_entries.pt2").string();
  auto refusal = [&](const std::string& content) -> std::string {
    {
      std::ofstream out(tmp, std::ios::binary);
      out << content;
    }
    try {
      pipecut::support::zipDirectoryEntries(tmp);
    } catch (const pipecut::Error& e) {
      CHECK(e.file() == tmp);
      return e.where() + ": " + e.message();
    }
    return "accepted";
  };
  CHECK(refusal(bytes) == "accepted");
  std::string notHeader = bytes;  // the first entry is not a central header
  notHeader[first + 2] = 'x';
  CHECK(refusal(notHeader) == "central directory entry 0: malformed");
  std::string longName = bytes;  // its name would run past the directory
  longName[first + 28] = longName[first + 29] = '\xff';
  CHECK(refusal(longName) == "central directory entry 0: runs past the directory's end");
  std::filesystem::remove(tmp);
}

TEST_CASE("zip directory: sizes and offsets of 4 GB and more come from the zip64 extra field", "[zip_writer]") {
  auto le = [](std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  // One central directory entry (APPNOTE 4.3.12) at offset 0, then the end
  // record; `extra` is the entry's extra field.
  auto archive = [&](uint32_t size32, uint32_t csize32, uint32_t offset32, const std::string& extra) {
    std::string cd;
    le(cd, 0x02014b50, 4);
    le(cd, 45, 2);  // made by
    le(cd, 45, 2);  // needed
    le(cd, 0, 2);   // flags
    le(cd, 0, 2);   // stored
    le(cd, 0, 4);   // time, date
    le(cd, 0x1234abcd, 4);
    le(cd, csize32, 4);
    le(cd, size32, 4);
    const std::string name = "archive/data/0";
    le(cd, name.size(), 2);
    le(cd, extra.size(), 2);
    le(cd, 0, 2);  // comment
    le(cd, 0, 2);  // disk
    le(cd, 0, 2);  // internal attributes
    le(cd, 0, 4);  // external attributes
    le(cd, offset32, 4);
    cd += name + extra;
    std::string end;
    le(end, 0x06054b50, 4);
    le(end, 0, 4);
    le(end, 1, 2);
    le(end, 1, 2);
    le(end, cd.size(), 4);
    le(end, 0, 4);  // the directory starts the file
    le(end, 0, 2);
    return cd + end;
  };
  auto zip64 = [&](std::vector<uint64_t> values, size_t len) {
    std::string x;
    le(x, 0x5455, 2);  // another field first: skipped
    le(x, 1, 2);
    x.push_back('\0');
    le(x, 0x0001, 2);
    le(x, len, 2);
    for (uint64_t v : values) le(x, v, 8);
    return x;
  };
  const std::string tmp = (std::filesystem::temp_directory_path() / "pipecut_zip64_entries.zip").string();
  auto parse = [&](const std::string& bytes) {
    {
      std::ofstream out(tmp, std::ios::binary);
      out << bytes;
    }
    return pipecut::support::zipDirectoryEntries(tmp);
  };
  auto refusal = [&](const std::string& bytes) -> std::string {
    try {
      parse(bytes);
    } catch (const pipecut::Error& e) {
      return e.where() + ": " + e.message();
    }
    return "accepted";
  };
  const uint64_t big = (uint64_t{5} << 32) + 7, at = (uint64_t{1} << 33) + 64;
  // Every field deferred: size, compressed size, offset, in that order.
  auto all = parse(archive(0xffffffff, 0xffffffff, 0xffffffff, zip64({big, big, at}, 24)));
  REQUIRE(all.size() == 1);
  CHECK(all[0].name == "archive/data/0");
  CHECK(all[0].crc32 == 0x1234abcd);
  CHECK(all[0].method == 0);
  CHECK(all[0].size == big);
  CHECK(all[0].compressedSize == big);
  CHECK(all[0].localHeaderOffset == at);
  // Only the offset deferred: the extra field holds it alone.
  auto one = parse(archive(100, 100, 0xffffffff, zip64({at}, 8)));
  CHECK(one[0].size == 100);
  CHECK(one[0].compressedSize == 100);
  CHECK(one[0].localHeaderOffset == at);
  // Nothing deferred: 32-bit values as they are, the extra field unread.
  auto none = parse(archive(100, 90, 4096, ""));
  CHECK(none[0].size == 100);
  CHECK(none[0].compressedSize == 90);
  CHECK(none[0].localHeaderOffset == 4096);
  CHECK(refusal(archive(0xffffffff, 100, 0, "")) == "central directory entry 0: zip64 extra field missing");
  CHECK(refusal(archive(0xffffffff, 0xffffffff, 0xffffffff, zip64({big, big}, 16))) ==
        "central directory entry 0: zip64 extra field too short");
  std::filesystem::remove(tmp);
}

TEST_CASE("archive reader: records come from the central directory, under one top folder", "[zip_writer]") {
  using pipecut::pt2::ArchiveReader;
  const std::string path = pipecut::test::fixture("mlp");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  // The central directory's copy of a record name (after the 46-byte
  // header); the local header's copy comes first in the file.
  auto centralName = [&](const std::string& name) {
    size_t at = bytes.rfind(name);
    REQUIRE(at != std::string::npos);
    REQUIRE(bytes.compare(at - 46, 4, std::string("PK\x01\x02", 4)) == 0);
    return at;
  };
  const std::string tmp = (std::filesystem::temp_directory_path() / "pipecut_archive_reader.pt2").string();
  auto open = [&](const std::string& content) -> std::string {
    {
      std::ofstream out(tmp, std::ios::binary);
      out << content;
    }
    try {
      auto a = ArchiveReader::open(tmp);
      std::string listed = a->topFolder() + ":";
      for (const auto& r : a->records()) listed += " " + r;
      return listed;
    } catch (const pipecut::Error& e) {
      CHECK(e.file() == tmp);
      return e.message();
    }
  };
  const std::string listed = open(bytes);
  CHECK(listed.rfind("mlp: .data/serialization_id .data/version archive_format", 0) == 0);
  {
    auto a = ArchiveReader::open(path);
    CHECK(a->records().size() == 19);
    CHECK(std::is_sorted(a->records().begin(), a->records().end()));
    CHECK(a->size("data/weights/weight_1") == a->bytes("data/weights/weight_1").size);
    CHECK(!a->has("mlp/data/weights/weight_1"));  // names are relative to the top folder
  }
  std::string twice = bytes;  // weight_1 renamed weight_0 in the directory
  twice[centralName("mlp/data/weights/weight_1") + std::string("mlp/data/weights/weight_").size()] = '0';
  CHECK(open(twice) == "unreadable zip directory: record 'mlp/data/weights/weight_0' appears twice");
  std::string outside = bytes;  // a record under another folder
  outside[centralName("mlp/byteorder")] = 'x';
  CHECK(open(outside) == "unreadable zip directory: record 'xlp/byteorder' is not under the top folder 'mlp/'");
  CHECK(open("not a zip") ==
        "not a valid .pt2 zip archive (truncated or not a zip file): end of central directory: missing: the file is "
        "too short to be a zip");
  CHECK(open(bytes.substr(0, bytes.size() - 30)) ==
        "not a valid .pt2 zip archive (truncated or not a zip file): end of central directory: missing: not a zip file");
  std::filesystem::remove(tmp);
}

TEST_CASE("archive reader: an older layout's entry is stored or deflated, and declares no more bytes than those hold", "[zip_writer]") {
  // The entry's buffer is allocated at the declared size before inflating.
  auto refusal = [](const std::string& name) {
    try {
      pipecut::pt2::ArchiveReader::open(pipecut::test::sourcePath("testdata/fuzz/archive/" + name));
    } catch (const pipecut::Error& e) {
      CHECK(e.kind() == pipecut::ErrorKind::InvalidInput);
      return e.where() + ": " + e.message();
    }
    return std::string("accepted");
  };
  CHECK(refusal("root_level_size_beyond_deflate_ratio.zip") ==
        "version: declares 104857600 bytes, more than its 6 deflated bytes can hold");
  CHECK(refusal("root_level_declared_size_beyond_deflate.zip") ==
        "version: compressed size 1701080942 beyond the file's 262 bytes");
  CHECK(refusal("root_level_stored_size_mismatch.zip") == "version: stored entry of 1000 bytes in 10");
  CHECK(refusal("root_level_bzip2.zip") ==
        "serialized_exported_program.json: compressed with method 12; pipecut reads stored and deflated entries");
  CHECK(refusal("root_level_deflated.zip") == "accepted");
}
