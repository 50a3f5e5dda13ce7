// Training checkpoints without torch: checkpoint.json read strictly and
// written deterministically, the safetensors writer, and `pipecut merge`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "driver/merge.h"
#include "manifest/checkpoint.h"
#include "support/error.h"
#include "support/files.h"
#include "support/safetensors.h"
#include "support/sha256.h"
#include "test_util.h"

using namespace pipecut;

namespace {

namespace fs = std::filesystem;
using OrderedJson = nlohmann::ordered_json;

const std::string kHash0(64, 'a'), kHash1 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Checkpoint sampleCheckpoint() {
  Checkpoint c;
  c.step = 12;
  c.sourceSha256 = kHash1;
  c.sourceDirectorySha256 = kHash0;
  c.splitSpec = R"({"split_points":{"model.layers.1":"END"}})";
  c.optimizer = "adamw";
  c.hyper = {{"lr", 0.001}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}};
  c.stages = {{0, "stage_000.safetensors", kHash0, 1024, {"model.embed_tokens.weight", "model.layers.0.w"}},
              {1, "stage_001.safetensors", kHash1, 2048, {"lm_head.weight", "model.norm.weight"}}};
  c.tiedGroups = {{{"lm_head.weight", "model.embed_tokens.weight"}, {0, 1}}};
  return c;
}

// "where: message" of the error checkpointFromJson throws for `j`, or "accepted".
std::string whereOf(const std::string& text) {
  try {
    checkpointFromJson(text, "ck/checkpoint.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK(e.file() == "ck/checkpoint.json");
    return e.where() + ": " + e.message();
  }
  return "accepted";
}

std::string edited(const std::function<void(OrderedJson&)>& edit) {
  OrderedJson j = OrderedJson::parse(checkpointToJson(sampleCheckpoint()));
  edit(j);
  return j.dump();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tensor to put in a hand-made stage file.
struct T {
  std::string key, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

T f32(const std::string& key, std::vector<int64_t> shape, const std::vector<float>& values) {
  std::string b(values.size() * 4, '\0');
  std::memcpy(b.data(), values.data(), b.size());
  return {key, "F32", std::move(shape), b};
}

std::vector<support::SafetensorsTensorRef> refs(const std::vector<T>& ts) {
  std::vector<support::SafetensorsTensorRef> out;
  for (const T& t : ts)
    out.push_back({t.key, t.dtype, t.shape, reinterpret_cast<const uint8_t*>(t.bytes.data()), t.bytes.size()});
  return out;
}

std::string freshDir(const std::string& name) {
  std::string dir = test::outPath("checkpoint/" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Writes DIR/stage_NNN.safetensors (one per entry of `stages`) and a
// checkpoint.json that describes them.
Checkpoint writeCheckpoint(const std::string& dir, const std::vector<std::vector<T>>& stages,
                           const std::vector<TiedGroup>& tied) {
  Checkpoint c;
  c.step = 7;
  c.sourceSha256 = kHash1;
  c.sourceDirectorySha256 = kHash0;
  c.splitSpec = "{}";
  c.optimizer = "sgd";
  c.hyper = {{"lr", 0.5}, {"momentum", 0.9}};
  c.tiedGroups = tied;
  for (size_t i = 0; i < stages.size(); ++i) {
    CheckpointStage s;
    s.index = static_cast<uint32_t>(i);
    s.file = "stage_00" + std::to_string(i) + ".safetensors";
    s.sha256 = support::writeSafetensors(dir + "/" + s.file, refs(stages[i]), {{"stage", std::to_string(i)}});
    s.bytes = fs::file_size(dir + "/" + s.file);
    for (const T& t : stages[i])
      if (t.key.rfind("optimizer/", 0) != 0) s.tensors.push_back(t.key);
    std::sort(s.tensors.begin(), s.tensors.end());
    c.stages.push_back(s);
  }
  std::ofstream(dir + "/checkpoint.json", std::ios::binary | std::ios::trunc) << checkpointToJson(c);
  return c;
}

// Two stages of a small model whose embedding is tied to its head: each stage
// holds the tied weight under the name its own code uses.
std::string tiedCheckpoint(const std::string& name, float headDelta = 0) {
  std::string dir = freshDir(name);
  T embed = f32("embed.weight", {2, 2}, {1, 2, 3, 4});
  T head = f32("lm_head.weight", {2, 2}, {1, 2, 3, 4 + headDelta});
  writeCheckpoint(dir,
                  {{embed, f32("layers.0.w", {3}, {5, 6, 7}), f32("optimizer/layers.0.w/momentum_buffer", {3}, {0, 0, 1}),
                    f32("optimizer/embed.weight/momentum_buffer", {2, 2}, {0, 0, 0, 1})},
                   {head, f32("norm.w", {2}, {8, 9}), f32("optimizer/norm.w/momentum_buffer", {2}, {1, 1})}},
                  {{{"embed.weight", "lm_head.weight", "output.weight"}, {0, 1}}});
  return dir;
}

std::string mergeError(const driver::MergeRequest& r, Error* out = nullptr) {
  try {
    driver::mergeCheckpoint(r);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    if (out) *out = e;
    return e.what();
  }
  return "merged";
}

// A temporary of `out` left beside it (support/staging.h names them OUT.tmp.<pid>).
bool hasLitter(const std::string& out) {
  std::string prefix = fs::path(out).filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

TEST_CASE("checkpoint json: to, from and to again give identical bytes", "[checkpoint]") {
  Checkpoint c = sampleCheckpoint();
  std::string text = checkpointToJson(c);
  Checkpoint back = checkpointFromJson(text, "x.json");
  CHECK(checkpointToJson(back) == text);
  CHECK(back.format == kCheckpointFormat);
  CHECK(back.step == 12);
  CHECK(back.sourceSha256 == kHash1);
  CHECK(back.sourceDirectorySha256 == kHash0);
  {
    // Written before splits recorded the directory hash: still read.
    OrderedJson old = OrderedJson::parse(text);
    old.erase("source_directory_sha256");
    CHECK(checkpointFromJson(old.dump(), "checkpoint.json").sourceDirectorySha256.empty());
  }
  CHECK(back.splitSpec == c.splitSpec);
  CHECK(back.optimizer == "adamw");
  CHECK(back.hyper == c.hyper);
  REQUIRE(back.stages.size() == 2);
  CHECK(back.stages[1].index == 1);
  CHECK(back.stages[1].file == "stage_001.safetensors");
  CHECK(back.stages[1].sha256 == kHash1);
  CHECK(back.stages[1].bytes == 2048);
  CHECK(back.stages[0].tensors == c.stages[0].tensors);
  REQUIRE(back.tiedGroups.size() == 1);
  CHECK(back.tiedGroups[0].names == c.tiedGroups[0].names);
  CHECK(back.tiedGroups[0].stages == std::vector<uint32_t>{0, 1});
  // The fixed field order, format first.
  size_t last = 0;
  for (const char* k : {"\"format\"", "\"step\"", "\"source_sha256\"", "\"source_directory_sha256\"", "\"split_spec\"", "\"optimizer\"", "\"hyper\"",
                        "\"stages\"", "\"tied_groups\""}) {
    size_t at = text.find(k);
    CHECK(at != std::string::npos);
    CHECK(at >= last);
    last = at;
  }
  CHECK(text.rfind("{\n  \"format\": \"pipecut-checkpoint-1\",", 0) == 0);
  CHECK(text.back() == '\n');
  // Hyperparameters round-trip exactly (shortest round-trip decimal form).
  c.hyper = {{"lr", 0.1 + 0.2}, {"eps", 1e-300}};
  CHECK(checkpointFromJson(checkpointToJson(c), "x.json").hyper == c.hyper);
}

TEST_CASE("checkpoint json: malformed fields are refused naming the file and field path", "[checkpoint]") {
  CHECK(whereOf(edited([](OrderedJson&) {})) == "accepted");
  CHECK_THAT(whereOf("{\"format\": "), Catch::StartsWith(": JSON syntax error at byte"));
  CHECK(whereOf("[]") == ": a checkpoint must be a JSON object");
  CHECK(whereOf(edited([](OrderedJson& j) { j["format"] = "pipecut-checkpoint-2"; })) ==
        "format: 'pipecut-checkpoint-2' is not a format this pipecut reads (pipecut-checkpoint-1)");
  CHECK(whereOf(edited([](OrderedJson& j) { j.erase("format"); })) == "format: missing");
  CHECK(whereOf(edited([](OrderedJson& j) { j["extra"] = 1; })) == "extra: unknown field");
  CHECK(whereOf(edited([](OrderedJson& j) { j.erase("step"); })) == "step: missing");
  CHECK(whereOf(edited([](OrderedJson& j) { j["step"] = "12"; })) == "step: expected an integer >= 0");
  CHECK(whereOf(edited([](OrderedJson& j) { j["step"] = -1; })) == "step: expected an integer >= 0");
  CHECK(whereOf(edited([](OrderedJson& j) { j["step"] = 1.5; })) == "step: expected an integer >= 0");
  CHECK(whereOf(edited([](OrderedJson& j) { j["source_sha256"] = "ABC"; })) ==
        "source_sha256: expected 64 lowercase hex digits (or empty)");
  CHECK(whereOf(edited([](OrderedJson& j) { j["source_directory_sha256"] = "abc"; })) ==
        "source_directory_sha256: expected 64 lowercase hex digits (or empty)");
  CHECK(whereOf(edited([](OrderedJson& j) { j["split_spec"] = OrderedJson::object(); })) ==
        "split_spec: expected a string");
  CHECK(whereOf(edited([](OrderedJson& j) { j.erase("optimizer"); })) == "optimizer: missing");
  CHECK(whereOf(edited([](OrderedJson& j) { j["optimizer"] = ""; })) ==
        "optimizer: empty (expected the optimizer's name: sgd, adamw)");
  CHECK(whereOf(edited([](OrderedJson& j) { j["hyper"] = OrderedJson::array(); })) == "hyper: expected an object");
  CHECK(whereOf(edited([](OrderedJson& j) { j["hyper"]["lr"] = "fast"; })) == "hyper.lr: expected a number");
  CHECK(whereOf(edited([](OrderedJson& j) { j["hyper"]["lr"] = nullptr; })) == "hyper.lr: expected a number");
  CHECK(whereOf(edited([](OrderedJson& j) { j.erase("stages"); })) == "stages: missing");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"] = OrderedJson::object(); })) == "stages: expected a list");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"] = OrderedJson::array(); })) == "stages: no stages");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1] = 3; })) ==
        "stages[1]: expected an object {index, file, sha256, bytes, tensors}");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["idx"] = 1; })) == "stages[1].idx: unknown field");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["index"] = 0; })) == "stages[1].index: 0, expected 1");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["index"] = 2; })) == "stages[1].index: 2, expected 1");
  CHECK(whereOf(edited([](OrderedJson& j) { std::swap(j["stages"][0], j["stages"][1]); })) ==
        "stages[0].index: 1, expected 0");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["index"] = 1ull << 40; })) ==
        "stages[1].index: 1099511627776 is out of range (at most 4294967295)");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1].erase("file"); })) == "stages[1].file: missing");
  for (const char* bad : {"/etc/passwd", "../stage_001.safetensors", "sub/../../x", "a/./b", "", "a//b", "dir/",
                          "checkpoint.json", ".."})
    CHECK(whereOf(edited([&](OrderedJson& j) { j["stages"][1]["file"] = bad; })) ==
          "stages[1].file: '" + std::string(bad) + "' is not a path inside the checkpoint directory");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["file"] = "sub/stage_001.safetensors"; })) == "accepted");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["file"] = "a..b"; })) == "accepted");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["file"] = "stage_000.safetensors"; })) ==
        "stages[1].file: 'stage_000.safetensors' is listed twice");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["sha256"] = std::string(64, 'A'); })) ==
        "stages[1].sha256: expected 64 lowercase hex digits");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["sha256"] = std::string(63, 'a'); })) ==
        "stages[1].sha256: expected 64 lowercase hex digits");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["sha256"] = std::string(63, 'a') + "g"; })) ==
        "stages[1].sha256: expected 64 lowercase hex digits");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][1]["sha256"] = 5; })) == "stages[1].sha256: expected a string");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][0]["bytes"] = -1; })) ==
        "stages[0].bytes: expected an integer >= 0");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][0]["tensors"] = "w"; })) == "stages[0].tensors: expected a list");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][0]["tensors"][1] = 3; })) ==
        "stages[0].tensors[1]: expected a tensor name");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][0]["tensors"][1] = "optimizer/w/step"; })) ==
        "stages[0].tensors[1]: 'optimizer/w/step' is not a tensor FQN (non-empty, no '/')");
  CHECK(whereOf(edited([](OrderedJson& j) { j["stages"][0]["tensors"][1] = "model.embed_tokens.weight"; })) ==
        "stages[0].tensors[1]: 'model.embed_tokens.weight' is listed twice");
  CHECK(whereOf(edited([](OrderedJson& j) { j.erase("tied_groups"); })) == "tied_groups: missing");
  CHECK(whereOf(edited([](OrderedJson& j) { j["tied_groups"][0] = "x"; })) ==
        "tied_groups[0]: expected an object {names, stages}");
  CHECK(whereOf(edited([](OrderedJson& j) { j["tied_groups"][0]["names"] = OrderedJson::array(); })) ==
        "tied_groups[0].names: no names");
  CHECK(whereOf(edited([](OrderedJson& j) { j["tied_groups"][0]["names"][1] = 1; })) ==
        "tied_groups[0].names[1]: expected a tensor name");
  CHECK(whereOf(edited([](OrderedJson& j) { j["tied_groups"][0]["stages"][1] = 2; })) ==
        "tied_groups[0].stages[1]: expected a stage index below 2");
  CHECK(whereOf(edited([](OrderedJson& j) { j["tied_groups"][0].erase("stages"); })) == "tied_groups[0].stages: missing");
}

TEST_CASE("checkpoint json: readCheckpoint names the directory or the file", "[checkpoint]") {
  std::string missing = test::outPath("checkpoint/does_not_exist");
  fs::remove_all(missing);
  CHECK_THROWS_WITH(readCheckpoint(missing), missing + ": no such checkpoint directory");
  std::string dir = freshDir("read_empty");
  CHECK_THROWS_WITH(readCheckpoint(dir), Catch::StartsWith(dir + "/checkpoint.json: cannot open the checkpoint"));
  std::ofstream(dir + "/checkpoint.json") << checkpointToJson(sampleCheckpoint());
  CHECK(readCheckpoint(dir + "/").step == 12);
  std::ofstream(dir + "/checkpoint.json") << "{";
  CHECK_THROWS_WITH(readCheckpoint(dir), Catch::StartsWith(dir + "/checkpoint.json: JSON syntax error"));
}

TEST_CASE("safetensors writer: the parser reads back dtype, shape, bytes and metadata", "[checkpoint]") {
  std::string dir = freshDir("writer");
  std::vector<T> ts = {f32("b.weight", {2, 3}, {1, 2, 3, 4, 5, 6}),
                       {"a.bias", "BF16", {4}, std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8)},
                       {"c.step", "I64", {}, std::string("\x2a\0\0\0\0\0\0\0", 8)},
                       {"d.mask", "BOOL", {0, 5}, ""}};
  std::string path = dir + "/w.safetensors";
  std::string sha = support::writeSafetensors(path, refs(ts), {{"format", "test"}, {"step", "3"}});
  std::string bytes = slurp(path);
  CHECK(sha == sha256Bytes(bytes.data(), bytes.size()));
  auto f = support::parseSafetensors(bytes);
  CHECK(f.dataOffset % 8 == 0);
  CHECK(f.metadata == std::map<std::string, std::string>{{"format", "test"}, {"step", "3"}});
  REQUIRE(f.tensors.size() == 4);
  std::vector<std::string> keys;
  for (const auto& e : f.tensors) keys.push_back(e.key);
  CHECK(keys == std::vector<std::string>{"a.bias", "b.weight", "c.step", "d.mask"});
  for (const T& t : ts) {
    const support::SafetensorsEntry* e = nullptr;
    for (const auto& x : f.tensors)
      if (x.key == t.key) e = &x;
    REQUIRE(e);
    CHECK(e->dtype == t.dtype);
    CHECK(e->shape == t.shape);
    CHECK(bytes.substr(f.dataOffset + e->begin, e->end - e->begin) == t.bytes);
  }
  // Data in key order, back to back, right after the padded header.
  CHECK(f.tensors[0].begin == 0);
  CHECK(f.tensors[1].begin == 8);
  CHECK(f.tensors[3].end == bytes.size() - f.dataOffset);
  std::string header = bytes.substr(8, f.dataOffset - 8);
  CHECK(header[header.find_last_not_of(' ')] == '}');
  CHECK(header.size() - header.find_last_not_of(' ') - 1 < 8);

  // No metadata: no "__metadata__" entry.
  support::writeSafetensors(path, refs({ts[0]}), {});
  CHECK(slurp(path).find("__metadata__") == std::string::npos);
  CHECK(support::parseSafetensors(slurp(path)).metadata.empty());

  // Caller mistakes are internal errors naming the key.
  T wrong = f32("x", {3}, {1, 2});
  CHECK_THROWS_WITH(support::writeSafetensors(path, refs({wrong}), {}), Catch::Contains("x: 8 bytes given; dtype and shape need 12"));
  CHECK_THROWS_WITH(support::writeSafetensors(path, refs({ts[0], ts[0]}), {}), Catch::Contains("b.weight: key given twice"));
  T odd{"y", "F8", {1}, "a"};
  CHECK_THROWS_WITH(support::writeSafetensors(path, refs({odd}), {}), Catch::Contains("y.dtype: unsupported dtype 'F8'"));
}

TEST_CASE("safetensors writer: the same tensors give the same bytes, whatever their order", "[checkpoint]") {
  std::string dir = freshDir("writer_determinism");
  std::vector<T> ts = {f32("z", {1}, {1}), f32("a", {2}, {2, 3}), f32("m.n", {1, 1}, {4})};
  std::string s1 = support::writeSafetensors(dir + "/1.safetensors", refs(ts), {{"k", "v"}});
  std::reverse(ts.begin(), ts.end());
  std::string s2 = support::writeSafetensors(dir + "/2.safetensors", refs(ts), {{"k", "v"}});
  CHECK(s1 == s2);
  CHECK(slurp(dir + "/1.safetensors") == slurp(dir + "/2.safetensors"));
}

TEST_CASE("merge: tied copies are checked and written under every name; optimizer state is left out", "[checkpoint]") {
  std::string dir = tiedCheckpoint("merge_ok");
  std::string out = test::outPath("checkpoint/merge_ok.safetensors");
  fs::remove(out);
  driver::MergeRequest r{dir, out};
  driver::MergeResult m = driver::mergeCheckpoint(r);
  CHECK(m.tensors == 5);
  CHECK(m.stages == 2);
  CHECK(m.step == 7);
  std::string bytes = slurp(out);
  CHECK(m.bytes == bytes.size());
  CHECK(m.sha256 == sha256Bytes(bytes.data(), bytes.size()));
  auto f = support::parseSafetensors(bytes);
  std::vector<std::string> keys;
  for (const auto& e : f.tensors) keys.push_back(e.key);
  CHECK(keys == std::vector<std::string>{"embed.weight", "layers.0.w", "lm_head.weight", "norm.w", "output.weight"});
  CHECK(f.metadata ==
        std::map<std::string, std::string>{{"format", "pipecut-merge-1"}, {"step", "7"}, {"source_sha256", kHash1}, {"source_directory_sha256", kHash0}});
  auto tensor = [&](const std::string& key) {
    for (const auto& e : f.tensors)
      if (e.key == key) return bytes.substr(f.dataOffset + e.begin, e.end - e.begin);
    return std::string("missing");
  };
  std::string expect = f32("", {}, {1, 2, 3, 4}).bytes;
  CHECK(tensor("embed.weight") == expect);
  CHECK(tensor("lm_head.weight") == expect);
  CHECK(tensor("output.weight") == expect);
  CHECK(tensor("norm.w") == f32("", {}, {8, 9}).bytes);
  CHECK(f.tensors[4].shape == std::vector<int64_t>{2, 2});
  // Deterministic: merging again gives the same bytes.
  driver::mergeCheckpoint(r);
  CHECK(slurp(out) == bytes);
  CHECK_FALSE(hasLitter(out));
}

TEST_CASE("merge: the same FQN held twice must be bitwise equal", "[checkpoint]") {
  std::string dir = freshDir("merge_same_fqn");
  T w = f32("shared.w", {2}, {1, 2});
  writeCheckpoint(dir, {{w, f32("a", {1}, {0})}, {w, f32("b", {1}, {0})}}, {{{"shared.w"}, {0, 1}}});
  std::string out = test::outPath("checkpoint/merge_same_fqn.safetensors");
  CHECK(driver::mergeCheckpoint({dir, out}).tensors == 3);

  T w2 = f32("shared.w", {2}, {1, 2.5f});
  writeCheckpoint(dir, {{w, f32("a", {1}, {0})}, {w2, f32("b", {1}, {0})}}, {{{"shared.w"}, {0, 1}}});
  Error e(ErrorKind::Internal, "", "", "");
  CHECK(mergeError({dir, out}, &e) ==
        dir + ": tensor 'shared.w': tied copies differ between stage 0 and stage 1 (their bytes differ)");
  CHECK(e.where() == "tensor 'shared.w'");
  T w3 = f32("shared.w", {1, 2}, {1, 2});
  writeCheckpoint(dir, {{w, f32("a", {1}, {0})}, {w3, f32("b", {1}, {0})}}, {});
  CHECK_THAT(mergeError({dir, out}), Catch::EndsWith("(F32[2] against F32[1, 2])"));
}

TEST_CASE("merge: differing tied copies and corrupt stage files are refused, the output kept", "[checkpoint]") {
  std::string out = test::outPath("checkpoint/merge_refused.safetensors");
  fs::remove(out);
  driver::mergeCheckpoint({tiedCheckpoint("merge_refused_good"), out});
  const std::string before = slurp(out);
  REQUIRE(!before.empty());

  SECTION("a tied copy that differs names both FQNs and stages") {
    std::string dir = tiedCheckpoint("merge_refused_tied", 0.5f);
    CHECK(mergeError({dir, out}) == dir + ": tensor 'lm_head.weight': tied to 'embed.weight' (" + dir +
                                        "/checkpoint.json tied_groups[0]) but stage 1's copy differs from stage 0's "
                                        "(their bytes differ)");
  }
  SECTION("a stage file changed after the checkpoint was written") {
    std::string dir = tiedCheckpoint("merge_refused_hash");
    std::string stage = dir + "/stage_001.safetensors";
    std::string bytes = slurp(stage);
    bytes.back() ^= 1;
    std::ofstream(stage, std::ios::binary | std::ios::trunc) << bytes;
    Error e(ErrorKind::Internal, "", "", "");
    CHECK_THAT(mergeError({dir, out}, &e), Catch::Contains("(the file changed after the checkpoint was written)"));
    CHECK(e.file() == stage);
    CHECK(e.where() == "stages[1].sha256");
  }
  SECTION("a stage file of the wrong size") {
    std::string dir = tiedCheckpoint("merge_refused_size");
    std::ofstream(dir + "/stage_000.safetensors", std::ios::binary | std::ios::app) << "x";
    Error e(ErrorKind::Internal, "", "", "");
    CHECK_THAT(mergeError({dir, out}, &e), Catch::EndsWith("bytes; checkpoint.json says " +
                                                           std::to_string(fs::file_size(dir + "/stage_000.safetensors") - 1)));
    CHECK(e.file() == dir + "/stage_000.safetensors");
    CHECK(e.where() == "stages[0].bytes");
  }
  SECTION("a missing stage file") {
    std::string dir = tiedCheckpoint("merge_refused_missing");
    fs::remove(dir + "/stage_001.safetensors");
    CHECK(mergeError({dir, out}) ==
          dir + "/stage_001.safetensors: stages[1].file: cannot open the stage file: No such file or directory");
  }
  SECTION("a stage file that is not safetensors") {
    std::string dir = freshDir("merge_refused_garbage");
    Checkpoint c = writeCheckpoint(dir, {{f32("a", {1}, {0})}}, {});
    std::ofstream(dir + "/stage_000.safetensors", std::ios::binary | std::ios::trunc) << "garbage";
    c.stages[0].bytes = 7;
    c.stages[0].sha256 = sha256Bytes("garbage", 7);
    std::ofstream(dir + "/checkpoint.json", std::ios::binary | std::ios::trunc) << checkpointToJson(c);
    CHECK_THAT(mergeError({dir, out}), Catch::StartsWith(dir + "/stage_000.safetensors: too short"));
  }
  SECTION("model tensors the checkpoint does not list, or lists but the file lacks") {
    std::string dir = freshDir("merge_refused_listed");
    Checkpoint c = writeCheckpoint(dir, {{f32("a", {1}, {0}), f32("b", {1}, {0})}}, {});
    c.stages[0].tensors = {"a"};
    std::ofstream(dir + "/checkpoint.json", std::ios::binary | std::ios::trunc) << checkpointToJson(c);
    CHECK(mergeError({dir, out}) == dir + "/stage_000.safetensors: b: a model tensor that stages[0].tensors in " + dir +
                                        "/checkpoint.json does not list");
    c.stages[0].tensors = {"a", "b", "c"};
    std::ofstream(dir + "/checkpoint.json", std::ios::binary | std::ios::trunc) << checkpointToJson(c);
    CHECK(mergeError({dir, out}) == dir + "/stage_000.safetensors: stages[0].tensors: 'c' is listed in " + dir +
                                        "/checkpoint.json but the file does not hold it");
  }
  SECTION("a tied group none of whose names is held") {
    std::string dir = freshDir("merge_refused_group");
    writeCheckpoint(dir, {{f32("a", {1}, {0})}}, {{{"x", "y"}, {0}}});
    CHECK(mergeError({dir, out}) == dir + "/checkpoint.json: tied_groups[0]: no stage file holds any of its names");
  }
  // Refused: the previous output untouched, no temporary left behind.
  CHECK(slurp(out) == before);
  CHECK_FALSE(hasLitter(out));
}

TEST_CASE("merge: a new output replaces the old one whole", "[checkpoint]") {
  std::string out = test::outPath("checkpoint/merge_replace.safetensors");
  fs::remove(out);
  std::string first = freshDir("merge_replace_first");
  writeCheckpoint(first, {{f32("first", {2}, {1, 2})}}, {});
  driver::mergeCheckpoint({first, out});
  std::string dir = freshDir("merge_replace");
  writeCheckpoint(dir, {{f32("only", {1}, {3})}}, {});
  driver::mergeCheckpoint({dir, out});
  auto f = support::parseSafetensors(slurp(out));
  REQUIRE(f.tensors.size() == 1);
  CHECK(f.tensors[0].key == "only");
  CHECK_FALSE(hasLitter(out));
}

TEST_CASE("merge: a file pipecut did not write is replaced only with force", "[checkpoint]") {
  std::string out = test::outPath("checkpoint/merge_foreign.safetensors");
  std::ofstream(out, std::ios::binary | std::ios::trunc) << "previous contents";
  std::string dir = freshDir("merge_foreign");
  writeCheckpoint(dir, {{f32("only", {1}, {3})}}, {});
  CHECK(mergeError({dir, out}) == out + ": is a file pipecut did not write (no safetensors metadata format "
                                        "'pipecut-merge-1'); pipecut replaces only its own merged state dict "
                                        "(--force replaces it anyway)");
  CHECK(slurp(out) == "previous contents");
  driver::MergeRequest forced{dir, out};
  forced.force = true;
  driver::mergeCheckpoint(forced);
  CHECK(support::parseSafetensors(slurp(out)).tensors.size() == 1);
  CHECK_FALSE(hasLitter(out));
}

TEST_CASE("pipecut merge: exit codes and messages", "[checkpoint]") {
  std::string missing = test::outPath("checkpoint/cli_missing");
  fs::remove_all(missing);
  std::string out = test::outPath("checkpoint/cli.safetensors");
  fs::remove(out);
  auto r = test::runPipecut("merge " + missing + " -o " + out);
  CHECK(r.exitCode == 2);
  CHECK(r.output == "pipecut: error: " + missing + ": no such checkpoint directory\n");
  CHECK_FALSE(fs::exists(out));

  r = test::runPipecut("merge " + missing);
  CHECK(r.exitCode == 1);
  CHECK_THAT(r.output, Catch::Contains("--output is required"));

  std::string dir = tiedCheckpoint("cli_ok");
  r = test::runPipecut("merge " + dir + " -o " + out);
  CHECK(r.exitCode == 0);
  CHECK(r.output == "merged 5 tensors from 2 stages into " + out + " (" + std::to_string(fs::file_size(out)) + " bytes)\n");
  r = test::runPipecut("merge " + dir + " -o " + out + " --quiet");
  CHECK(r.exitCode == 0);
  CHECK(r.output.empty());

  std::ofstream(dir + "/checkpoint.json", std::ios::binary | std::ios::trunc) << "{\"format\": 1}";
  r = test::runPipecut("merge " + dir + " -o " + out);
  CHECK(r.exitCode == 2);
  CHECK(r.output == "pipecut: error: " + dir + "/checkpoint.json: format: expected a string\n");

  dir = tiedCheckpoint("cli_corrupt");
  std::ofstream(dir + "/stage_000.safetensors", std::ios::binary | std::ios::app) << "x";
  r = test::runPipecut("merge " + dir + " -o " + out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::StartsWith("pipecut: error: " + dir + "/stage_000.safetensors: stages[0].bytes: "));
}
