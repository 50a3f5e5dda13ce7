// Whole-package reading and writing over the fixture zoo.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "driver/load.h"
#include "ir/verifier.h"
#include "passes/pass_manager.h"
#include "pt2/package.h"
#include "pt2/pickle_check.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/sha256.h"
#include "support/zip_directory.h"
#include "test_util.h"

using namespace pipecut;

namespace {

std::string bytesOf(const pt2::Package& pkg) {
  std::string out;
  pt2::writePackage(pkg, [&](const void* d, size_t n) {
    out.append(static_cast<const char*>(d), n);
    return n;
  });
  return out;
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("every fixture reads, verifies, and writes byte-stably", "[package]") {
  auto names = test::fixtureNames();
  REQUIRE(names.size() >= 10);
  for (const auto& name : names) {
    INFO(name);
    pt2::Package pkg = pt2::readPackage(test::fixture(name));
    if (name.find("shuffled") != std::string::npos) {
      CHECK_THROWS(ir::verify(pkg.program));
      continue;
    }
    ir::verify(pkg.program);
    // write(read(x)) goes to disk for the torch.export.load check (torch_roundtrip).
    std::string first = bytesOf(pkg);
    std::string path = test::outPath("rewrite/" + name + ".pt2");
    writeFile(path, first);
    // write(read(write(read(x)))) == write(read(x))
    pt2::Package again = pt2::readPackage(path);
    ir::verify(again.program);
    std::string second = bytesOf(again);
    CHECK(first.size() == second.size());
    CHECK(first == second);
    CHECK(again.weights.size() <= pkg.weights.size());
  }
}

TEST_CASE("a shuffled program normalizes to a verified graph in signature order", "[package]") {
  pt2::Package pkg = pt2::readPackage(test::fixture("nograd_seed_shuffled"));
  passes::PassManager pm;
  passes::NormalizeOptions opts;
  opts.verifyEach = true;
  passes::addNormalizePipeline(pm, opts);
  pm.run(pkg.program);
  ir::verify(pkg.program);
  for (size_t i = 0; i < pkg.program.inputSpecs.size(); ++i)
    CHECK(pkg.program.graph.inputs[i].value() == pkg.program.inputSpecs[i].arg.value());
  // Same graph as the unshuffled export once both are normalized.
  pt2::Package plain = pt2::readPackage(test::fixture("nograd_seed"));
  passes::PassManager pm2;
  passes::addNormalizePipeline(pm2, opts);
  pm2.run(plain.program);
  std::vector<std::string> a, b;
  for (const auto& n : pkg.program.graph.nodes) a.push_back(n->label());
  for (const auto& n : plain.program.graph.nodes) b.push_back(n->label());
  CHECK(a == b);
}

TEST_CASE("weights are references into the archive, and tied weights share a record", "[package]") {
  pt2::Package pkg = pt2::readPackage(test::fixture("gpt2_tied"));
  const auto& wte = pkg.weights.at("transformer.wte.weight");
  const auto& head = pkg.weights.at("lm_head.weight");
  CHECK(wte.data.source != nullptr);
  CHECK(wte.data.inlineBytes.empty());
  CHECK(wte.data.record == head.data.record);
  CHECK(wte.logicalBytes() == 256u * 32u * 4u);
  // After a rewrite the two names still point at one record.
  std::string path = test::outPath("tied/gpt2_tied.pt2");
  pt2::writePackageFile(pkg, pt2::packageDestination(path));
  pt2::Package again = pt2::readPackage(path);
  if (again.weights.count("transformer.wte.weight"))
    CHECK(again.weights.at("transformer.wte.weight").data.record == again.weights.at("lm_head.weight").data.record);
}

TEST_CASE("non-persistent buffers and lifted constants come from the constants payload", "[package]") {
  pt2::Package pkg = pt2::readPackage(test::fixture("cnn_bn"));
  size_t buffers = 0, constants = 0, nonPersistent = 0;
  for (const auto& s : pkg.program.inputSpecs) {
    if (s.kind == ir::InputKind::Buffer) {
      ++buffers;
      if (!s.persistent.value_or(true)) {
        ++nonPersistent;
        CHECK(pkg.constants.count(s.target));
      }
    }
    if (s.kind == ir::InputKind::TensorConstant) {
      ++constants;
      CHECK(pkg.constants.count(s.target));
    }
  }
  CHECK(buffers == 13);
  CHECK(nonPersistent == 1);
  CHECK(constants == 1);
}

TEST_CASE("dedupe compares lifted constants by metadata and bytes, keyed by size and hash", "[package]") {
  pt2::Package pkg = pt2::readPackage(test::fixture("cnn_bn"));
  REQUIRE(pkg.constants.count("offset"));
  const pt2::StoredTensor offset = pkg.constants.at("offset");
  const pt2::ByteView bytes = offset.data.view();
  REQUIRE(bytes.size > 0);
  pt2::StoredTensor same = offset;  // another FQN, the same record
  pt2::StoredTensor copied = offset;  // the same bytes, held inline
  copied.data = pt2::Blob{nullptr, "", std::string(reinterpret_cast<const char*>(bytes.data), bytes.size)};
  pt2::StoredTensor other = copied;  // one byte different
  other.data.inlineBytes[0] = static_cast<char>(other.data.inlineBytes[0] ^ 1);
  pt2::StoredTensor pickled = offset;
  pickled.usePickle = true;
  pkg.constants["same"] = same;
  pkg.constants["copied"] = copied;
  pkg.constants["other"] = other;
  pkg.constants["pickled"] = pickled;
  passes::NormalizeOptions opts;
  driver::compareConstantsByContent(pkg, opts);
  REQUIRE(opts.sameConstant);
  REQUIRE(opts.constantKey);
  const std::string key = opts.constantKey("offset");
  CHECK(key == std::to_string(bytes.size) + " " + xxh3_128Bytes(bytes.data, bytes.size));
  CHECK(opts.sameConstant("offset", "same"));
  CHECK(opts.sameConstant("offset", "copied"));
  CHECK(opts.constantKey("same") == key);
  CHECK(opts.constantKey("copied") == key);
  CHECK_FALSE(opts.sameConstant("offset", "other"));
  CHECK(opts.constantKey("other") != key);
  // Never merged, so each has a key of its own.
  CHECK_FALSE(opts.sameConstant("offset", "pickled"));
  CHECK(opts.constantKey("pickled") == "unmatched pickled");
  CHECK_FALSE(opts.sameConstant("offset", "absent"));
  CHECK(opts.constantKey("absent") == "unmatched absent");
}

TEST_CASE("symbolic batch sizes are kept", "[package]") {
  pt2::Package pkg = pt2::readPackage(test::fixture("dynamic_batch"));
  const ir::Value* x = nullptr;
  for (const auto& s : pkg.program.inputSpecs)
    if (s.kind == ir::InputKind::UserInput) x = s.arg.value();
  REQUIRE(x);
  REQUIRE(x->meta);
  CHECK(x->meta->sizes[0].isExpr);
  CHECK(x->meta->shapeStr().rfind("[s77", 0) == 0);
  CHECK(pkg.program.rangeConstraints.contains("s77"));
}

TEST_CASE("pickles are walked before LibTorch's unpickler sees them", "[package]") {
  using pipecut::pt2::pickleProblem;
  // {"a": 1} as protocol 2 writes it.
  const std::string ok("\x80\x02}q\x00X\x01\x00\x00\x00" "aq\x01K\x01s.", 17);
  CHECK_FALSE(pickleProblem(ok).has_value());
  CHECK(pickleProblem(std::string("\x80\x02}r\xff\xff\xff\x7f.", 9)) ==
        std::optional<std::string>("memo index 2147483647 at byte 3 exceeds the 2 opcodes before it"));
  CHECK(pickleProblem(ok.substr(0, 10)) == std::optional<std::string>("opcode 0x58 at byte 5 claims 1 bytes, 0 remain"));
  CHECK(pickleProblem(ok.substr(0, 16)) == std::optional<std::string>("no STOP opcode (truncated pickle)"));
  CHECK(pickleProblem(std::string("\x80\x02\xff.", 4)) == std::optional<std::string>("opcode 0xff at byte 2 is unknown"));
  CHECK(pickleProblem(std::string("\x80\x02X\xff\xff\xff\xff.", 8)).value().find("claims 4294967295 bytes") !=
        std::string::npos);
  CHECK(pickleProblem("p99999999999\n.").value().find("memo index 99999999999") != std::string::npos);
  CHECK(pickleProblem("").value() == "no STOP opcode (truncated pickle)");
}

TEST_CASE("a .pt2's directory hash covers its records' names, sizes and CRC-32s", "[package]") {
  const std::string path = test::fixture("mlp");
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string id = support::zipDirectorySha256(path);
  CHECK(id.size() == 64);
  CHECK(id != support::zipDirectorySha256(test::fixture("cnn_bn")));
  // The directory's offset: in the zip64 end record when there is one
  // (PyTorch's writer always adds it), else in the end record.
  size_t end = bytes.rfind(std::string("PK\x05\x06", 4));
  size_t end64 = bytes.rfind(std::string("PK\x06\x06", 4));
  REQUIRE(end != std::string::npos);
  const size_t offsetField = end64 != std::string::npos ? end64 + 48 : end + 16;
  size_t start = 0;
  for (int i = end64 != std::string::npos ? 7 : 3; i >= 0; --i)
    start = (start << 8) | static_cast<uint8_t>(bytes[offsetField + static_cast<size_t>(i)]);
  REQUIRE(bytes.compare(start, 4, std::string("PK\x01\x02", 4)) == 0);  // a central header
  CHECK(id == sha256Bytes(bytes.data() + start, bytes.size() - start));
  const std::string tmp = (std::filesystem::temp_directory_path() / "pipecut_zip_directory.pt2").string();
  // A record whose CRC-32 differs (as any change to its bytes makes it).
  std::string edited = bytes;
  edited[start + 16] = static_cast<char>(edited[start + 16] ^ 1);
  writeFile(tmp, edited);
  CHECK(support::zipDirectorySha256(tmp) != id);
  auto fieldOf = [&](const std::string& content) -> std::string {
    writeFile(tmp, content);
    try {
      support::zipDirectorySha256(tmp);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidInput);
      CHECK(e.file() == tmp);
      return e.where() + ": " + e.message();
    }
    return "accepted";
  };
  CHECK(fieldOf(bytes.substr(0, bytes.size() - 10)) == "end of central directory: missing: not a zip file");
  CHECK(fieldOf("PK") == "end of central directory: missing: the file is too short to be a zip");
  // A directory that claims to start elsewhere than where it does.
  std::string shifted = bytes;
  shifted[offsetField] = static_cast<char>(shifted[offsetField] + 1);
  CHECK(fieldOf(shifted) == "end of central directory: the central directory does not end where the end records begin");
  std::filesystem::remove(tmp);
}
