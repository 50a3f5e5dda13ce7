// Generation's torch-free parts: state found in a program and kept in one
// stage, the plan (which slot runs which step), the sampler, the prompt and
// token files. The loop itself runs in test/run_generate.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "ir/module_tree.h"
#include "manifest/manifest.h"
#include "ir/state.h"
#include "partition/assign.h"
#include "pt2/program_json.h"
#include "runtime/generate/decode_program.h"
#include "runtime/generate/plan.h"
#include "runtime/generate/prompts.h"
#include "runtime/generate/sampler.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;
using namespace pipecut::runtime;
using ir::Json;

namespace {

// x -> add_(cache, x) -> mul(a, x) -> relu -> add(cache, r): the cache is
// written in place at the top and read again at the bottom.
Json statefulProgram() {
  Json j = test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.add_.Tensor", {"b_cache", "x"}, "a"),
      test::tensorNode("torch.ops.aten.mul.Tensor", {"a", "x"}, "m"),
      test::tensorNode("torch.ops.aten.relu.default", {"m"}, "r"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"b_cache", "r"}, "out"),
  }));
  Json& g = j["graph_module"]["graph"];
  g["inputs"].insert(g["inputs"].begin(), Json{{"as_tensor", {{"name", "b_cache"}}}});
  g["tensor_values"]["b_cache"] = g["tensor_values"]["x"];
  auto& specs = j["graph_module"]["signature"]["input_specs"];
  specs.insert(specs.begin(),
               Json{{"buffer", {{"arg", {{"name", "b_cache"}}}, {"buffer_name", "cache"}, {"persistent", true}}}});
  return j;
}

std::string assignError(const ir::Program& p, const std::string& afterNode, std::vector<int>* stageOf = nullptr) {
  partition::SplitSpec spec;
  spec.kind = partition::SplitSpec::Kind::SplitAfterNodes;
  spec.afterNodes = {afterNode};
  ir::ModuleTree tree = ir::ModuleTree::build(p, {});
  try {
    partition::Assignment a = partition::assignStages(p, spec, tree);
    if (stageOf) *stageOf = a.stageOf;
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

std::vector<PromptRequest> promptsOfLengths(const std::vector<int>& lengths) {
  std::vector<PromptRequest> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    PromptRequest p;
    p.id = std::to_string(i);
    for (int k = 0; k < lengths[i]; ++k) p.tokens.push_back(static_cast<int64_t>(1 + (i * 7 + k * 3) % 50));
    out.push_back(std::move(p));
  }
  return out;
}

// Runs a plan against a model that is a pure function of each row's context
// (what its state, the KV cache, would hold): the context is cleared on a
// reset and extended by every step's tokens, and a sampled token hashes it.
// Steps complete in an order `rng` picks among the outstanding ones, as
// slots on a pipeline would. Returns the sequences; checks the plan's
// invariants on the way.
std::vector<GeneratedSequence> simulate(GenerationConfig c, const std::vector<PromptRequest>& prompts, uint32_t seed,
                                        std::optional<int64_t> eosAfter = std::nullopt) {
  GenerationPlan plan(c, prompts);
  std::mt19937 rng(seed);
  std::map<uint32_t, std::vector<std::vector<int64_t>>> context;  // slot -> per row
  std::vector<GenerationStep> outstanding = plan.start(0);
  CHECK(!outstanding.empty());
  CHECK(outstanding.size() <= static_cast<size_t>(c.slots));
  int64_t expectedIndex = static_cast<int64_t>(outstanding.size());
  std::map<uint32_t, int64_t> nextPosition;
  while (!outstanding.empty()) {
    size_t pick = std::uniform_int_distribution<size_t>(0, outstanding.size() - 1)(rng);
    GenerationStep step = outstanding[pick];
    outstanding.erase(outstanding.begin() + static_cast<long>(pick));
    REQUIRE(step.tokens.size() == static_cast<size_t>(c.rows * step.length));
    REQUIRE(step.length <= c.chunk);
    auto& rows = context[step.slot];
    if (step.reset) rows.assign(static_cast<size_t>(c.rows), {});
    REQUIRE(step.position == (step.reset ? 0 : nextPosition[step.slot]));
    nextPosition[step.slot] = step.position + step.length;
    if (c.cacheLength > 0) CHECK(step.position + step.length <= c.cacheLength);
    std::vector<int64_t> sampled;
    for (int64_t r = 0; r < c.rows; ++r) {
      auto& ctx = rows[static_cast<size_t>(r)];
      ctx.insert(ctx.end(), step.tokens.begin() + r * step.length, step.tokens.begin() + (r + 1) * step.length);
      uint64_t h = 1469598103934665603ull;
      for (int64_t t : ctx) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
      int64_t token = static_cast<int64_t>(h % 997);
      if (eosAfter && step.sequence[static_cast<size_t>(r)] >= 0 &&
          step.generated[static_cast<size_t>(r)] + 1 == *eosAfter + (step.sequence[static_cast<size_t>(r)] % 2))
        token = 1000;  // the eos token, after 3 tokens for even prompts and 4 for odd ones
      sampled.push_back(token);
    }
    if (auto next = plan.advance(step, step.samples ? sampled : std::vector<int64_t>{}, 1)) {
      CHECK(next->index == expectedIndex++);
      CHECK(next->slot == step.slot);
      outstanding.push_back(*next);
    }
  }
  CHECK(plan.done());
  CHECK(plan.stepsIssued() == static_cast<uint64_t>(expectedIndex));
  return plan.sequences();
}

std::string writeText(const std::string& name, const std::string& text) {
  std::string path = test::outPath("generation/" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string promptsError(const std::string& text) {
  try {
    readPrompts(writeText("bad.jsonl", text));
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

}  // namespace

// ---- state -------------------------------------------------------------------

TEST_CASE("state: a buffer updated in place, and every node that touches it", "[generation]") {
  ir::Program p = pt2::parseProgram(statefulProgram());
  std::vector<ir::StateTensor> state = ir::findState(p);
  REQUIRE(state.size() == 1);
  CHECK(p.inputSpecs[state[0].spec].target == "cache");
  std::vector<std::string> touching;
  for (const ir::Node* n : state[0].touching) touching.push_back(n->label());
  // add_ writes it, mul reads it through add_'s result, the last add reads it; relu does not.
  CHECK(touching == std::vector<std::string>{"a", "m", "out"});
  CHECK(ir::isInPlace(*p.graph.nodes[0]));
  CHECK_FALSE(ir::isInPlace(*p.graph.nodes[1]));

  // Without the in-place write the buffer is an ordinary input.
  Json plain = statefulProgram();
  plain["graph_module"]["graph"]["nodes"][0]["target"] = "torch.ops.aten.add.Tensor";
  CHECK(ir::findState(pt2::parseProgram(plain)).empty());
}

TEST_CASE("state: its nodes move to the stage that updates it last, or the split is refused", "[generation]") {
  ir::Program p = pt2::parseProgram(statefulProgram());
  std::vector<int> stageOf;
  // Cut after mul: add_ and mul follow the read in stage 1.
  REQUIRE(assignError(p, "m", &stageOf).empty());
  CHECK(stageOf == std::vector<int>{1, 1, 1, 1});
  // Cut after relu: relu reads what mul computed from the cache in stage 0,
  // while the cache's last reader is in stage 1.
  CHECK_THAT(assignError(p, "r"), Catch::Contains("state 'cache'") && Catch::Contains("node 'm'") &&
                                      Catch::Contains("stage 0 (by node 'r')") &&
                                      Catch::Contains("stay in one stage"));
}

TEST_CASE("state: a split of the KV-cache Llama lists each stage's caches in its manifest", "[generation]") {
  const std::string dir = test::outPath("generation/llama_kv.2");
  const std::string spec = writeText("llama_kv.2.json", R"({"split_points": {"model.model.layers.2": "BEGINNING"}})");
  auto r = test::runPipecut("split " + test::sourcePath("testdata/generate/llama_kv.pt2") + " --spec " + spec + " -o " + dir +
                            " --force -q");
  INFO(r.output);
  REQUIRE(r.exitCode == 0);
  Manifest m = readManifest(dir);
  REQUIRE(m.stages.size() == 2);
  for (uint32_t s = 0; s < 2; ++s) {
    INFO("stage " << s);
    // Layers 2s and 2s+1: a key and a value cache each, [batch 2, kv heads 2,
    // cache 64, head dim 16]; and the two scalars transformers' static cache
    // keeps per layer pair (updated with add_, no batch dimension).
    size_t caches = 0, scalars = 0;
    for (const auto& st : m.stages[s].state) {
      if (st.tensor.shape.empty()) {
        ++scalars;
        CHECK(st.tensor.dtype == "int64");
        CHECK(st.batchDim == -1);
        CHECK(st.initial == "stored");  // its value in the stage files, not zeros
        continue;
      }
      CHECK(st.initial == "zeros");
      ++caches;
      CHECK((st.name.find("layers." + std::to_string(2 * s) + ".") != std::string::npos ||
             st.name.find("layers." + std::to_string(2 * s + 1) + ".") != std::string::npos));
      CHECK(st.tensor.dtype == "float32");
      REQUIRE(st.tensor.shape.size() == 4);
      CHECK(st.tensor.shape[0].size == 2);
      CHECK(st.tensor.shape[2].size == 64);
      CHECK(st.batchDim == 0);
    }
    CHECK(caches == 4);
    CHECK(scalars == 2);
  }
  // Cutting through a layer's attention, between its cache write and its
  // read, keeps the write with the read: the caches still sit whole in one stage.
  const std::string mid = writeText("llama_kv.mid.json", R"({"split_points": {"model.model.layers.1.self_attn.o_proj": "BEGINNING"}})");
  r = test::runPipecut("split " + test::sourcePath("testdata/generate/llama_kv.pt2") + " --spec " + mid + " -o " + dir +
                       ".mid --force -q");
  INFO(r.output);
  REQUIRE(r.exitCode == 0);
  Manifest cut = readManifest(dir + ".mid");
  CHECK(cut.stages[0].state.size() + cut.stages[1].state.size() == 12);
}

TEST_CASE("decode program: what --generate and --profile --decode-step read of a manifest, and each refusal", "[generation]") {
  const std::string whole = writeText("whole.json", R"({"split_points": {}})");
  auto split = [&](const std::string& model, const std::string& spec) {
    const std::string dir = test::outPath("generation/decode." + model);
    auto r = test::runPipecut("split " + test::sourcePath("testdata/generate/" + model + ".pt2") + " --spec " + spec + " -o " +
                              dir + " --force -q");
    INFO(r.output);
    REQUIRE(r.exitCode == 0);
    return readManifest(dir);
  };
  // One token per call, cut in two: the logits come from the last stage.
  Manifest kv = split("llama_kv", writeText("kv.2.json", R"({"split_points": {"model.model.layers.2": "BEGINNING"}})"));
  DecodeProgram d = readDecodeProgram(kv, "kv", "--generate");
  CHECK(d.rows == 2);
  CHECK_FALSE(d.chunked);
  CHECK(d.chunk == 1);
  CHECK(d.vocab == 256);
  CHECK(d.cacheLength == 64);
  CHECK(d.logitsStage == 1);
  CHECK(d.logitsOutput == 0);
  // A symbolic sequence length: chunks up to the symbol's upper bound (63),
  // never more than the cache.
  Manifest chunk = split("llama_kv_chunk", whole);
  d = readDecodeProgram(chunk, "chunk", "--decode-step");
  CHECK(d.chunked);
  CHECK(d.chunk == 63);
  CHECK(d.cacheLength == 64);
  CHECK(d.logitsStage == 0);

  auto refusal = [](const Manifest& m) -> std::string {
    try {
      readDecodeProgram(m, "OUT", "--decode-step");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::InvalidInput);
      CHECK(std::string(e.what()).find("--decode-step takes a decode step exported with its static cache") != std::string::npos);
      return e.what();
    }
    return "accepted";
  };
  Manifest m = chunk;
  m.inputs.pop_back();
  CHECK_THAT(refusal(m), Catch::StartsWith("OUT: manifest inputs: the program takes 1 inputs, not 2"));
  m = chunk;
  m.inputs[0].tensor.dtype = "float32";
  CHECK_THAT(refusal(m), Catch::Contains(": is float32 of rank 2, not token ids int64 [B, T] with a static B"));
  m = chunk;
  m.inputs[1].tensor.shape.push_back(m.inputs[1].tensor.shape[0]);
  CHECK_THAT(refusal(m), Catch::Contains(": is not cache positions int64 [T]"));
  m = kv;
  m.inputs[0].tensor.shape[1].size = 3;
  CHECK_THAT(refusal(m), Catch::Contains(": takes 3 tokens per call; a static program must take 1"));
  m = kv;
  m.outputs[0].tensor.shape.pop_back();
  CHECK_THAT(refusal(m), Catch::Contains(": is not logits [B, T, vocab] of a floating dtype"));
  m = kv;
  for (auto& st : m.stages) st.state.clear();
  CHECK_THAT(refusal(m), Catch::StartsWith("OUT: manifest stages: no stage holds state (a KV cache)"));
}

// ---- the plan ----------------------------------------------------------------

TEST_CASE("plan: a slot takes prompts of one length, padding the rest, and prefills in chunks", "[generation]") {
  GenerationConfig c;
  c.rows = 2;
  c.slots = 2;
  c.chunk = 4;
  c.maxNewTokens = 2;
  c.cacheLength = 16;
  GenerationPlan plan(c, promptsOfLengths({3, 5, 3, 5, 6}));
  std::vector<GenerationStep> first = plan.start(0);
  REQUIRE(first.size() == 2);
  // Slot 0: prompts 0 and 2 (length 3), one chunk that samples.
  CHECK(first[0].slot == 0);
  CHECK(first[0].sequence == std::vector<int64_t>{0, 2});
  CHECK(first[0].length == 3);
  CHECK(first[0].reset);
  CHECK(first[0].prefill);
  CHECK(first[0].samples);
  CHECK(first[0].index == 0);
  // Slot 1: prompts 1 and 3 (length 5): 4 tokens, then 1 that samples.
  CHECK(first[1].sequence == std::vector<int64_t>{1, 3});
  CHECK(first[1].length == 4);
  CHECK_FALSE(first[1].samples);
  auto rest = plan.advance(first[1], {}, 1);
  REQUIRE(rest);
  CHECK(rest->position == 4);
  CHECK(rest->length == 1);
  CHECK(rest->samples);
  CHECK_FALSE(rest->reset);
  CHECK(rest->tokens == std::vector<int64_t>{plan.prompts()[1].tokens[4], plan.prompts()[3].tokens[4]});

  // Slot 0 decodes the tokens it sampled, then finishes (2 new tokens) and
  // takes prompt 4 alone: the second row is padding (prompt 4 again).
  auto decode = plan.advance(first[0], {11, 12}, 2);
  REQUIRE(decode);
  CHECK(decode->tokens == std::vector<int64_t>{11, 12});
  CHECK(decode->position == 3);
  CHECK(decode->generated == std::vector<int64_t>{1, 1});
  auto refill = plan.advance(*decode, {13, 14}, 3);
  REQUIRE(refill);
  CHECK(refill->reset);
  CHECK(refill->position == 0);
  CHECK(refill->sequence == std::vector<int64_t>{4, -1});
  CHECK(refill->length == 4);
  std::vector<int64_t> p4 = plan.prompts()[4].tokens;
  CHECK(refill->tokens == std::vector<int64_t>{p4[0], p4[1], p4[2], p4[3], p4[0], p4[1], p4[2], p4[3]});
  auto seqs = plan.sequences();
  CHECK(seqs[0].tokens == std::vector<int64_t>{11, 13});
  CHECK(seqs[0].finish == "length");
  CHECK(seqs[2].tokens == std::vector<int64_t>{12, 14});
  CHECK_FALSE(plan.done());
  CHECK(plan.promptTokens() == 3 + 3 + 5 + 5 + 6);
  CHECK(plan.generatedTokens() == 4);
  CHECK(plan.timings()[0].tokenMs == std::vector<double>{2, 3});
  CHECK(plan.timings()[4].admittedMs == 3);
}

TEST_CASE("plan: a row that ends at eos stops taking tokens while its slot goes on", "[generation]") {
  GenerationConfig c;
  c.rows = 2;
  c.chunk = 4;
  c.maxNewTokens = 3;
  c.eos = 0;
  GenerationPlan plan(c, promptsOfLengths({2, 2}));
  auto step = plan.start(0).at(0);
  auto next = plan.advance(step, {0, 5}, 1);  // row 0 ends at once
  REQUIRE(next);
  CHECK(next->tokens == std::vector<int64_t>{0, 5});  // an ended row feeds its last token again
  next = plan.advance(*next, {9, 6}, 2);              // row 0's 9 is dropped
  REQUIRE(next);
  next = plan.advance(*next, {9, 7}, 3);
  CHECK_FALSE(next);
  CHECK(plan.done());
  auto seqs = plan.sequences();
  CHECK(seqs[0].tokens == std::vector<int64_t>{0});
  CHECK(seqs[0].finish == "eos");
  CHECK(seqs[1].tokens == std::vector<int64_t>{5, 6, 7});
  CHECK(seqs[1].finish == "length");
}

TEST_CASE("plan: a prompt that does not fit the cache is refused by name", "[generation]") {
  GenerationConfig c;
  c.cacheLength = 8;
  c.maxNewTokens = 4;
  auto prompts = promptsOfLengths({5, 6});  // 5 + 4 - 1 = 8 fits; 6 + 4 - 1 = 9 does not
  try {
    GenerationPlan plan(c, prompts);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK_THAT(std::string(e.what()), Catch::Contains("prompt 1") && Catch::Contains("need 9 cache positions") &&
                                          Catch::Contains("the cache holds 8"));
  }
  prompts.pop_back();
  CHECK_NOTHROW(GenerationPlan(c, prompts));
}

TEST_CASE("plan: tokens depend only on each prompt, not on slots, rows, chunks or completion order", "[generation]") {
  auto prompts = promptsOfLengths({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5});
  GenerationConfig base;
  base.maxNewTokens = 5;
  base.cacheLength = 16;
  const auto reference = simulate(base, prompts, 0);
  for (auto& s : reference) {
    CHECK(s.tokens.size() == 5);
    CHECK(s.finish == "length");
  }
  for (int64_t rows : {1, 2, 3})
    for (int64_t slots : {1, 2, 4})
      for (int64_t chunk : {1, 3, 16})
        for (uint32_t seed : {1u, 2u}) {
          GenerationConfig c = base;
          c.rows = rows;
          c.slots = slots;
          c.chunk = chunk;
          INFO("rows " << rows << " slots " << slots << " chunk " << chunk << " order " << seed);
          auto got = simulate(c, prompts, seed);
          CHECK(compareSequences(got, reference).empty());
        }
  // With eos, rows end at different steps; the slot refills only when all have.
  GenerationConfig c = base;
  c.eos = 1000;
  const auto eosReference = simulate(c, prompts, 0, 3);
  for (size_t i = 0; i < eosReference.size(); ++i) {
    CHECK(eosReference[i].finish == "eos");
    CHECK(eosReference[i].tokens.size() == 3 + i % 2);
  }
  c.rows = 2;
  c.slots = 3;
  c.chunk = 2;
  CHECK(compareSequences(simulate(c, prompts, 5, 3), eosReference).empty());
}

// ---- the sampler ---------------------------------------------------------------

TEST_CASE("sampler: greedy takes the first maximum, as torch.argmax", "[generation]") {
  SamplerOptions greedy;
  std::vector<float> l = {0.5f, 2.f, -1.f, 2.f};
  CHECK(sampleToken(l.data(), l.size(), greedy, 7, 0) == 1);
  l[2] = NAN;  // torch.argmax treats NaN as the maximum
  CHECK(sampleToken(l.data(), l.size(), greedy, 7, 0) == 2);
}

TEST_CASE("sampler: top-p draws are reproducible, keyed by seed, sequence and position, and follow the softmax",
          "[generation]") {
  SamplerOptions o;
  o.sampling = Sampling::TopP;
  o.seed = 42;
  o.temperature = 1.0;
  o.topP = 1.0;
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const uint64_t key = sequenceKey("\"a\"");
  CHECK(key != sequenceKey("\"b\""));
  std::vector<int> counts(3);
  std::vector<int64_t> first;
  for (int64_t pos = 0; pos < 20000; ++pos) {
    int64_t t = sampleToken(l.data(), l.size(), o, key, pos);
    CHECK(t == sampleToken(l.data(), l.size(), o, key, pos));  // run to run
    ++counts[static_cast<size_t>(t)];
    if (pos < 64) first.push_back(t);
  }
  // Within 4 standard deviations (about 0.014 for 20000 draws).
  CHECK(std::abs(counts[0] / 20000.0 - 0.5) < 0.015);
  CHECK(std::abs(counts[1] / 20000.0 - 0.3) < 0.015);
  CHECK(std::abs(counts[2] / 20000.0 - 0.2) < 0.015);
  // Another seed or another sequence draws differently.
  SamplerOptions other = o;
  other.seed = 43;
  std::vector<int64_t> reseeded, otherSequence;
  for (int64_t pos = 0; pos < 64; ++pos) {
    reseeded.push_back(sampleToken(l.data(), l.size(), other, key, pos));
    otherSequence.push_back(sampleToken(l.data(), l.size(), o, sequenceKey("\"b\""), pos));
  }
  CHECK(reseeded != first);
  CHECK(otherSequence != first);
  // top-p 0.6 keeps {0, 1}; a tiny top-p keeps the argmax; a low temperature sharpens to it.
  o.topP = 0.6;
  for (int64_t pos = 0; pos < 2000; ++pos) CHECK(sampleToken(l.data(), l.size(), o, key, pos) != 2);
  o.topP = 1e-6;
  for (int64_t pos = 0; pos < 200; ++pos) CHECK(sampleToken(l.data(), l.size(), o, key, pos) == 0);
  o.topP = 1.0;
  o.temperature = 0.01;
  for (int64_t pos = 0; pos < 200; ++pos) CHECK(sampleToken(l.data(), l.size(), o, key, pos) == 0);
  for (int64_t pos = 0; pos < 1000; ++pos) {
    double u = uniformDraw(1, key, pos);
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
  }
}

// ---- the files -----------------------------------------------------------------

TEST_CASE("prompts: ids as given, strict lines, each refusal naming the line and field", "[generation]") {
  auto p = readPrompts(writeText("ok.jsonl", "{\"id\": 7, \"prompt\": [1, 2]}\n\n{\"prompt\": [3], \"id\": \"b\"}\n"));
  REQUIRE(p.size() == 2);
  CHECK(p[0].id == "7");
  CHECK(p[0].tokens == std::vector<int64_t>{1, 2});
  CHECK(p[1].id == "\"b\"");
  CHECK_THAT(promptsError(""), Catch::Contains("bad.jsonl") && Catch::Contains("holds no prompts"));
  CHECK_THAT(promptsError("{\"id\": 1, \"prompt\": [1]}\n[1]\n"), Catch::Contains("line 2") && Catch::Contains("not a JSON object"));
  CHECK_THAT(promptsError("{\"id\": 1, \"prompt\": []}"), Catch::Contains("line 1: prompt") && Catch::Contains("is empty (prompt 1)"));
  CHECK_THAT(promptsError("{\"id\": 1, \"prompt\": [1, -2]}"), Catch::Contains("line 1: prompt[1]"));
  CHECK_THAT(promptsError("{\"id\": 1, \"prompt\": [1, 2.5]}"), Catch::Contains("line 1: prompt[1]"));
  CHECK_THAT(promptsError("{\"id\": 1.5, \"prompt\": [1]}"), Catch::Contains("line 1: id"));
  CHECK_THAT(promptsError("{\"id\": 1, \"prompt\": [1], \"max\": 3}"), Catch::Contains("unknown field"));
  CHECK_THAT(promptsError("{\"id\": 1, \"prompt\": [1]}\n{\"id\": 1, \"prompt\": [2]}"),
             Catch::Contains("line 2: id") && Catch::Contains("given twice"));
}

TEST_CASE("tokens: written, read back, compared token by token, recognised as ours", "[generation]") {
  std::vector<GeneratedSequence> s = {{"7", {4, 5}, "length"}, {"\"b\"", {2}, "eos"}};
  const std::string text = sequencesJsonl(s);
  CHECK(text == "{\"id\": 7, \"tokens\": [4, 5], \"finish\": \"length\"}\n{\"id\": \"b\", \"tokens\": [2], \"finish\": \"eos\"}\n");
  const std::string path = writeText("tokens.jsonl", text);
  auto back = readSequences(path);
  CHECK(compareSequences(back, s).empty());
  CHECK(back[1].finish == "eos");
  CHECK(sequencesInTheWay(path).empty());
  CHECK_FALSE(sequencesInTheWay(writeText("notes.txt", "my notes\n")).empty());
  CHECK_FALSE(sequencesInTheWay(writeText("prompts.jsonl", "{\"id\": 1, \"prompt\": [1]}\n")).empty());

  auto changed = s;
  changed[0].tokens[1] = 9;
  CHECK(compareSequences(changed, s) == "prompt 7: position 1: token 9, the reference has 5");
  changed = s;
  changed[0].tokens.pop_back();
  CHECK(compareSequences(changed, s) == "prompt 7: position 1: no token (the sequence ended), the reference has 5");
  changed = s;
  changed[1].tokens.push_back(3);
  CHECK(compareSequences(changed, s) == "prompt \"b\": position 1: token 3, the reference has no token (it ended)");
  changed = s;
  changed[0].id = "8";
  CHECK(compareSequences(changed, s) == "prompt 8: the reference has no such prompt");
}
