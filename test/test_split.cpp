// `pipecut split` over the fixture zoo: the stages chain back to the reference
// outputs, boundaries are routed producer -> consumer, tied weights are
// reported, bad specs are refused, output is byte-identical across runs.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "driver/compile.h"
#include "driver/split.h"
#include "manifest/manifest.h"
#include "pt2/package.h"
#include "support/files.h"
#include "support/sha256.h"
#include "support/zip_directory.h"
#include "runtime/chain.h"
#include "test_util.h"

using namespace pipecut;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> specNames() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(test::sourcePath("testdata/specs")))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string modelOf(const std::string& spec) { return spec.substr(0, spec.rfind('.')); }

std::string splitDir(const std::string& spec) { return test::outPath("splits/" + spec); }

std::string specPath(const std::string& spec) { return test::sourcePath("testdata/specs/" + spec + ".json"); }

std::string writeSpec(const std::string& name, const std::string& json) {
  std::string p = test::outPath("badspecs/" + name + ".json");
  std::ofstream(p) << json;
  return p;
}

Manifest split(const std::string& spec, const std::string& extra = "") {
  auto r = test::runPipecut("split " + test::fixture(modelOf(spec)) + " --spec " + specPath(spec) + " -o " +
                            splitDir(spec) + " --verify-each " + extra);
  INFO(r.output);
  REQUIRE(r.exitCode == 0);
  return readManifest(splitDir(spec));
}

// The unsplit program as a one-stage split (`{}`), written once per model and
// test process: the bitwise oracle for every split of that model, computed by
// the same LibTorch on this machine (the committed references come from
// another machine, so they are only ever compared within a tolerance).
std::string wholeDir(const std::string& model) {
  static std::set<std::string> done;
  std::string dir = test::outPath("splits/" + model + ".whole");
  if (done.insert(model).second) {
    std::string spec = test::outPath("badspecs/whole.json");
    std::ofstream(spec) << R"({"split_points": {}})";
    auto r = test::runPipecut("split " + test::fixture(model) + " --spec " + spec + " -o " + dir);
    INFO(r.output);
    REQUIRE(r.exitCode == 0);
  }
  return dir;
}

std::string reference(const std::string& model) {
  return test::sourcePath("testdata/models/" + model + ".ref.safetensors");
}

// A split's chain: within tolerance of the reference, bitwise equal to the unsplit program.
void checkSplitChain(const std::string& dir, const std::string& model) {
  runtime::ChainOptions o;
  o.wholeDir = wholeDir(model);
  auto report = runtime::checkChain(dir, reference(model), o);
  INFO(dir << ": " << report.message);
  CHECK(report.ok);
  REQUIRE(report.matchesWhole.has_value());
  CHECK(*report.matchesWhole);
}

std::map<std::string, std::string> hashes(const std::string& dir) {
  std::map<std::string, std::string> h;
  for (const auto& e : fs::directory_iterator(dir)) h[e.path().filename().string()] = sha256File(e.path().string());
  return h;
}

}  // namespace

TEST_CASE("every fixture split into 2 and 4 stages chains to the reference outputs", "[split]") {
  auto specs = specNames();
  REQUIRE(specs.size() >= 19);
  for (const auto& spec : specs) {
    INFO(spec);
    Manifest m = split(spec);
    size_t want = spec.back() == '4' ? 4 : 2;
    CHECK(m.stages.size() == want);
    checkSplitChain(splitDir(spec), modelOf(spec));
    auto v = test::runPipecut("verify " + splitDir(spec));
    CHECK(v.exitCode == 0);
    // The same split for NativeRT (run_pipeline and run_distributed run its
    // .pt2 stages): no_grad and disabled-autocast regions inlined.
    auto r = test::runPipecut("split " + test::fixture(modelOf(spec)) + " --spec " + specPath(spec) + " -o " +
                              splitDir(spec) + ".inlined --inline-grad-regions -q");
    INFO(r.output);
    CHECK(r.exitCode == 0);
  }
}

TEST_CASE("the seed report's model splits at layers.0 END with its no_grad region intact", "[split]") {
  Manifest m = split("nograd_seed.2");
  REQUIRE(m.stages.size() == 2);
  CHECK(std::find(m.stages[0].modules.begin(), m.stages[0].modules.end(), "layers.0") != m.stages[0].modules.end());
  checkSplitChain(splitDir("nograd_seed.2"), "nograd_seed");
}

TEST_CASE("split --inline-grad-regions: .pt2 stages without no_grad regions and .pt stages unchanged", "[split]") {
  std::string out = test::outPath("splits/llama_tiny.4.inlined");  // run by run_pipeline with --stage-format pt2
  auto r = test::runPipecut("split " + test::fixture("llama_tiny") + " --spec " + specPath("llama_tiny.4") + " -o " + out +
                            " --inline-grad-regions -q");
  REQUIRE(r.exitCode == 0);
  Manifest m = readManifest(out);
  auto countRegions = [&](const ir::Graph& g) {
    size_t n = 0;
    for (const auto& node : g.nodes) n += node->target == "torch.ops.higher_order.wrap_with_set_grad_enabled";
    return n;
  };
  for (const auto& st : m.stages)
    for (const auto& f : st.files) {
      CHECK(f.gradRegionsInlined == (f.format == "pt2"));
      if (f.format != "pt2") continue;
      pt2::Package pkg = pt2::readPackage(out + "/" + f.path);
      CHECK(countRegions(pkg.program.graph) == 0);
    }
  // Without the option stage 0 holds the region (Llama's rotary embedding),
  // and the TorchScript stages are the same either way, byte for byte.
  std::string plain = test::outPath("splits/llama_tiny.4.notinlined");
  REQUIRE(test::runPipecut("split " + test::fixture("llama_tiny") + " --spec " + specPath("llama_tiny.4") + " -o " + plain +
                           " -q").exitCode == 0);
  CHECK(countRegions(pt2::readPackage(plain + "/stage_000.pt2").program.graph) >= 1);
  for (const auto& st : m.stages)
    for (const auto& f : st.files)
      if (f.format == "torchscript")
        CHECK(support::readFile(out + "/" + f.path, "stage") == support::readFile(plain + "/" + f.path, "stage"));
}

TEST_CASE("tied GPT-2: the tied group is listed and both stages hold the weight", "[split]") {
  Manifest m = split("gpt2_tied.4");
  REQUIRE_FALSE(m.tiedGroups.empty());
  const TiedGroup& g = m.tiedGroups[0];
  CHECK(std::find(g.names.begin(), g.names.end(), "lm_head.weight") != g.names.end());
  CHECK(std::find(g.names.begin(), g.names.end(), "transformer.wte.weight") != g.names.end());
  CHECK(g.stages == std::vector<uint32_t>{0, 3});
  for (uint32_t s : {0u, 3u}) {
    bool holds = false;
    for (const auto& p : m.stages[s].parameters) holds |= p.name == "lm_head.weight" && p.bytes == 256 * 32 * 4;
    CHECK(holds);
  }
}

TEST_CASE("a skip connection spanning three stages goes producer to consumer directly", "[split]") {
  Manifest m = split("skip.4");
  REQUIRE(m.stages.size() == 4);
  // Stage 3 reads layer 0's output straight from stage 0.
  bool direct = false;
  for (const auto& in : m.stages[3].inputs)
    direct |= in.source.kind == ValueSource::Kind::StageOutput && in.source.stage == 0;
  CHECK(direct);
  // Stages 1 and 2 neither receive nor relay it.
  REQUIRE(m.stages[2].inputs.size() == 1);
  CHECK(m.stages[2].inputs[0].source.stage == 1);
  CHECK(m.stages[1].outputs.size() == 1);
  CHECK(m.stages[2].outputs.size() == 1);
  const auto& out0 = m.stages[0].outputs;
  bool toThree = false;
  for (const auto& o : out0)
    for (const auto& c : o.consumers) toThree |= c.kind == Consumer::Kind::StageInput && c.stage == 3;
  CHECK(toThree);
}

TEST_CASE("user inputs go straight to the stages that need them", "[split]") {
  Manifest m = split("multi_io.4");
  std::set<uint32_t> direct;
  for (const auto& st : m.stages)
    for (const auto& in : st.inputs)
      if (in.source.kind == ValueSource::Kind::UserInput && st.index > 0) direct.insert(in.source.userInput);
  CHECK_FALSE(direct.empty());
}

TEST_CASE("the Llama's rotary tables are recomputed per stage, or sent directly with --no-recompute", "[split]") {
  Manifest m = split("llama_tiny.4");
  for (uint32_t s = 1; s < 4; ++s) {
    CHECK(m.stages[s].inputs.size() == 1);  // just the hidden state
    CHECK_FALSE(m.stages[s].recomputed.empty());
  }
  auto r = test::runPipecut("split " + test::fixture("llama_tiny") + " --spec " + specPath("llama_tiny.4") + " -o " +
                            test::outPath("splits/llama_norecompute") + " --no-recompute");
  REQUIRE(r.exitCode == 0);
  Manifest n = readManifest(test::outPath("splits/llama_norecompute"));
  for (uint32_t s = 2; s < 4; ++s) {
    size_t fromStage0 = 0;
    for (const auto& in : n.stages[s].inputs)
      fromStage0 += in.source.kind == ValueSource::Kind::StageOutput && in.source.stage == 0;
    CHECK(fromStage0 >= 2);  // cos and sin, not relayed through stage 1
  }
  checkSplitChain(test::outPath("splits/llama_norecompute"), "llama_tiny");
}

TEST_CASE("split_after_nodes cuts after the named node", "[split]") {
  std::string spec = writeSpec("after_node", R"({"split_after_nodes": ["relu_1"]})");
  std::string out = test::outPath("splits/after_node");
  auto r = test::runPipecut("split " + test::fixture("mlp") + " --spec " + spec + " -o " + out);
  REQUIRE(r.exitCode == 0);
  Manifest m = readManifest(out);
  REQUIRE(m.stages.size() == 2);
  CHECK(m.stages[1].inputs.at(0).name == "relu_1");
  checkSplitChain(out, "mlp");
}

TEST_CASE("two runs give byte-identical directories", "[split]") {
  std::string a = test::outPath("det/a"), b = test::outPath("det/b");
  for (const auto& dir : {a, b}) {
    auto r = test::runPipecut("split " + test::fixture("llama_tiny") + " --spec " + specPath("llama_tiny.4") + " -o " + dir);
    REQUIRE(r.exitCode == 0);
  }
  auto ha = hashes(a), hb = hashes(b);
  CHECK(ha.size() == 10);
  CHECK(ha == hb);
}

TEST_CASE("bad specs exit 2 with a clear message and change nothing at -o", "[split]") {
  std::string out = test::outPath("splits/guarded");
  REQUIRE(test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + out).exitCode == 0);
  auto before = hashes(out);
  struct Case {
    std::string model, spec, message;
  };
  std::vector<Case> cases = {
      {"llama_tiny", R"({"split_points": {"model.layer.1": "END"}})",
       "unknown module 'model.layer.1'; closest: 'model.layers.1'"},
      {"mlp", R"({"split_points": {"layers.0": "BEGINNING"}})", "'layers.0' BEGINNING leaves the first stage empty"},
      {"mlp", R"({"stages": [["layers.0", "layers.1"], ["layers.1", "head"]]})",
       "overlapping stage lists: 'layers.1' is listed in stage 0 and stage 1"},
      {"mlp", R"({"stages": [["layers"], ["layers.1", "head"]]})", "overlapping stage lists"},
      {"nograd_seed", R"({"split_points": {"rot.proj": "END"}})",
       "cut inside a higher-order op body: module 'rot.proj' is only part of the body of"},
      {"nograd_seed", R"({"split_after_nodes": ["sin"]})", "cut inside a higher-order op body: node 'sin'"},
      {"mlp", R"({"split_points": {"layers.1": "END", "layers.2": "BEGINNING"}})", "would be empty"},
      {"mlp", R"({"split_points": {"head": "END"}})", "the last stage would be empty"},
      {"mlp", R"({"split_points": {"layers.1": "MIDDLE"}})", "expected \"BEGINNING\" or \"END\""},
      {"mlp", R"({"split_after_nodes": ["nope"]})", "unknown node 'nope'"},
      {"mlp", R"({"stages": [["layers.2"], ["layers.0"]]})", "data would flow backward"},
      {"mlp", R"({"split_points": {"layers.1": "END"})", "JSON syntax error"},
      {"mlp", R"({"splitpoints": {}})", "unknown field"},
  };
  int k = 0;
  for (const auto& c : cases) {
    std::string spec = writeSpec("bad" + std::to_string(k++), c.spec);
    auto r = test::runPipecut("split " + test::fixture(c.model) + " --spec " + spec + " -o " + out);
    INFO(c.spec << "\n" << r.output);
    CHECK(r.exitCode == 2);
    CHECK_THAT(r.output, Catch::Contains(spec) && Catch::Contains(c.message));
    CHECK(hashes(out) == before);
  }
  // Only this destination's temporaries (<out>.tmp.<pid>): other tests write
  // their own splits beside it at the same time under ctest -j.
  std::string mine = fs::path(out).filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(fs::path(out).parent_path()))
    CHECK(e.path().filename().string().rfind(mine, 0) == std::string::npos);
}

TEST_CASE("verify catches a changed, missing or extra file", "[split]") {
  std::string out = test::outPath("splits/tamper");
  fs::remove_all(out);  // a previous run left its stray file: no longer a split pipecut replaces
  REQUIRE(test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + out + " --sha256").exitCode == 0);
  REQUIRE(test::runPipecut("verify " + out).exitCode == 0);
  {
    std::fstream f(out + "/stage_001.pt2", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x7f');
  }
  auto r = test::runPipecut("verify " + out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains("stage 1 file 'stage_001.pt2': xxh3_128 "));
  CHECK_THAT(r.output, Catch::Contains(" differs from the manifest's "));
  r = test::runPipecut("verify " + out + " --sha256");
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains("stage 1 file 'stage_001.pt2': sha256 "));
  fs::remove(out + "/stage_000.pt");
  r = test::runPipecut("verify " + out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains("stage_000.pt': missing"));
  REQUIRE(test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + out).exitCode == 0);
  std::ofstream(out + "/stray.bin") << "x";
  r = test::runPipecut("verify " + out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains("'stray.bin': is not listed in the manifest"));
}

TEST_CASE("verify checks XXH3-128 by default, SHA-256 when asked or when the manifest has no XXH3-128", "[split]") {
  // By default a split records XXH3-128 alone; verify --sha256 says what is missing.
  std::string plain = test::outPath("splits/digests_plain");
  REQUIRE(test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + plain + " -q").exitCode == 0);
  for (const auto& st : pipecut::readManifest(plain).stages)
    for (const auto& f : st.files) {
      CHECK(f.xxh3_128 == pipecut::digestFile(pipecut::Digest::Xxh3_128, plain + "/" + f.path));
      CHECK(f.sha256.empty());
    }
  auto r = test::runPipecut("verify " + plain);
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains("(xxh3_128)"));
  r = test::runPipecut("verify " + plain + " --sha256");
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains(plain + ": stage 0 file 'stage_000.pt': the manifest records no sha256 for it "
                                               "(pipecut split --sha256 records one)"));
  // With --sha256 it records both, and the stage files are the same bytes.
  std::string out = test::outPath("splits/digests");
  REQUIRE(test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + out + " -q --sha256").exitCode == 0);
  Manifest m = pipecut::readManifest(out);
  for (const auto& st : m.stages)
    for (const auto& f : st.files) {
      CHECK(f.xxh3_128 == pipecut::digestFile(pipecut::Digest::Xxh3_128, out + "/" + f.path));
      CHECK(f.sha256 == pipecut::digestFile(pipecut::Digest::Sha256, out + "/" + f.path));
      CHECK(f.xxh3_128 == pipecut::digestFile(pipecut::Digest::Xxh3_128, plain + "/" + f.path));
    }
  r = test::runPipecut("verify " + out);
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains("ok: 4 stage files match " + out + "/manifest (xxh3_128)"));
  r = test::runPipecut("verify " + out + " --sha256 --json");
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains(R"({"ok": true, "files": 4, "digests": "sha256", "manifest_sha256": ")"));
  // Both manifests, rewritten as one (a directory holds both, in agreement).
  auto writeManifests = [&] {
    std::ofstream(out + "/manifest.json") << pipecut::manifestToJson(m);
    std::ofstream(out + "/manifest.pb", std::ios::binary) << pipecut::manifestToBinary(m);
  };
  // A manifest written before XXH3-128 was recorded: its files are checked by SHA-256.
  for (auto& st : m.stages)
    for (auto& f : st.files) f.xxh3_128.clear();
  writeManifests();
  r = test::runPipecut("verify " + out);
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains("(sha256)"));
  m.stages[0].files[0].xxh3_128 = std::string(32, '0');  // one file with it, wrong
  writeManifests();
  r = test::runPipecut("verify " + out);
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains("stage 0 file '" + m.stages[0].files[0].path + "': xxh3_128 "));
  CHECK_THAT(r.output, Catch::Contains("differs from the manifest's 00000000000000000000000000000000"));
  r = test::runPipecut("verify " + out + " --sha256");
  CHECK(r.exitCode == 0);
  // One file with the right one: both digests are compared, and said.
  m.stages[0].files[0].xxh3_128 = pipecut::digestFile(pipecut::Digest::Xxh3_128, out + "/" + m.stages[0].files[0].path);
  writeManifests();
  r = test::runPipecut("verify " + out + " --json");
  CHECK(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains(R"({"ok": true, "files": 4, "digests": "xxh3_128 and sha256", "manifest_sha256": ")"));
}

TEST_CASE("preview prints the stages and writes nothing; --dot draws them", "[split]") {
  std::string out = test::outPath("splits/preview_only");
  std::string dot = test::outPath("splits/preview.dot");
  fs::remove_all(out);
  auto r = test::runPipecut("split " + test::fixture("skip") + " --spec " + specPath("skip.4") + " --preview --dot " + dot);
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains("stage 3:") && Catch::Contains("<- stage 0") && Catch::Contains("B/sample"));
  CHECK_FALSE(fs::exists(out));
  std::ifstream in(dot);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK_THAT(text, Catch::Contains("s0 -> s3"));
}

TEST_CASE("split with hashSource (--hash-source) adds the whole source file's SHA-256 to the manifest", "[split]") {
  driver::SplitRequest r;
  r.model = test::fixture("mlp");
  r.spec = specPath("mlp.2");
  r.output = test::outPath("splits/hash_source");
  r.pt2 = false;
  r.hashSource = true;
  Manifest m = driver::runSplit(r);
  CHECK(m.sourceSha256 == sha256File(r.model));
  CHECK(m.sourceDirectorySha256 == support::zipDirectorySha256(r.model));
  CHECK(readManifest(r.output).sourceSha256 == m.sourceSha256);
}

TEST_CASE("a preview plans exactly the stages a split writes", "[split]") {
  // A preview builds no stage programs (it counts nodes on the source graph);
  // its manifest must still be the written one, less files and hashes.
  for (const char* model : {"llama_tiny", "skip", "gpt2_tied", "nograd_seed"}) {
    for (const char* n : {".2", ".4"}) {
      std::string spec = std::string(model) + n;
      if (!fs::exists(specPath(spec))) continue;
      INFO(spec);
      driver::SplitRequest r;
      r.model = test::fixture(model);
      r.spec = specPath(spec);
      r.output = test::outPath("splits/preview_vs_" + spec);
      r.jobs = 1;
      Manifest written = driver::runSplit(r);
      r.preview = true;
      Manifest planned = driver::runSplit(r);
      for (auto& st : written.stages) st.files.clear();
      // A preview reads no source identity; a written split has the
      // directory hash (and no whole-file hash without hashSource).
      CHECK(written.sourceSha256.empty());
      CHECK(written.sourceDirectorySha256 == support::zipDirectorySha256(r.model));
      written.sourceDirectorySha256.clear();
      CHECK(planned.sourceDirectorySha256.empty());
      CHECK(manifestToJson(planned) == manifestToJson(written));
    }
  }
}

TEST_CASE("the format option picks the emitted formats", "[split]") {
  std::string out = test::outPath("splits/pt2_only");
  auto r = test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + out + " --format pt2");
  REQUIRE(r.exitCode == 0);
  CHECK(fs::exists(out + "/stage_000.pt2"));
  CHECK_FALSE(fs::exists(out + "/stage_000.pt"));
  CHECK(test::runPipecut("split " + test::fixture("mlp") + " --spec " + specPath("mlp.2") + " -o " + out + " --format onnx").exitCode == 1);
}

TEST_CASE("an empty split_points gives one stage: the whole program", "[split]") {
  std::string spec = writeSpec("whole", R"({"split_points": {}})");
  std::string out = test::outPath("splits/whole_llama");
  auto r = test::runPipecut("split " + test::fixture("llama_tiny") + " --spec " + spec + " -o " + out);
  REQUIRE(r.exitCode == 0);
  Manifest m = readManifest(out);
  CHECK(m.stages.size() == 1);
  CHECK(m.stages[0].outputs.size() == 1);
  auto report = runtime::checkChain(out, reference("llama_tiny"));
  INFO(report.message);
  CHECK(report.ok);
}

TEST_CASE("an enabled autocast region: TorchScript refuses it by name, the .pt2 stages keep it", "[split]") {
  std::string spec = writeSpec("autocast_cut", R"({"split_points": {"layers.1": "END"}})");
  std::string out = test::outPath("splits/autocast_bf16.pt2only");
  fs::remove_all(out);  // left by an earlier run's --format pt2 split
  auto r = test::runPipecut("split " + test::fixture("autocast_bf16") + " --spec " + spec + " -o " + out +
                            " --format torchscript");
  CHECK(r.exitCode == 2);
  CHECK_THAT(r.output, Catch::Contains("higher_order.wrap_with_autocast") &&
                           Catch::Contains("an enabled autocast region cannot be expressed in TorchScript"));
  CHECK_FALSE(fs::exists(out));
  // With both formats (the default) the split goes through: stage 1 gets its
  // .pt2 only, and the manifest says why it has no .pt.
  std::string both = test::outPath("splits/autocast_bf16.both");
  r = test::runPipecut("split " + test::fixture("autocast_bf16") + " --spec " + spec + " -o " + both);
  REQUIRE(r.exitCode == 0);
  CHECK_THAT(r.output, Catch::Contains("warning: stage 1 has no torchscript file, the format cannot express it: "
                                       "node 'to_1' (higher_order.wrap_with_autocast)"));
  Manifest mb = readManifest(both);
  REQUIRE(mb.stages.size() == 2);
  CHECK(mb.stages[0].files.size() == 2);
  CHECK(mb.stages[0].missing.empty());
  REQUIRE(mb.stages[1].files.size() == 1);
  CHECK(mb.stages[1].files[0].format == "pt2");
  REQUIRE(mb.stages[1].missing.size() == 1);
  CHECK(mb.stages[1].missing[0].format == "torchscript");
  CHECK_THAT(mb.stages[1].missing[0].reason, Catch::Contains("an enabled autocast region cannot be expressed"));
  CHECK_FALSE(fs::exists(both + "/stage_001.pt"));
  CHECK(test::runPipecut("verify " + both).exitCode == 0);
  r = test::runPipecut("split " + test::fixture("autocast_bf16") + " --spec " + spec + " -o " + out + " --format pt2");
  REQUIRE(r.exitCode == 0);
  CHECK(fs::exists(out + "/stage_001.pt2"));  // chained through torch.export.load by stages_python
  // ... next to the unsplit program, its bitwise oracle there.
  std::string whole = test::outPath("splits/autocast_bf16.whole.pt2only");
  spec = writeSpec("autocast_whole", R"({"split_points": {}})");
  r = test::runPipecut("split " + test::fixture("autocast_bf16") + " --spec " + spec + " -o " + whole + " --format pt2");
  REQUIRE(r.exitCode == 0);
}

TEST_CASE("symbolic sizes cross a cut: read back from a received tensor's shape, else carried as a 0-d tensor",
          "[split]") {
  // Dim.AUTO batch and sequence: the later stages read both sizes off tensors
  // they receive anyway; nothing but tensors with sizes travels.
  Manifest llama = split("llama_dynamic.4");
  REQUIRE(llama.symbols.size() == 2);
  for (const auto& r : llama.symbols) {
    INFO(r.symbol);
    CHECK(r.min == 2);  // export specializes 0 and 1
    CHECK_FALSE(r.max.has_value());
  }
  for (size_t s = 1; s < llama.stages.size(); ++s) {
    const Stage& st = llama.stages[s];
    INFO("stage " << s);
    for (const auto& in : st.inputs) {
      INFO(in.name);
      CHECK_FALSE(in.tensor.shape.empty());  // no carrier
    }
  }
  bool rederived = false;
  for (const auto& r : llama.stages[1].recomputed) rederived |= r.rfind("sym_size_int", 0) == 0;
  CHECK(rederived);
  bool symbolicHidden = false;
  for (const auto& in : llama.stages[3].inputs)
    symbolicHidden |= in.tensor.shape.size() == 3 && in.tensor.shape[0].symbol == llama.inputs[0].tensor.shape[0].symbol &&
                      in.tensor.shape[1].symbol == llama.inputs[0].tensor.shape[1].symbol;
  CHECK(symbolicHidden);

  // [batch*16] crosses: the batch size itself travels, as int64 [].
  Manifest flat = split("dynamic_flatten.2");
  const StageInput* carrier = nullptr;
  for (const auto& in : flat.stages.at(1).inputs)
    if (in.name.size() > 8 && in.name.substr(in.name.size() - 8) == "_carrier") carrier = &in;
  REQUIRE(carrier);
  CHECK(carrier->tensor.dtype == "int64");
  CHECK(carrier->tensor.shape.empty());
  CHECK(carrier->source.kind == ValueSource::Kind::StageOutput);
  CHECK(carrier->source.stage == 0);
  // Both at sizes other than the exported ones: the references are at batch 3
  // (and sequence 5 for the Llama; exported at 2 x 8).
  checkSplitChain(splitDir("llama_dynamic.4"), "llama_dynamic");
  checkSplitChain(splitDir("dynamic_flatten.2"), "dynamic_flatten");

  // Inlining no_grad regions for NativeRT leaves the stages without any
  // region (stages 1 and 2) whole, and what it writes verifies.
  std::string out = test::outPath("splits/llama_dynamic.4.regions_inlined");
  auto r = test::runPipecut("split " + test::fixture("llama_dynamic") + " --spec " + specPath("llama_dynamic.4") +
                            " -o " + out + " --inline-grad-regions -q");
  INFO(r.output);
  REQUIRE(r.exitCode == 0);
  CHECK(test::runPipecut("verify " + out).exitCode == 0);
  checkSplitChain(out, "llama_dynamic");
}

TEST_CASE("older layouts (torch <= 2.7, 2.8) split like the current one, into current-layout stages", "[split]") {
  // The same programs as gpt2_tied and cnn_bn: the same stage parameters,
  // the tied pair found through the pickle's shared storage.
  Manifest old27 = split("gpt2_tied_torch27.2"), now = split("gpt2_tied.2");
  CHECK(old27.torchVersion == "2.7.0");
  CHECK(old27.schemaVersion == "8.7");
  REQUIRE(old27.tiedGroups.size() == 1);
  CHECK(old27.tiedGroups[0].names == now.tiedGroups.at(0).names);
  CHECK(old27.tiedGroups[0].stages == now.tiedGroups.at(0).stages);
  Manifest old28 = split("cnn_bn_torch28.2"), cnn = split("cnn_bn.2");
  for (const auto& [a, b] : {std::pair{&old27, &now}, std::pair{&old28, &cnn}})
    for (size_t s = 0; s < a->stages.size(); ++s) {
      INFO(a->sourceModel << " stage " << s);
      REQUIRE(a->stages[s].parameters.size() == b->stages.at(s).parameters.size());
      for (size_t k = 0; k < a->stages[s].parameters.size(); ++k) {
        CHECK(a->stages[s].parameters[k].name == b->stages[s].parameters[k].name);
        CHECK(a->stages[s].parameters[k].kind == b->stages[s].parameters[k].kind);
        CHECK(a->stages[s].parameters[k].bytes == b->stages[s].parameters[k].bytes);
      }
    }
  // What the split writes is the current layout: raw weight records and their config.
  for (const char* dir : {"gpt2_tied_torch27.2", "cnn_bn_torch28.2"}) {
    pt2::Package stage = pt2::readPackage(splitDir(dir) + "/stage_000.pt2");
    CHECK(stage.archive->has("data/weights/model_weights_config.json"));
    CHECK_FALSE(stage.archive->has("data/weights/model.pt"));
  }
}

TEST_CASE("split --inline-grad-regions unrolls a map of static length in the .pt2 stages", "[split]") {
  std::string out = test::outPath("splits/control_flow.4.unrolled");
  auto r = test::runPipecut("split " + test::fixture("control_flow") + " --spec " + specPath("control_flow.4") + " -o " +
                            out + " --inline-grad-regions -q");
  INFO(r.output);
  REQUIRE(r.exitCode == 0);
  size_t maps = 0, stacks = 0;
  for (const auto& st : readManifest(out).stages)
    for (const auto& f : st.files) {
      if (f.format != "pt2") continue;
      for (const auto& n : pt2::readPackage(out + "/" + f.path).program.graph.nodes) {
        maps += n->target == "torch.ops.higher_order.map_impl";
        stacks += n->target == "torch.ops.aten.stack.default";
      }
    }
  CHECK(maps == 0);
  CHECK(stacks >= 1);
  // cond and while_loop stay: NativeRT runs them. The .pt2 stages run in
  // run_pipeline (NativeRT) and stages_python (torch.export.load).
  checkSplitChain(out, "control_flow");
}

TEST_CASE("pipecut compile runs as many stage compiles at once as cores and memory allow", "[compile]") {
  constexpr uint64_t GB = 1ull << 30;
  const std::vector<uint64_t> stages7b(4, 2 * GB / 3);  // a 7B-shaped 4-stage split's stages, 0.67 GB each
  // Weights left in the .pt2: 1 GB + 1.25 x 0.67 GB = 1.83 GB a compile.
  CHECK(driver::defaultCompileJobs(stages7b, false, 4 * GB, 16) == 2);
  CHECK(driver::defaultCompileJobs(stages7b, false, 8 * GB, 16) == 4);   // every stage at once
  CHECK(driver::defaultCompileJobs(stages7b, false, 64 * GB, 2) == 2);   // the cores
  // Weights in the package: 1 GB + 3 x 0.67 GB = 3 GB a compile.
  CHECK(driver::defaultCompileJobs(stages7b, true, 8 * GB, 16) == 2);
  // The largest stage counts; too little memory still compiles one at a time.
  CHECK(driver::defaultCompileJobs({GB / 2, 10 * GB}, false, 24 * GB, 16) == 1);
  CHECK(driver::defaultCompileJobs({GB / 2, 10 * GB}, true, 4 * GB, 16) == 1);
  // Memory unknown: cores and stages decide.
  CHECK(driver::defaultCompileJobs(stages7b, true, 0, 3) == 3);
  CHECK(driver::defaultCompileJobs({}, true, 0, 8) == 1);
  CHECK(driver::defaultCompileJobs({}, false, 16 * GB, 8) == 1);  // nothing to compile (every package kept)
  CHECK(driver::defaultCompileJobs({0, 0}, false, 16 * GB, 8) == 2);
}
