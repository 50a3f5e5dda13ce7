// Stage manifest I/O (JSON and binary) and SHA-256.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "manifest/manifest.h"
#include "manifest/shapes.h"
#include "support/digest.h"
#include "support/sha256.h"
#include "support/error.h"
#include "support/parallel.h"

namespace fs = std::filesystem;

// Field-by-field equality for the manifest structs (manifest.h defines none).
// In namespace pipecut so std::vector's operator== finds them.
namespace pipecut {
static bool operator==(const DimSpec& a, const DimSpec& b) {
  return std::tie(a.size, a.symbol) == std::tie(b.size, b.symbol);
}
static bool operator==(const TensorSpec& a, const TensorSpec& b) {
  return a.dtype == b.dtype && a.shape == b.shape;
}
static bool operator==(const ValueSource& a, const ValueSource& b) {
  return std::tie(a.kind, a.userInput, a.stage, a.output) == std::tie(b.kind, b.userInput, b.stage, b.output);
}
static bool operator==(const Consumer& a, const Consumer& b) {
  return std::tie(a.kind, a.stage, a.input, a.userOutput) == std::tie(b.kind, b.stage, b.input, b.userOutput);
}
static bool operator==(const StageInput& a, const StageInput& b) {
  return a.name == b.name && a.tensor == b.tensor && a.source == b.source;
}
static bool operator==(const StageOutput& a, const StageOutput& b) {
  return a.name == b.name && a.tensor == b.tensor && a.consumers == b.consumers;
}
static bool operator==(const CompiledPackage& a, const CompiledPackage& b) {
  return std::tie(a.device, a.torchVersion, a.source, a.sourceXxh3_128, a.options, a.key, a.sourceDirectorySha256) ==
         std::tie(b.device, b.torchVersion, b.source, b.sourceXxh3_128, b.options, b.key, b.sourceDirectorySha256);
}
static bool operator==(const StageFile& a, const StageFile& b) {
  return std::tie(a.path, a.format, a.sha256, a.bytes, a.gradRegionsInlined, a.xxh3_128, a.compiled) ==
         std::tie(b.path, b.format, b.sha256, b.bytes, b.gradRegionsInlined, b.xxh3_128, b.compiled);
}
static bool operator==(const pipecut::MissingFile& a, const pipecut::MissingFile& b) {
  return a.format == b.format && a.reason == b.reason;
}
static bool operator==(const StageParameter& a, const StageParameter& b) {
  return std::tie(a.name, a.kind, a.bytes) == std::tie(b.name, b.kind, b.bytes);
}
static bool operator==(const ExternalTensor& a, const ExternalTensor& b) {
  return std::tie(a.name, a.tensor, a.aliases, a.kind, a.xxh3_128) == std::tie(b.name, b.tensor, b.aliases, b.kind, b.xxh3_128);
}
static bool operator==(const WeightSourceFile& a, const WeightSourceFile& b) {
  return std::tie(a.file, a.bytes, a.tensors, a.xxh3_128) == std::tie(b.file, b.bytes, b.tensors, b.xxh3_128);
}
static bool operator==(const Stage& a, const Stage& b) {
  return a.index == b.index && a.files == b.files && a.inputs == b.inputs && a.outputs == b.outputs &&
         a.parameters == b.parameters && a.parameterBytes == b.parameterBytes && a.nodeCount == b.nodeCount &&
         a.boundaryBytesPerSample == b.boundaryBytesPerSample && a.modules == b.modules &&
         a.recomputed == b.recomputed && a.missing == b.missing && a.external == b.external &&
         a.supported == b.supported && a.unsupportedReason == b.unsupportedReason;
}
static bool operator==(const UserValue& a, const UserValue& b) {
  return a.name == b.name && a.tensor == b.tensor && a.source == b.source;
}
static bool operator==(const TiedGroup& a, const TiedGroup& b) {
  return a.names == b.names && a.stages == b.stages;
}
static bool operator==(const pipecut::SymbolRange& a, const pipecut::SymbolRange& b) {
  return a.symbol == b.symbol && a.min == b.min && a.max == b.max;
}
static bool operator==(const Manifest& a, const Manifest& b) {
  return a.formatVersion == b.formatVersion && a.sourceModel == b.sourceModel && a.sourceSha256 == b.sourceSha256 &&
         a.sourceDirectorySha256 == b.sourceDirectorySha256 &&
         a.torchVersion == b.torchVersion && a.schemaVersion == b.schemaVersion &&
         a.pipecutVersion == b.pipecutVersion && a.splitSpec == b.splitSpec && a.inputs == b.inputs &&
         a.outputs == b.outputs && a.inSpec == b.inSpec && a.outSpec == b.outSpec && a.stages == b.stages &&
         a.tiedGroups == b.tiedGroups && a.symbols == b.symbols && a.metaExport == b.metaExport &&
         a.weightSources == b.weightSources && a.supportTarget == b.supportTarget &&
         a.minSupportedNodes == b.minSupportedNodes;
}
}  // namespace pipecut

namespace {

using pipecut::Manifest;

std::string scratchDir(const std::string& name) {
#ifdef PIPECUT_TEST_OUT
  fs::path dir = fs::path(PIPECUT_TEST_OUT) / "manifest" / name;
#else
  fs::path dir = fs::temp_directory_path() / "pipecut_test_manifest" / name;
#endif
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

std::string sha(const std::string& s) { return pipecut::sha256Bytes(s.data(), s.size()); }

pipecut::TensorSpec tensor(const std::string& dtype, std::vector<pipecut::DimSpec> shape) {
  return {dtype, std::move(shape)};
}

pipecut::ValueSource fromUser(uint32_t i) {
  pipecut::ValueSource s;
  s.kind = pipecut::ValueSource::Kind::UserInput;
  s.userInput = i;
  return s;
}
pipecut::ValueSource fromStage(uint32_t stage, uint32_t output) {
  pipecut::ValueSource s;
  s.kind = pipecut::ValueSource::Kind::StageOutput;
  s.stage = stage;
  s.output = output;
  return s;
}
pipecut::Consumer toStage(uint32_t stage, uint32_t input) {
  pipecut::Consumer c;
  c.kind = pipecut::Consumer::Kind::StageInput;
  c.stage = stage;
  c.input = input;
  return c;
}
pipecut::Consumer toUser(uint32_t i) {
  pipecut::Consumer c;
  c.kind = pipecut::Consumer::Kind::UserOutput;
  c.userOutput = i;
  return c;
}

// Two stages; every field holds a distinct non-default value, both branches of
// every oneof are used, and one dimension is symbolic.
Manifest fullManifest() {
  Manifest m;
  m.formatVersion = pipecut::kManifestFormatVersion;
  m.sourceModel = "models/mlp.pt2";
  m.sourceSha256 = std::string(64, 'e');
  m.sourceDirectorySha256 = std::string(64, 'd');
  m.torchVersion = "2.11.0";
  m.schemaVersion = "8.17";
  m.pipecutVersion = "0.1.0";
  m.splitSpec = R"({"stages":2})";
  m.inSpec = "[1, {\"type\": \"builtins.tuple\"}]";
  m.outSpec = "[1, {\"type\": null}]";
  m.inputs.push_back({"x", tensor("float32", {{0, "s77"}, {16, ""}}), std::nullopt});
  m.inputs.push_back({"mask", tensor("bool", {{0, "s77"}}), std::nullopt});
  m.outputs.push_back({"out", tensor("float32", {{0, "s77"}, {4, ""}}), fromStage(1, 0)});
  m.outputs.push_back({"mask_out", tensor("bool", {{0, "s77"}}), fromUser(1)});

  pipecut::Stage s0;
  s0.index = 0;
  s0.files.push_back({"stage_000.pt", "torchscript", std::string(64, 'a'), 12345, false, std::string(32, 'e')});
  s0.files.push_back({"stage_000.pt2", "pt2", std::string(64, 'b'), 9007199254740993ull});  // > 2^53
  s0.files.push_back({"stage_000.aoti-cpu.pt2", "aoti", "", 4096, false, std::string(32, '1'),
                      pipecut::CompiledPackage{"cpu", "2.11.0+cpu", "stage_000.pt2", std::string(32, '2'),
                                               R"({"cpp.dynamic_threads":true})", std::string(64, '3'), std::string(64, '4')}});
  s0.inputs.push_back({"x", tensor("float32", {{0, "s77"}, {16, ""}}), fromUser(0)});
  s0.outputs.push_back({"relu", tensor("float16", {{0, "s77"}, {32, ""}}), {toStage(1, 0), toStage(1, 1)}});
  s0.parameters.push_back({"fc1.weight", "parameter", 2048});
  s0.parameters.push_back({"fc1.running_mean", "buffer", 64});
  s0.parameterBytes = 2112;
  s0.nodeCount = 7;
  s0.boundaryBytesPerSample = 64;
  s0.modules = {"fc1", "act"};
  s0.recomputed = {};

  pipecut::Stage s1;
  s1.index = 1;
  s1.files.push_back({"stage_001.pt", "torchscript", std::string(64, 'c'), 777});
  s1.inputs.push_back({"relu", tensor("float16", {{0, "s77"}, {32, ""}}), fromStage(0, 0)});
  s1.inputs.push_back({"relu_again", tensor("float16", {{0, "s77"}, {32, ""}}), fromStage(0, 0)});
  s1.outputs.push_back({"out", tensor("float32", {{0, "s77"}, {4, ""}}), {toUser(0)}});
  s1.parameters.push_back({"_tensor_constant0", "constant", 8});
  s1.parameterBytes = 8;
  s1.nodeCount = 3;
  s1.boundaryBytesPerSample = 0;
  s1.modules = {"fc2", "bl\xc3\xb6" "ck_\xf0\x9f\x98\x80"};  // non-ASCII UTF-8 ("blöck_" and an emoji)
  s1.recomputed = {"sin_1", "cos_1"};
  s1.files.push_back({"stage_001.pt2", "pt2", std::string(64, 'd'), 4242, true});
  s1.missing = {};
  s0.missing.push_back({"torchscript", "node 'to_1' (higher_order.wrap_with_autocast): cannot be expressed"});
  m.stages = {s0, s1};

  m.tiedGroups.push_back({{"embed.weight", "lm_head.weight"}, {0, 1}});
  m.symbols = {{"s70", 2, std::nullopt}, {"s77", 1, 64}};
  m.metaExport = true;
  m.weightSources.push_back({"model-00001-of-00002.safetensors", 5000000000ull, 3, std::string(32, 'a')});
  m.weightSources.push_back({"buffers.safetensors", 96, 1, std::string(32, 'b')});
  m.stages[1].external.push_back({"lm_head.weight", tensor("bfloat16", {{256, ""}, {32, ""}}), {"embed.weight"}, "parameter",
                                  std::string(32, 'c')});
  m.stages[1].external.push_back({"rotary.inv_freq", tensor("float32", {{8, ""}}), {}, "non_persistent_buffer", ""});
  m.supportTarget = "dictionary ops.json";
  m.minSupportedNodes = 3;
  for (auto& st : m.stages) st.supported = st.index != 1;
  m.stages[1].unsupportedReason = "node 'relu' (aten.relu.default): the dictionary does not name aten.relu.default";
  return m;
}

// Runs `fn`, requiring a pipecut::Error of kind InvalidInput; returns it.
template <class Fn>
pipecut::Error expectInvalid(Fn fn) {
  try {
    fn();
  } catch (const pipecut::Error& e) {
    CHECK(e.kind() == pipecut::ErrorKind::InvalidInput);
    return e;
  }
  FAIL("no pipecut::Error was thrown");
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("parallelFor runs every index once and rethrows the lowest failing one", "[manifest]") {
  for (unsigned threads : {1u, 2u, 4u}) {
    std::vector<std::atomic<int>> runs(100);
    pipecut::support::parallelFor(runs.size(), threads, [&](size_t i) { runs[i]++; });
    for (const auto& r : runs) CHECK(r.load() == 1);
    // Indices 10 and 40 fail: 10 always surfaces, whichever thread met which first.
    for (int trial = 0; trial < 20; ++trial) {
      try {
        pipecut::support::parallelFor(100, threads, [&](size_t i) {
          if (i == 10 || i == 40) throw std::runtime_error("job " + std::to_string(i));
        });
        FAIL("no exception");
      } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()) == "job 10");
      }
    }
  }
}

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[manifest]") {
  CHECK(sha("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 pads correctly around block boundaries", "[manifest]") {
  // Expected values from coreutils sha256sum: lengths where the padding spills
  // into a second block (56) or exactly fills one (55, 119).
  CHECK(sha(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha(std::string(63, 'a')) == "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
  CHECK(sha(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(sha(std::string(65, 'a')) == "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0");
  CHECK(sha(std::string(119, 'a')) == "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
  CHECK(sha(std::string(120, 'a')) == "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
}

TEST_CASE("sha256 of a file equals the hash of its bytes", "[manifest]") {
  std::string dir = scratchDir("sha_file");
  // Sizes around the 64 KiB read chunk, and the million-'a' vector (many chunks).
  for (size_t n : {size_t(0), size_t(1), size_t(65535), size_t(65536), size_t(65537), size_t(200001)}) {
    std::string bytes;
    for (size_t i = 0; i < n; ++i) bytes += static_cast<char>((i * 131 + 7) & 0xff);
    std::string path = dir + "/f" + std::to_string(n);
    writeFile(path, bytes);
    CHECK(pipecut::sha256File(path) == sha(bytes));
  }
  writeFile(dir + "/million", std::string(1000000, 'a'));
  CHECK(pipecut::sha256File(dir + "/million") == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  pipecut::Error e = expectInvalid([&] { pipecut::sha256File(dir + "/missing"); });
  CHECK(e.file() == dir + "/missing");
  CHECK_THAT(e.what(), Catch::Contains("cannot open: No such file or directory"));
}

TEST_CASE("xxh3_128 matches xxhsum -H2, in one piece, in pieces and from a file", "[manifest]") {
  // Expected values from xxhsum 0.8.1 (`printf abc | xxhsum -H2`).
  CHECK(pipecut::xxh3_128Bytes("", 0) == "99aa06d3014798d86001c324468d497f");
  CHECK(pipecut::xxh3_128Bytes("abc", 3) == "06b05ab6733a618578af5f94892f3950");
  std::string dir = scratchDir("xxh_file");
  for (size_t n : {size_t(0), size_t(1), size_t(240), size_t(241), size_t(65536), size_t(5000001)}) {
    std::string bytes;
    for (size_t i = 0; i < n; ++i) bytes += static_cast<char>((i * 131 + 7) & 0xff);
    const std::string whole = pipecut::xxh3_128Bytes(bytes.data(), bytes.size());
    pipecut::Xxh3_128 pieces;
    for (size_t at = 0; at < n; at += 1000) pieces.update(bytes.data() + at, std::min<size_t>(1000, n - at));
    CHECK(pieces.hexDigest() == whole);
    std::string path = dir + "/f" + std::to_string(n);
    writeFile(path, bytes);
    CHECK(pipecut::digestFile(pipecut::Digest::Xxh3_128, path) == whole);
    CHECK(pipecut::digestFile(pipecut::Digest::Sha256, path) == sha(bytes));
  }
  pipecut::Error e = expectInvalid([&] { pipecut::digestFile(pipecut::Digest::Xxh3_128, dir + "/missing"); });
  CHECK(e.file() == dir + "/missing");
}

TEST_CASE("a full manifest round-trips through JSON and binary", "[manifest]") {
  Manifest m = fullManifest();

  std::string json = pipecut::manifestToJson(m);
  CHECK(json.back() == '\n');
  CHECK_THAT(json, Catch::Contains("\"format_version\": 1"));  // proto field names, whitespace
  CHECK_THAT(json, Catch::Contains("\"symbol\": \"s77\""));
  CHECK_THAT(json, Catch::Contains("\"recomputed\": []"));  // empty fields are printed too
  Manifest fromJson = pipecut::manifestFromJson(json, "m.json");
  CHECK(fromJson == m);
  CHECK(fromJson.stages[0].files[1].bytes == 9007199254740993ull);
  CHECK(!fromJson.inputs[0].source.has_value());
  CHECK(pipecut::manifestToJson(fromJson) == json);

  std::string binary = pipecut::manifestToBinary(m);
  Manifest fromBinary = pipecut::manifestFromBinary(binary, "m.pb");
  CHECK(fromBinary == m);
  CHECK(pipecut::manifestToBinary(fromBinary) == binary);

  // A minimal manifest (one empty stage, a zero-sized dimension) round-trips as well.
  Manifest small;
  small.inputs.push_back({"z", tensor("int64", {{0, ""}}), std::nullopt});
  small.stages.emplace_back();
  CHECK(pipecut::manifestFromJson(pipecut::manifestToJson(small), "e.json") == small);
  CHECK(pipecut::manifestFromBinary(pipecut::manifestToBinary(small), "e.pb") == small);
}

TEST_CASE("manifest serialization is deterministic", "[manifest]") {
  Manifest m = fullManifest();
  CHECK(pipecut::manifestToBinary(m) == pipecut::manifestToBinary(m));
  CHECK(pipecut::manifestToBinary(m) == pipecut::manifestToBinary(fullManifest()));
  CHECK(pipecut::manifestToJson(m) == pipecut::manifestToJson(fullManifest()));
}

TEST_CASE("symbol ranges: sorted, unique, min <= max", "[manifest]") {
  auto whereOf = [](const Manifest& m) {
    return expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"); }).where();
  };
  Manifest m = fullManifest();
  std::swap(m.symbols[0], m.symbols[1]);
  CHECK(whereOf(m) == "symbols[1].symbol");
  m = fullManifest();
  m.symbols[1].symbol = "s70";
  CHECK(whereOf(m) == "symbols[1].symbol");
  m = fullManifest();
  m.symbols[1].max = 0;
  CHECK(whereOf(m) == "symbols[1].max");
  m = fullManifest();
  m.symbols[0].symbol.clear();
  CHECK(whereOf(m) == "symbols[0].symbol");
}

TEST_CASE("ShapeBinder: static sizes, exported ranges, one size per symbol", "[manifest]") {
  auto spec = [](std::vector<std::string> dims) {
    pipecut::TensorSpec t{"float32", {}};
    for (const auto& d : dims) {
      pipecut::DimSpec s;
      if (!d.empty() && d[0] == 's') s.symbol = d;
      else s.size = std::stoll(d);
      t.shape.push_back(s);
    }
    return t;
  };
  std::vector<pipecut::SymbolRange> ranges{{"s72", 2, std::nullopt}, {"s70", 1, 16}};
  pipecut::ShapeBinder b(ranges);
  std::vector<int64_t> ids{3, 5}, hidden{3, 5, 32};
  CHECK(b.bind("input_ids", spec({"s72", "s70"}), ids).empty());
  CHECK(b.bind("hidden", spec({"s72", "s70", "32"}), hidden).empty());
  std::vector<int64_t> other{4, 5, 32};
  CHECK(b.bind("h2", spec({"s72", "s70", "32"}), other) ==
        "dimension 0 is 4, but dimension 0 of 'input_ids' is 3 and the program has both as s72");
  std::vector<int64_t> wide{3, 5, 33};
  CHECK(b.bind("h3", spec({"s72", "s70", "32"}), wide) == "dimension 2 is 33, the program takes 32");
  std::vector<int64_t> flat{15};
  CHECK(b.bind("h4", spec({"s72", "s70"}), flat) == "has 1 dimensions, the program takes 2");
  b.reset();  // the next micro-batch binds afresh
  std::vector<int64_t> one{1, 5};
  CHECK(b.bind("input_ids", spec({"s72", "s70"}), one) == "dimension 0 is 1, below the exported minimum 2 of s72");
  std::vector<int64_t> longSeq{2, 17};
  CHECK(b.bind("input_ids", spec({"s72", "s70"}), longSeq) == "dimension 1 is 17, above the exported maximum 16 of s70");
  // A symbol without a range (a size expression) is checked for consistency only.
  b.reset();
  std::vector<int64_t> a{0}, c{0}, d{7};
  CHECK(b.bind("x", spec({"s1*s2"}), a).empty());
  CHECK(b.bind("y", spec({"s1*s2"}), c).empty());
  CHECK_FALSE(b.bind("z", spec({"s1*s2"}), d).empty());
}

TEST_CASE("malformed manifests are rejected naming the file and field", "[manifest]") {
  SECTION("garbage JSON") {
    pipecut::Error e = expectInvalid([] { pipecut::manifestFromJson("{ not json", "bad.json"); });
    CHECK(e.file() == "bad.json");
    CHECK_THAT(e.what(), Catch::StartsWith("bad.json: invalid manifest JSON"));
  }
  SECTION("an unknown JSON field") {
    pipecut::Error e =
        expectInvalid([] { pipecut::manifestFromJson(R"({"format_version": 1, "stagez": []})", "m.json"); });
    CHECK_THAT(e.what(), Catch::Contains("stagez"));
  }
  SECTION("garbage binary") {
    expectInvalid([] { pipecut::manifestFromBinary(std::string("\xff\xff\xff\xff", 4), "bad.pb"); });
  }
  SECTION("a missing or newer format_version") {
    pipecut::Error e = expectInvalid([] { pipecut::manifestFromBinary("", "empty.pb"); });
    CHECK(e.where() == "format_version");
    Manifest m = fullManifest();
    m.formatVersion = pipecut::kManifestFormatVersion + 1;
    e = expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "new.pb"); });
    CHECK(e.where() == "format_version");
    CHECK_THAT(e.what(), Catch::Contains("newer"));
    // Even when the newer JSON also has fields this version does not know.
    e = expectInvalid([] { pipecut::manifestFromJson(R"({"format_version": 99, "future": 1})", "new.json"); });
    CHECK(e.where() == "format_version");
  }
  SECTION("external tensors: sorted by name, static, their digests hex") {
    auto refused = [](auto edit) {
      Manifest m = fullManifest();
      edit(m.stages[1].external);
      return expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"); });
    };
    pipecut::Error e = refused([](auto& ext) { std::swap(ext[0], ext[1]); });
    CHECK(std::string(e.what()) == "m.pb: stages[1].external[1].name: 'lm_head.weight' is out of order or repeated "
                                   "(external tensors are sorted by name)");
    e = refused([](auto& ext) { ext[0].tensor.shape[0] = {0, "s77"}; });
    CHECK(e.where() == "stages[1].external[0].tensor.shape");
    e = refused([](auto& ext) { ext[0].xxh3_128 = "XYZ"; });
    CHECK(std::string(e.what()) == "m.pb: stages[1].external[0].xxh3_128: expected 32 lowercase hex digits");
    e = refused([](auto& ext) { ext[1].name.clear(); });
    CHECK(e.where() == "stages[1].external[1].name");
  }
  SECTION("support marks: on every stage exactly when the split names a target; a reason only where unsupported") {
    auto refused = [](auto edit) {
      Manifest m = fullManifest();
      edit(m);
      return expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"); });
    };
    pipecut::Error e = refused([](Manifest& m) { m.stages[0].supported.reset(); });
    CHECK(std::string(e.what()) == "m.pb: stages[0].supported: missing: the split was cut by support_target "
                                   "'dictionary ops.json'");
    e = refused([](Manifest& m) { m.supportTarget.clear(); });
    CHECK(std::string(e.what()) == "m.pb: stages[0].supported: set, but the manifest has no support_target");
    e = refused([](Manifest& m) { m.stages[0].unsupportedReason = "why"; });
    CHECK(std::string(e.what()) == "m.pb: stages[0].unsupported_reason: set on a stage that is not marked unsupported");
  }
  SECTION("a stage_output reference to a missing stage") {
    Manifest m = fullManifest();
    m.stages[1].inputs[1].source = fromStage(5, 0);
    for (bool json : {false, true}) {
      pipecut::Error e = expectInvalid([&] {
        if (json)
          pipecut::manifestFromJson(pipecut::manifestToJson(m), "m.json");
        else
          pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb");
      });
      CHECK(e.where() == "stages[1].inputs[1].source.stage_output.stage");
      CHECK_THAT(e.what(), Catch::StartsWith(json ? "m.json: stages[1].inputs[1].source.stage_output.stage: 5"
                                                  : "m.pb: stages[1].inputs[1].source.stage_output.stage: 5"));
    }
  }
  SECTION("other out-of-range references") {
    auto whereOf = [](const Manifest& m) {
      return expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"); }).where();
    };
    Manifest m = fullManifest();
    m.outputs[0].source = fromStage(1, 3);
    CHECK(whereOf(m) == "outputs[0].source.stage_output.output");
    m = fullManifest();
    m.stages[0].inputs[0].source = fromUser(2);
    CHECK(whereOf(m) == "stages[0].inputs[0].source.user_input");
    m = fullManifest();
    m.stages[0].outputs[0].consumers[1] = toStage(1, 2);
    CHECK(whereOf(m) == "stages[0].outputs[0].consumers[1].stage_input.input");
    m = fullManifest();
    m.stages[0].outputs[0].consumers[0] = toStage(2, 0);
    CHECK(whereOf(m) == "stages[0].outputs[0].consumers[0].stage_input.stage");
    m = fullManifest();
    m.stages[1].outputs[0].consumers[0] = toUser(2);
    CHECK(whereOf(m) == "stages[1].outputs[0].consumers[0].user_output");
    m = fullManifest();
    m.tiedGroups[0].stages[1] = 2;
    CHECK(whereOf(m) == "tied_groups[0].stages[1]");
  }
  SECTION("an unset oneof") {
    pipecut::Error e = expectInvalid([] {
      pipecut::manifestFromJson(R"({"format_version": 1, "stages": [{"inputs": [{"name": "x", "source": {}}]}]})",
                                "m.json");
    });
    CHECK(e.where() == "stages[0].inputs[0].source");
    CHECK_THAT(e.what(), Catch::Contains("m.json: stages[0].inputs[0].source: neither user_input nor stage_output"));

    e = expectInvalid([] {  // a stage input without any source at all
      pipecut::manifestFromJson(R"({"format_version": 1, "stages": [{"inputs": [{"name": "x"}]}]})", "m.json");
    });
    CHECK(e.where() == "stages[0].inputs[0].source");

    e = expectInvalid([] {
      pipecut::manifestFromJson(R"({"format_version": 1, "stages": [{"outputs": [{"consumers": [{}]}]}]})",
                                "m.json");
    });
    CHECK(e.where() == "stages[0].outputs[0].consumers[0]");

    e = expectInvalid([] {
      pipecut::manifestFromJson(R"({"format_version": 1, "inputs": [{"tensor": {"shape": [{"size": 2}, {}]}}]})",
                                "m.json");
    });
    CHECK(e.where() == "inputs[0].tensor.shape[1]");
  }
}

TEST_CASE("a compiled package's record: for format aoti only, from this stage's .pt2, one per device", "[manifest]") {
  auto refused = [](const Manifest& m, const std::string& where, const std::string& text) {
    pipecut::Error e = expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"); });
    CHECK(e.where() == where);
    CHECK_THAT(e.what(), Catch::Contains(text));
  };
  Manifest m = fullManifest();
  CHECK(pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb") == m);
  SECTION("an aoti file without its record") {
    m.stages[0].files[2].compiled.reset();
    refused(m, "stages[0].files[2].compiled", "missing: an aoti package records what it was compiled from");
  }
  SECTION("a record on another format") {
    m.stages[0].files[1].compiled = m.stages[0].files[2].compiled;
    refused(m, "stages[0].files[1].compiled", "is for formats aoti and aoti-train only");
  }
  SECTION("an unknown device") {
    m.stages[0].files[2].compiled->device = "tpu";
    refused(m, "stages[0].files[2].compiled.device", "unknown device 'tpu' (cpu, cuda)");
  }
  SECTION("a key that is not a SHA-256") {
    m.stages[0].files[2].compiled->key = "abc";
    refused(m, "stages[0].files[2].compiled.key", "expected 64 lowercase hex digits");
  }
  SECTION("a source directory identity that is not a SHA-256") {
    m.stages[0].files[2].compiled->sourceDirectorySha256 = "ABC";
    refused(m, "stages[0].files[2].compiled.source_directory_sha256", "expected 64 lowercase hex digits");
  }
  SECTION("compiled from another stage's file") {
    m.stages[0].files[2].compiled->source = "stage_001.pt";
    refused(m, "stages[0].files[2].compiled.source", "'stage_001.pt' is not a .pt2 file of this stage");
  }
  SECTION("two packages for one device") {
    pipecut::StageFile again = m.stages[0].files[2];
    again.path = "stage_000.again.pt2";
    m.stages[0].files.push_back(again);
    refused(m, "stages[0].files[3].compiled.device", "a second package for cpu");
  }
  // pipecut compile --train's programs: one file per program, each a record.
  auto trainFile = [&](const std::string& program) {
    pipecut::StageFile f = m.stages[0].files[2];
    f.format = "aoti-train";
    f.path = "stage_000.train-cpu." + program + ".pt2";
    f.compiled->program = program;
    f.compiled->recompute = "all";
    return f;
  };
  SECTION("training programs F, I, W and B beside the inference package round-trip") {
    for (const char* p : {"F", "I", "W", "B"}) m.stages[0].files.push_back(trainFile(p));
    CHECK(pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb") == m);
    CHECK(pipecut::manifestFromJson(pipecut::manifestToJson(m), "m.json") == m);
  }
  SECTION("a training program that is not F, I, W or B") {
    m.stages[0].files.push_back(trainFile("X"));
    refused(m, "stages[0].files[3].compiled.program", "'X': a training program is F, I, W or B");
  }
  SECTION("a program named on an inference package") {
    m.stages[0].files[2].compiled->program = "F";
    refused(m, "stages[0].files[2].compiled.program", "is for format aoti-train only");
  }
  SECTION("two F programs for one device") {
    m.stages[0].files.push_back(trainFile("F"));
    pipecut::StageFile again = trainFile("F");
    again.path = "stage_000.train-cpu.F2.pt2";
    m.stages[0].files.push_back(again);
    refused(m, "stages[0].files[4].compiled.device", "a second package for cpu (program F)");
  }
}

TEST_CASE("manifests whose parts disagree are rejected: what the runner would otherwise trust", "[manifest]") {
  auto whereOf = [](const Manifest& m) {
    return expectInvalid([&] { pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"); }).where();
  };
  auto messageOf = [](const Manifest& m) {
    return expectInvalid([&] { pipecut::manifestFromJson(pipecut::manifestToJson(m), "m.json"); }).message();
  };
  Manifest m = fullManifest();
  m.stages.clear();
  m.outputs.clear();
  m.tiedGroups.clear();
  CHECK(whereOf(m) == "stages");

  m = fullManifest();
  m.stages[1].index = 7;
  CHECK(whereOf(m) == "stages[1].index");

  // A value flowing backward would leave the pipeline waiting forever.
  m = fullManifest();
  m.stages[0].inputs.push_back({"late", m.stages[1].outputs[0].tensor, fromStage(1, 0)});
  m.stages[1].outputs[0].consumers.push_back(toStage(0, 1));
  CHECK(whereOf(m) == "stages[0].inputs[1].source.stage_output.stage");
  CHECK_THAT(messageOf(m), Catch::Contains("stage 1 does not run before stage 0"));

  m = fullManifest();
  m.stages[0].outputs[0].consumers.pop_back();  // stage 1 input 1 still names it
  CHECK(whereOf(m) == "stages[1].inputs[1].source");
  m = fullManifest();
  m.stages[1].inputs[1].source = fromUser(0);  // stage 0 output 0 still lists it as a consumer
  CHECK(whereOf(m) == "stages[0].outputs[0].consumers[1]");
  m = fullManifest();
  m.outputs[0].source.reset();
  CHECK(whereOf(m) == "outputs[0].source");
  m = fullManifest();
  m.stages[1].outputs[0].consumers.clear();
  CHECK(whereOf(m) == "outputs[0].source");

  m = fullManifest();
  m.stages[1].inputs[0].tensor.shape[1].size = 33;
  CHECK(whereOf(m) == "stages[1].inputs[0].tensor");
  m = fullManifest();
  m.inputs[0].tensor.dtype = "float33";
  CHECK(whereOf(m) == "inputs[0].tensor.dtype");
  m = fullManifest();
  m.inputs[0].tensor.shape[1].size = -16;
  m.stages[0].inputs[0].tensor.shape[1].size = -16;
  CHECK(whereOf(m) == "inputs[0].tensor.shape[1].size");

  for (const char* bad : {"../stage_000.pt", "/etc/passwd", "", "manifest.pb", "sub/stage.pt"}) {
    INFO(bad);
    m = fullManifest();
    m.stages[0].files[0].path = bad;
    CHECK(whereOf(m) == "stages[0].files[0].path");
  }
  m = fullManifest();
  m.stages[1].files[0].path = m.stages[0].files[0].path;
  CHECK(whereOf(m) == "stages[1].files[0].path");
  m = fullManifest();
  m.stages[0].files[0].format = "onnx";
  CHECK(whereOf(m) == "stages[0].files[0].format");
  m = fullManifest();
  m.stages[0].files[0].sha256 = std::string(64, 'A');
  CHECK(whereOf(m) == "stages[0].files[0].sha256");
  // Either digest may be missing (sha256 unless split --sha256), not both.
  m.stages[0].files[0].sha256.clear();
  const std::string xxh = m.stages[0].files[0].xxh3_128;
  m.stages[0].files[0].xxh3_128.clear();
  CHECK(whereOf(m) == "stages[0].files[0]");
  CHECK_THAT(messageOf(m), Catch::Contains("no digest: expected sha256 or xxh3_128"));
  m.stages[0].files[0].xxh3_128 = xxh.empty() ? std::string(32, 'a') : xxh;
  CHECK_NOTHROW(pipecut::manifestFromBinary(pipecut::manifestToBinary(m), "m.pb"));  // xxh3_128 alone
  m.stages[0].files[0].sha256 = std::string(64, 'a');
  m.stages[0].files[0].xxh3_128 = std::string(64, 'a');  // a SHA-256 in its place
  CHECK(whereOf(m) == "stages[0].files[0].xxh3_128");
  m = fullManifest();
  m.stages[0].missing[0].format = "onnx";
  CHECK(whereOf(m) == "stages[0].missing[0].format");
}

TEST_CASE("strings that are not UTF-8 are refused when writing, naming the field", "[manifest]") {
  // protobuf itself would write them, then fail to parse the binary back and
  // silently drop the bad bytes from JSON.
  for (const char* bad : {"\xff", "a\xc3", "\xc0\xaf" /* overlong */, "\xed\xa0\x80" /* surrogate */}) {
    Manifest m = fullManifest();
    m.stages[1].recomputed[1] = bad;
    for (bool json : {false, true}) {
      pipecut::Error e = expectInvalid([&] {
        if (json)
          pipecut::manifestToJson(m);
        else
          pipecut::manifestToBinary(m);
      });
      CHECK(e.where() == "stages[1].recomputed[1]");
      CHECK(e.message() == "not valid UTF-8");
    }
  }
  Manifest m = fullManifest();
  m.sourceModel = "\xff.pt2";
  CHECK(expectInvalid([&] { pipecut::manifestToBinary(m); }).where() == "source_model");
}

TEST_CASE("readManifest prefers manifest.pb and falls back to manifest.json", "[manifest]") {
  std::string dir = scratchDir("read");
  pipecut::Error e = expectInvalid([&] { pipecut::readManifest(dir); });
  CHECK(e.file() == dir);
  CHECK_THAT(e.what(), Catch::Contains("no manifest.pb or manifest.json"));

  Manifest json = fullManifest();
  json.sourceModel = "from_json.pt2";
  writeFile(dir + "/manifest.json", pipecut::manifestToJson(json));
  CHECK(pipecut::readManifest(dir) == json);

  Manifest binary = fullManifest();
  binary.sourceModel = "from_pb.pt2";
  writeFile(dir + "/manifest.pb", pipecut::manifestToBinary(binary));
  CHECK(pipecut::readManifest(dir) == binary);
  CHECK(pipecut::readManifest(dir + "/") == binary);

  writeFile(dir + "/manifest.pb", "\xff\xff\xff");
  e = expectInvalid([&] { pipecut::readManifest(dir); });
  CHECK(e.file() == dir + "/manifest.pb");
}

TEST_CASE("a package's recorded Inductor options say whether it takes its weights from the stage .pt2", "[manifest]") {
  CHECK(pipecut::weightsLeftOut(R"({"aot_inductor.package_constants_in_so":false,"cpp.dynamic_threads":true})"));
  CHECK(pipecut::weightsLeftOut(R"({"aot_inductor.package_constants_in_so":false,"aot_inductor.package_constants_on_disk_format":null})"));
  CHECK(pipecut::weightsLeftOut(R"({"aot_inductor.package_constants_in_so":false,"aot_inductor.package_constants_on_disk_format":""})"));
  CHECK_FALSE(pipecut::weightsLeftOut(R"({"cpp.dynamic_threads":true,"freezing":true})"));  // in the library: the default
  CHECK_FALSE(pipecut::weightsLeftOut(R"({"aot_inductor.package_constants_in_so":true})"));
  CHECK_FALSE(pipecut::weightsLeftOut(
      R"({"aot_inductor.package_constants_in_so":false,"aot_inductor.package_constants_on_disk_format":"binary_blob"})"));
  CHECK_FALSE(pipecut::weightsLeftOut(R"({"aot_inductor.package_constants_in_so":0})"));  // not the boolean false
  CHECK_FALSE(pipecut::weightsLeftOut("not json"));
  CHECK_FALSE(pipecut::weightsLeftOut("[]"));
}
