// The command line as users meet it: exit codes, messages, and nothing written
// when processing fails.
#include <catch2/catch.hpp>

#include "emit/libtorch_version.h"
#include <filesystem>
#include <fstream>
#include <functional>

#include "pt2/program_json.h"
#include "pt2/zip_archive.h"
#include "test_util.h"

using namespace pipecut;
using ir::Json;

namespace {

namespace fs = std::filesystem;

// Copies a fixture's records into a new archive, letting `edit` change or drop
// (return false) each one. The writer adds its own housekeeping records.
std::string mutate(const std::string& name, const std::string& out,
                   const std::function<bool(std::string&, std::string&)>& edit) {
  auto src = pt2::ArchiveReader::open(test::fixture(name));
  std::string path = test::outPath("bad/" + out);
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  pt2::ArchiveWriter w([&](const void* d, size_t n) {
    os.write(static_cast<const char*>(d), static_cast<std::streamsize>(n));
    return n;
  });
  for (const auto& r : src->records()) {
    if (r == ".data/version" || r == ".data/serialization_id" || r == "byteorder") continue;
    std::string record = r, bytes = src->text(r);
    if (edit(record, bytes)) w.add(record, bytes);
  }
  w.finish();
  return path;
}

std::string editModel(const std::string& name, const std::string& out, const std::function<void(Json&)>& edit) {
  return mutate(name, out, [&](std::string& r, std::string& bytes) {
    if (r == "models/model.json") {
      Json j = Json::parse(bytes);
      edit(j);
      bytes = j.dump();
    }
    return true;
  });
}

std::string writeRaw(const std::string& out, const std::string& bytes) {
  std::string path = test::outPath("bad/" + out);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs inspect and normalize on a bad file: both exit 2 with `message`, and
// normalize leaves nothing behind at -o (nor a temporary file).
void expectRejected(const std::string& path, const std::string& message) {
  INFO(path);
  auto r = test::runPipecut("inspect " + path);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains(path) && Catch::Contains(message));
  CHECK_THAT(r.output, !Catch::Contains("terminate") && !Catch::Contains("Segmentation"));
  std::string out = test::outPath("bad/out/normalized.pt2");
  fs::remove(out);
  auto n = test::runPipecut("normalize " + path + " -o " + out);
  CHECK(n.exitCode == 2);
  CHECK_THAT(n.output, Catch::Contains(message));
  CHECK_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    CHECK_FALSE(e.path().filename().string().rfind("normalized.pt2", 0) == 0);
}

}  // namespace

TEST_CASE("bad inputs exit 2 with a precise message and write nothing", "[cli]") {
  std::string mlp = slurp(test::fixture("mlp"));

  expectRejected(writeRaw("empty.pt2", ""), "empty file");
  expectRejected(writeRaw("text.pt2", "this is not a zip file at all\n"), "not a valid .pt2 zip archive");
  expectRejected(writeRaw("truncated.pt2", mlp.substr(0, mlp.size() / 2)), "not a valid .pt2 zip archive");
  expectRejected(test::outPath("bad/does-not-exist.pt2"), "cannot open");

  expectRejected(mutate("mlp", "no_model.pt2", [](std::string& r, std::string&) { return r != "models/model.json"; }),
                 "models/model.json: missing record");
  expectRejected(mutate("mlp", "syntax.pt2",
                        [](std::string& r, std::string& b) {
                          if (r == "models/model.json") b = b.substr(0, 100);
                          return true;
                        }),
                 "models/model.json: JSON syntax error at byte");
  expectRejected(editModel("mlp", "major9.pt2", [](Json& j) { j["schema_version"]["major"] = 9; }),
                 "schema_version.major: unsupported schema major version 9 (pipecut reads major 8)");
  expectRejected(editModel("mlp", "undefined.pt2",
                           [](Json& j) {
                             auto& n = j["graph_module"]["graph"]["nodes"][2];
                             n["inputs"][0]["arg"]["as_tensor"]["name"] = "no_such_value";
                           }),
                 "uses undefined value 'no_such_value'");
  expectRejected(editModel("mlp", "variant.pt2",
                           [](Json& j) {
                             auto& n = j["graph_module"]["graph"]["nodes"][1];
                             n["inputs"][0]["arg"] = Json{{"as_banana", 3}};
                           }),
                 "graph_module.graph.nodes[1]");
  expectRejected(editModel("mlp", "variant2.pt2",
                           [](Json& j) {
                             j["graph_module"]["graph"]["nodes"][1]["inputs"][0]["arg"] = Json{{"as_banana", 3}};
                           }),
                 "unknown Argument variant 'as_banana'");
  expectRejected(mutate("mlp", "short_weight.pt2",
                        [](std::string& r, std::string& b) {
                          if (r == "data/weights/weight_0") b.resize(b.size() - 8);
                          return true;
                        }),
                 "data/weights/weight_0");
  expectRejected(mutate("mlp", "short_weight2.pt2",
                        [](std::string& r, std::string& b) {
                          if (r == "data/weights/weight_0") b.resize(b.size() - 8);
                          return true;
                        }),
                 "bytes but its metadata (float32");
  expectRejected(mutate("mlp", "no_weights_config.pt2",
                        [](std::string& r, std::string&) { return r != "data/weights/model_weights_config.json"; }),
                 "parameter 'layers.0.0.weight' has no entry in the weights payload config");
  expectRejected(mutate("mlp", "pickled_weights.pt2",
                        [](std::string& r, std::string&) {
                          if (r == "data/weights/model_weights_config.json") r = "data/weights/model.pt";
                          return true;
                        }),
                 "data/weights/model.pt: unreadable torch.save pickle");
}

TEST_CASE("a weight record the central directory misdescribes exits 2", "[cli]") {
  const std::string mlp = slurp(test::fixture("mlp"));
  const std::string record = "mlp/data/weights/weight_0";
  // The central directory's entry (its name's last occurrence; the entry's
  // fixed part is the 46 bytes before it) and the record's local header.
  const size_t central = mlp.rfind(record) - 46;
  REQUIRE(mlp.compare(central, 4, std::string("PK\x01\x02", 4)) == 0);
  size_t local = 0;
  for (int i = 3; i >= 0; --i) local = (local << 8) | static_cast<uint8_t>(mlp[central + 42 + static_cast<size_t>(i)]);
  REQUIRE(mlp.compare(local, 4, std::string("PK\x03\x04", 4)) == 0);
  std::string deflated = mlp;  // method 8 (deflate) for a record stored plain
  deflated[central + 10] = 8;
  expectRejected(writeRaw("deflated_weight.pt2", deflated),
                 "data/weights/weight_0: unreadable record: compressed (method 8); a .pt2 stores records uncompressed");
  std::string noHeader = mlp;  // the local header's signature overwritten
  noHeader[local + 2] = 'x';
  expectRejected(writeRaw("no_local_header.pt2", noHeader),
                 "data/weights/weight_0: unreadable record: no local header where the central directory says");
}

TEST_CASE("mistyped fields and inconsistent tensor metadata exit 2 naming the JSON path", "[cli]") {
  auto editConfig = [](const std::string& out, const std::function<void(Json&)>& edit) {
    return mutate("mlp", out, [&](std::string& r, std::string& bytes) {
      if (r == "data/weights/model_weights_config.json") {
        Json j = Json::parse(bytes);
        edit(j["config"]["layers.0.0.weight"]);
        bytes = j.dump();
      }
      return true;
    });
  };
  std::string cfg = "data/weights/model_weights_config.json: config.layers.0.0.weight";
  expectRejected(editConfig("is_param_number.pt2", [](Json& e) { e["is_param"] = 1; }), cfg + ".is_param: expected a bool");
  expectRejected(editConfig("use_pickle_string.pt2", [](Json& e) { e["use_pickle"] = "no"; }),
                 cfg + ".use_pickle: expected a bool");
  expectRejected(editConfig("path_name_number.pt2", [](Json& e) { e["path_name"] = 0; }), cfg + ".path_name: expected a string");
  expectRejected(editConfig("strides_short.pt2", [](Json& e) { e["tensor_meta"]["strides"].erase(1); }),
                 cfg + ".tensor_meta.strides: 1 strides for 2 sizes");
  expectRejected(editConfig("strides_missing.pt2", [](Json& e) { e["tensor_meta"].erase("strides"); }),
                 cfg + ".tensor_meta: missing field 'strides'");
  expectRejected(editConfig("size_negative.pt2", [](Json& e) { e["tensor_meta"]["sizes"][0]["as_int"] = -3; }),
                 cfg + ".tensor_meta.sizes[0]: negative size -3");
  expectRejected(editConfig("stride_negative.pt2", [](Json& e) { e["tensor_meta"]["strides"][0]["as_int"] = -1; }),
                 cfg + ".tensor_meta.strides[0]: negative stride -1");
  expectRejected(editConfig("offset_past_end.pt2", [](Json& e) { e["tensor_meta"]["storage_offset"]["as_int"] = 1000000; }),
                 "bytes but its metadata (float32");
  expectRejected(editConfig("size_huge.pt2",
                            [](Json& e) { e["tensor_meta"]["sizes"][0]["as_int"] = int64_t(1) << 62; }),
                 "span more than 2^64 bytes");
  expectRejected(editConfig("dtype_huge.pt2", [](Json& e) { e["tensor_meta"]["dtype"] = int64_t(1) << 32 | 7; }),
                 cfg + ".tensor_meta.dtype: unknown dtype code 4294967303");
  expectRejected(editConfig("requires_grad_string.pt2", [](Json& e) { e["tensor_meta"]["requires_grad"] = "yes"; }),
                 cfg + ".tensor_meta.requires_grad: expected a bool");

  expectRejected(editModel("mlp", "torch_version_number.pt2", [](Json& j) { j["torch_version"] = 2.11; }),
                 "models/model.json: torch_version: expected a string");
  expectRejected(editModel("mlp", "single_return_number.pt2",
                           [](Json& j) { j["graph_module"]["graph"]["is_single_tensor_return"] = 0; }),
                 "graph_module.graph.is_single_tensor_return: expected a bool");
  expectRejected(editModel("mlp", "value_strides.pt2",
                           [](Json& j) {
                             auto& tv = j["graph_module"]["graph"]["tensor_values"];
                             tv.begin().value()["strides"].push_back(Json{{"as_int", 1}});
                           }),
                 "graph_module.graph.tensor_values.");
  expectRejected(editModel("mlp", "call_signature.pt2",
                           [](Json& j) { j["graph_module"]["module_call_graph"][0]["signature"] = Json{{"in_spec", 3}}; }),
                 "graph_module.module_call_graph[0].signature.in_spec: expected a string");
}

TEST_CASE("the node that uses an undefined value is named", "[cli]") {
  std::string path = editModel("mlp", "undefined_named.pt2", [](Json& j) {
    auto& n = j["graph_module"]["graph"]["nodes"][2];
    n["inputs"][0]["arg"]["as_tensor"]["name"] = "no_such_value";
  });
  Json j = Json::parse(pt2::ArchiveReader::open(test::fixture("mlp"))->text("models/model.json"));
  std::string nodeName = j["graph_module"]["graph"]["nodes"][2]["name"];
  auto r = test::runPipecut("inspect " + path);
  CHECK_THAT(r.output, Catch::Contains("node '" + nodeName + "'"));
}

TEST_CASE("usage errors exit 1, help and version exit 0", "[cli]") {
  CHECK(test::runPipecut("").exitCode == 1);
  CHECK(test::runPipecut("frobnicate x").exitCode == 1);
  CHECK(test::runPipecut("normalize " + test::fixture("mlp")).exitCode == 1);  // no -o
  auto h = test::runPipecut("--help");
  CHECK(h.exitCode == 0);
  CHECK_THAT(h.output, Catch::Contains("inspect") && Catch::Contains("normalize"));
  auto v = test::runPipecut("--version");
  CHECK(v.exitCode == 0);
  // The LibTorch linked, named by CMake's Torch_VERSION and by the headers alike.
  CHECK(v.output == std::string("pipecut ") + PIPECUT_VERSION + " (LibTorch " + PIPECUT_LIBTORCH_VERSION + ")\n");
  CHECK(emit::libtorchVersion() == PIPECUT_LIBTORCH_VERSION);
}

TEST_CASE("inspect shows the tiny Llama's layers, their parameter bytes and the no_grad region", "[cli]") {
  auto r = test::runPipecut("inspect --json " + test::fixture("llama_tiny"));
  REQUIRE(r.exitCode == 0);
  Json j = Json::parse(r.output);
  CHECK(j["schema_version"]["major"] == 8);
  CHECK(j["torch_version"].get<std::string>().rfind("2.11.0", 0) == 0);
  std::map<std::string, Json> modules;
  for (const auto& m : j["modules"]) modules[m["path"]] = m;
  // hidden 64, intermediate 128, 4 heads / 2 kv heads of 16: q 4096 + k 2048 + v 2048 + o 4096
  // + gate/up/down 3 * 8192 + two RMSNorm weights of 64 = 36992 float32 parameters.
  for (int i = 0; i < 4; ++i) {
    std::string path = "model.layers." + std::to_string(i);
    REQUIRE(modules.count(path));
    CHECK(modules[path]["param_bytes"] == 36992 * 4);
    CHECK(modules[path]["type"].get<std::string>().find("LlamaDecoderLayer") != std::string::npos);
  }
  CHECK_FALSE(modules.count("model.layers.4"));
  bool noGrad = false;
  for (const auto& region : j["higher_order_regions"])
    if (region["op"] == "wrap_with_set_grad_enabled" && region["module"] == "model.rotary_emb" &&
        region["args"] == "false" && region["body_nodes"].get<int>() > 0)
      noGrad = true;
  CHECK(noGrad);
  CHECK(j["inputs"][0]["name"] == "input_ids");
  CHECK(j["inputs"][0]["dtype"] == "int64");
  CHECK(j["outputs"][0]["shape"] == "[2, 8, 256]");

  auto text = test::runPipecut("inspect " + test::fixture("llama_tiny"));
  CHECK_THAT(text.output, Catch::Contains("wrap_with_set_grad_enabled(false)") &&
                              Catch::Contains("model.layers.3 LlamaDecoderLayer") &&
                              Catch::Contains("params 147968 B"));
  CHECK(j["symbols"].empty());  // static shapes
}

TEST_CASE("inspect shows each symbol's exported range", "[cli]") {
  auto text = test::runPipecut("inspect " + test::fixture("dynamic_batch"));
  CHECK_THAT(text.output, Catch::Contains("  symbols:\n    s77  [1, 64]\n"));
  auto llama = test::runPipecut("inspect --json " + test::fixture("llama_dynamic"));
  REQUIRE(llama.exitCode == 0);
  Json j = Json::parse(llama.output);
  REQUIRE(j["symbols"].size() == 2);
  for (const auto& [sym, r] : j["symbols"].items()) {
    INFO(sym);
    CHECK(r["min"] == 2);
    CHECK(r["max"].is_null());
  }
}

TEST_CASE("inspect --dot draws one cluster per module", "[cli]") {
  std::string dot = test::outPath("dot/llama.dot");
  auto r = test::runPipecut("inspect " + test::fixture("llama_tiny") + " --dot " + dot);
  REQUIRE(r.exitCode == 0);
  std::string text = slurp(dot);
  CHECK_THAT(text, Catch::StartsWith("// written by pipecut\ndigraph") && Catch::Contains("subgraph cluster_") &&
                       Catch::Contains("label=\"model.layers.0 (LlamaDecoderLayer)\""));
}

TEST_CASE("normalize output is byte-identical across runs and output names", "[cli]") {
  std::string a = test::outPath("norm/a.pt2"), b = test::outPath("norm/b-other-name.pt2");
  REQUIRE(test::runPipecut("normalize " + test::fixture("llama_tiny") + " -o " + a).exitCode == 0);
  REQUIRE(test::runPipecut("normalize " + test::fixture("llama_tiny") + " -o " + b + " --verify-each").exitCode == 0);
  CHECK(slurp(a) == slurp(b));
  for (const auto& name : test::fixtureNames()) {
    INFO(name);
    auto r = test::runPipecut("normalize " + test::fixture(name) + " -o " + test::outPath("normalized/" + name + ".pt2") +
                              " --verify-each");
    CHECK(r.exitCode == 0);
    r = test::runPipecut("normalize " + test::fixture(name) + " -o " +
                         test::outPath("normalized_mc/" + name + ".pt2") + " --module-contiguous --verify-each");
    CHECK(r.exitCode == 0);
  }
}
