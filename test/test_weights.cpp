// Weights from a model's own checkpoint (weights/): sources opened and
// checked, names mapped, tensors bound into a package, dtypes cast exactly
// as torch casts them.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include <ATen/ATen.h>

#include "pt2/package.h"
#include "support/dtypes.h"
#include "support/error.h"
#include "support/files.h"
#include "support/safetensors.h"
#include "test_util.h"
#include "weights/binding.h"
#include "weights/cast.h"
#include "weights/checkpoint.h"

namespace fs = std::filesystem;
using namespace pipecut;

namespace {

// A float32 tensor of `n` values start, start + 1, ... for writeSafetensors.
struct Floats {
  std::string key;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

Floats floats(const std::string& key, std::vector<int64_t> shape, float start) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  Floats f{key, std::move(shape), std::vector<float>(n)};
  for (size_t i = 0; i < n; ++i) f.values[i] = start + static_cast<float>(i);
  return f;
}

void write(const std::string& path, const std::vector<Floats>& tensors) {
  std::vector<support::SafetensorsTensorRef> refs;
  for (const auto& t : tensors)
    refs.push_back({t.key, "F32", t.shape, reinterpret_cast<const uint8_t*>(t.values.data()), t.values.size() * 4});
  support::writeSafetensors(path, refs, {{"format", "pt"}});
}

void writeText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string dir(const std::string& name) {
  const std::string d = test::outPath("weights/" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// "file: where: message" of what opening the sources throws.
std::string openError(const std::vector<std::string>& sources) {
  try {
    weights::Checkpoint::open(sources);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    return e.what();
  }
  return "opened";
}

}  // namespace

TEST_CASE("weights: a file, an index of shards and a checkpoint directory", "[weights]") {
  const std::string d = dir("sources");
  write(d + "/model-00001-of-00002.safetensors", {floats("a.weight", {2, 3}, 0), floats("b.weight", {4}, 10)});
  write(d + "/model-00002-of-00002.safetensors", {floats("c.bias", {3}, 20), floats("stray", {1}, 0)});
  writeText(d + "/model.safetensors.index.json",
            R"({"metadata": {"total_size": 52}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
               "b.weight": "model-00001-of-00002.safetensors", "c.bias": "model-00002-of-00002.safetensors"}})");
  for (const std::string& source : {d, d + "/model.safetensors.index.json"}) {
    weights::Checkpoint c = weights::Checkpoint::open({source});
    REQUIRE(c.files().size() == 2);
    // The index's tensors only: a shard's tensor it does not list is not the checkpoint's.
    REQUIRE(c.tensors().size() == 3);
    CHECK(c.find("stray") == nullptr);
    const weights::CheckpointTensor* a = c.find("a.weight");
    REQUIRE(a);
    CHECK(a->shapeStr() == "[2, 3]");
    CHECK(std::string(a->dtype->torchName) == "float32");
    float v[6];
    std::memcpy(v, a->bytes.data, sizeof v);
    CHECK(v[5] == 5.0f);
    CHECK(c.files()[c.find("c.bias")->file].path == d + "/model-00002-of-00002.safetensors");
  }
  // A directory with one file; a file given directly; several sources.
  const std::string one = dir("one");
  write(one + "/model.safetensors", {floats("x", {2}, 1)});
  write(one + "/extra.safetensors", {floats("y", {2}, 1)});
  weights::Checkpoint both = weights::Checkpoint::open({one, one + "/extra.safetensors"});
  CHECK(both.tensors().size() == 2);
  CHECK(both.find("x"));
  CHECK(both.find("y"));
}

TEST_CASE("weights: malformed sources are refused naming the file and the tensor", "[weights]") {
  const std::string d = dir("bad");
  write(d + "/good.safetensors", {floats("a", {2, 2}, 0), floats("b", {2}, 0)});
  // Truncated: the last tensor's bytes run past the end.
  {
    std::string bytes = support::readFile(d + "/good.safetensors");
    writeText(d + "/truncated.safetensors", bytes.substr(0, bytes.size() - 4));
    CHECK_THAT(openError({d + "/truncated.safetensors"}),
               Catch::StartsWith(d + "/truncated.safetensors: b.data_offsets: [16, 24] is outside the data section"));
  }
  // An absurd header length.
  writeText(d + "/absurd.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
  CHECK_THAT(openError({d + "/absurd.safetensors"}), Catch::StartsWith(d + "/absurd.safetensors: header: header length"));
  // Two tensors over the same bytes.
  {
    std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    writeText(d + "/overlap.safetensors", bytes + header + std::string(8, '\0'));
    CHECK(openError({d + "/overlap.safetensors"}) ==
          d + "/overlap.safetensors: b.data_offsets: [4, 8] overlaps 'a' at [0, 8]");
  }
  // An index naming a shard that is not there, a tensor its shard lacks, a shard elsewhere.
  writeText(d + "/missing.safetensors.index.json", R"({"weight_map": {"a": "nowhere.safetensors"}})");
  CHECK_THAT(openError({d + "/missing.safetensors.index.json"}),
             Catch::StartsWith(d + "/missing.safetensors.index.json: weight_map.a: is in shard 'nowhere.safetensors', which cannot be read"));
  writeText(d + "/lacks.safetensors.index.json", R"({"weight_map": {"a": "good.safetensors", "zz": "good.safetensors"}})");
  CHECK(openError({d + "/lacks.safetensors.index.json"}) ==
        d + "/lacks.safetensors.index.json: weight_map.zz: is in shard 'good.safetensors', which holds no such tensor");
  writeText(d + "/escape.safetensors.index.json", R"({"weight_map": {"a": "../bad/good.safetensors"}})");
  CHECK_THAT(openError({d + "/escape.safetensors.index.json"}),
             Catch::Contains("weight_map.a: names shard '../bad/good.safetensors'; a shard is a file beside the index"));
  writeText(d + "/notjson.safetensors.index.json", "{weight_map");
  CHECK_THAT(openError({d + "/notjson.safetensors.index.json"}), Catch::Contains("not a JSON object"));
  // The same name from two sources.
  write(d + "/again.safetensors", {floats("a", {2, 2}, 5)});
  CHECK(openError({d + "/good.safetensors", d + "/again.safetensors"}) ==
        d + "/again.safetensors: a: is also in " + d + "/good.safetensors; each tensor must come from one --weights source");
  // A directory holding no checkpoint; a FIFO (refused without blocking on it).
  CHECK_THAT(openError({dir("empty")}), Catch::Contains("is a directory holding neither model.safetensors.index.json nor model.safetensors"));
  const std::string fifo = d + "/fifo.safetensors";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(openError({fifo}) == fifo + ": is a FIFO, expected a .safetensors file, a *.safetensors.index.json or a checkpoint directory");
  CHECK_THAT(openError({d + "/absent.safetensors"}), Catch::StartsWith(d + "/absent.safetensors: cannot open a .safetensors file"));
}

TEST_CASE("weights: names are renamed by the first pattern that matches, then prefixed", "[weights]") {
  weights::NameMapping m({R"(^model\.norm\.gamma$=model.norm.weight)", R"(layers\.(\d+)\.attn=layers.\1.self_attn)",
                          R"(layers=never)"},
                         "inner.");
  CHECK(m.programName("model.norm.gamma") == "inner.model.norm.weight");
  CHECK(m.programName("model.layers.12.attn.q.weight") == "inner.model.layers.12.self_attn.q.weight");
  CHECK(m.programName("model.layers.3.mlp.weight") == "inner.model.never.3.mlp.weight");  // the third pattern, every match
  CHECK(m.programName("lm_head.weight") == "inner.lm_head.weight");
  CHECK(weights::NameMapping({R"(x=a$b$)"}, "").programName("x") == "a$b$");  // a literal $ (before no digit)
  CHECK(weights::NameMapping({R"((x)=$1$1)"}, "").programName("x") == "xx");
  CHECK(weights::NameMapping({R"((a)(b)=\g<2>\1)"}, "").programName("ab") == "ba");
  auto usage = [](const std::string& rename) {
    try {
      weights::NameMapping({rename}, "");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Usage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(usage("no-equals") == "--weights-rename: expected REGEX=REPLACEMENT, got 'no-equals'");
  CHECK(usage("=x") == "--weights-rename: expected REGEX=REPLACEMENT, got '=x'");
  CHECK_THAT(usage("(=x"), Catch::StartsWith("--weights-rename: '(' is not a regular expression"));
}

TEST_CASE("weights: two checkpoint names that map to one program name are refused", "[weights]") {
  const std::string d = dir("collide");
  write(d + "/a.safetensors", {floats("norm.gamma", {2}, 0), floats("norm.weight", {2}, 0)});
  weights::BindOptions o;
  o.sources = {d + "/a.safetensors"};
  o.renames = {R"(gamma=weight)"};
  try {
    weights::WeightSource source(o);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == d + "/a.safetensors: norm.weight: binds to 'norm.weight', as 'norm.gamma' of " + d +
                                       "/a.safetensors does (after --weights-rename and --weights-prefix); each program "
                                       "tensor takes one");
  }
}

TEST_CASE("weights: a package's tensors bind by name, ties from any of their names", "[weights]") {
  // gpt2_tied ties lm_head.weight and transformer.wte.weight (one record).
  pt2::Package pkg = pt2::readPackage(test::fixture("gpt2_tied"));
  const pt2::StoredTensor& wte = pkg.weights.at("transformer.wte.weight");
  const std::vector<int64_t> shape = {wte.meta->sizes[0].value, wte.meta->sizes[1].value};
  const std::string d = dir("tied");
  // The checkpoint holds the tie once, under the embedding's name, as
  // transformers saves it, plus a tensor the program does not have.
  write(d + "/model.safetensors", {floats("transformer.wte.weight", shape, 1), floats("unused.weight", {3}, 0)});
  weights::BindOptions o;
  o.sources = {d};
  weights::WeightSource source(o);
  weights::Binding b = weights::bindPackage(pkg, source);
  REQUIRE(b.bound.size() == 2);
  CHECK(b.bound[0].fqn == "lm_head.weight");
  CHECK(b.bound[1].fqn == "transformer.wte.weight");
  CHECK(b.bound[0].from == b.bound[1].from);
  REQUIRE(b.unused.size() == 1);
  CHECK(b.unused[0]->name == "unused.weight");
  CHECK(b.missing.empty());
  CHECK(b.kept.size() + b.bound.size() == pkg.weights.size() + pkg.constants.size());
  // Both names are one storage still: the checkpoint's bytes, read in place.
  const pt2::StoredTensor& head = pkg.weights.at("lm_head.weight");
  CHECK(head.data.storageKey(head.fqn) == pkg.weights.at("transformer.wte.weight").data.storageKey("transformer.wte.weight"));
  CHECK(head.data.view().data == source.find("transformer.wte.weight")->bytes.data);
  CHECK(head.entry()["tensor_meta"]["device"]["type"] == "cpu");
  float first;
  std::memcpy(&first, head.data.view().data, 4);
  CHECK(first == 1.0f);
}

TEST_CASE("weights: a dtype or shape that differs is refused naming both; --weights-cast converts dtypes", "[weights]") {
  const std::string d = dir("mismatch");
  Floats emb = floats("transformer.wte.weight", {256, 32}, 0);
  write(d + "/shape.safetensors", {floats("transformer.wte.weight", {32, 256}, 0)});
  std::vector<uint16_t> half(256 * 32, 0x3c00);  // float16 ones
  support::writeSafetensors(d + "/half.safetensors",
                            {{"transformer.wte.weight", "F16", {256, 32}, reinterpret_cast<const uint8_t*>(half.data()),
                              half.size() * 2}},
                            {});
  auto bindError = [&](const std::string& file, bool cast) {
    pt2::Package pkg = pt2::readPackage(test::fixture("gpt2_tied"));
    weights::BindOptions o;
    o.sources = {file};
    o.cast = cast;
    weights::WeightSource source(o);
    try {
      weights::bindPackage(pkg, source);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidInput);
      return std::string(e.what());
    }
    float v;
    std::memcpy(&v, pkg.weights.at("lm_head.weight").data.view().data, 4);
    return "bound " + std::to_string(v);
  };
  CHECK(bindError(d + "/shape.safetensors", false) ==
        d + "/shape.safetensors: transformer.wte.weight: is float32 [32, 256] here; the program's 'lm_head.weight' is "
            "float32 [256, 32] (--weights-cast converts dtypes, never shapes)");
  CHECK(bindError(d + "/half.safetensors", false) ==
        d + "/half.safetensors: transformer.wte.weight: is float16 [256, 32] here; the program's 'lm_head.weight' is "
            "float32 [256, 32]; --weights-cast converts it");
  CHECK(bindError(d + "/half.safetensors", true) == "bound 1.000000");
}

TEST_CASE("weights: casts round as torch's Tensor.to does", "[weights]") {
  // Values that exercise rounding: ties, subnormals of each target,
  // overflow to infinity, infinities, signed zeros, and random ones.
  std::vector<float> f = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e6f, -1e38f, 5.96e-8f, 2.98e-8f,
                          2.99e-8f, 1e-45f, 1.1754942e-38f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 1.00390625f, 1.0009765625f, 3.14159265f};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {
    uint32_t u = bits(rng);
    float v;
    std::memcpy(&v, &u, 4);
    if (!std::isnan(v)) f.push_back(v);
  }
  for (int e = -30; e < 20; ++e) f.push_back(std::ldexp(1.0f + 1.0f / 2048, e));  // ties at 16-bit precision
  const at::Tensor src = at::from_blob(f.data(), {static_cast<int64_t>(f.size())}, at::kFloat).clone();
  const at::Tensor srcDouble = src.to(at::kDouble).mul(1.0 + 1e-12);  // not exactly representable in float
  struct Case {
    at::Tensor from;
    at::ScalarType to;
  };
  for (const Case& c : {Case{src, at::kBFloat16}, Case{src, at::kHalf}, Case{src, at::kDouble},
                        Case{srcDouble, at::kFloat}, Case{srcDouble, at::kHalf}, Case{srcDouble, at::kBFloat16},
                        Case{src.to(at::kHalf), at::kFloat}, Case{src.to(at::kBFloat16), at::kHalf},
                        Case{src.to(at::kHalf), at::kBFloat16}, Case{src.to(at::kBFloat16), at::kDouble}}) {
    auto dtypeOf = [](at::ScalarType t) {
      return support::dtypeFromTorchName(t == at::kFloat ? "float32" : t == at::kDouble ? "float64"
                                         : t == at::kHalf ? "float16" : "bfloat16");
    };
    const auto* from = dtypeOf(c.from.scalar_type());
    const auto* to = dtypeOf(c.to);
    REQUIRE(from);
    REQUIRE(to);
    REQUIRE(weights::castable(*from, *to));
    const at::Tensor contiguous = c.from.contiguous();
    const std::string ours = weights::castTo(
        *from, *to, pt2::ByteView{static_cast<const uint8_t*>(contiguous.data_ptr()), static_cast<size_t>(contiguous.nbytes())},
        static_cast<uint64_t>(contiguous.numel()));
    const at::Tensor theirs = c.from.to(c.to).contiguous();
    INFO(from->torchName << " -> " << to->torchName);
    REQUIRE(ours.size() == static_cast<size_t>(theirs.nbytes()));
    CHECK(std::memcmp(ours.data(), theirs.data_ptr(), ours.size()) == 0);
  }
  CHECK_FALSE(weights::castable(*support::dtypeFromTorchName("int64"), *support::dtypeFromTorchName("float32")));
}

TEST_CASE("weights: a meta export's tensors are external until bound; its state starts at zeros", "[weights]") {
  // A package made external by hand, as a meta export reads: every tensor
  // without bytes.
  pt2::Package pkg = pt2::readPackage(test::fixture("llama_tiny"));
  for (auto* table : {&pkg.weights, &pkg.constants})
    for (auto& [fqn, t] : *table) weights::unbind(t, fqn);
  CHECK(weights::externalTensors(pkg).size() == pkg.weights.size() + pkg.constants.size());
  try {
    weights::requireBound(pkg, "m.pt2", nullptr);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()),
               Catch::StartsWith("m.pt2: " + std::to_string(pkg.weights.size() + pkg.constants.size()) +
                                 " tensors the program needs have no bytes (it was exported on the meta device) and no "
                                 "--weights source was given: lm_head.weight, model.embed_tokens.weight,"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("give them in a further --weights file"));
  }
  const pt2::StoredTensor& t = pkg.weights.at("lm_head.weight");
  CHECK(t.entry()["tensor_meta"]["device"]["type"] == "meta");
  // Written and read back: 0-byte records whose metadata says meta.
  const std::string path = test::outPath("weights/external.pt2");
  pt2::writePackageFile(pkg, pt2::packageDestination(path, {}, true));
  pt2::Package again = pt2::readPackage(path);
  CHECK(again.metaExport);
  CHECK(again.weights.at("lm_head.weight").external);
  CHECK(again.weights.at("lm_head.weight").data.size() == 0);
  // Zeros for state cost no memory: the kernel's zero page.
  pt2::Blob z = weights::zeroBlob(1 << 20, "zeros");
  CHECK(z.size() == (1u << 20));
  CHECK(z.view().data[12345] == 0);
}
