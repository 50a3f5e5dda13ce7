// Operator support (partition/support.h) on the fixtures: dictionaries as
// read, the marks, the runs (non-tensor values never cross a run boundary,
// the minimum size), and cutting an assignment at the runs.
#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "driver/load.h"
#include "ir/schedule.h"
#include "partition/support.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;

namespace {

pt2::Package loadForSupport(const std::string& name) {
  driver::LoadOptions o;
  o.moduleContiguous = true;
  return driver::loadNormalized(test::fixture(name), o);
}

// Every operator the program calls (bodies included) but those left out.
std::string dictionaryWithout(const ir::Program& p, const std::set<std::string>& without) {
  std::set<std::string> ops;
  std::function<void(const ir::Graph&)> walk = [&](const ir::Graph& g) {
    for (const auto& n : g.nodes) {
      ops.insert(n->opName());
      for (const ir::Graph* b : n->subgraphs()) walk(*b);
    }
  };
  walk(p.graph);
  ir::Json j = ir::Json::object();
  for (const auto& op : ops)
    if (!without.count(op)) j[op] = nullptr;
  return j.dump();
}

std::string marksOf(const std::vector<char>& v) {
  std::string s;
  for (char c : v) s += c ? '1' : '0';
  return s;
}

pipecut::Error refusedSupportDictionary(const std::string& text, const partition::SignatureLookup& sig = {}) {
  try {
    partition::dictionaryTarget(text, "ops.json", sig);
  } catch (const pipecut::Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK(e.file() == "ops.json");
    return e;
  }
  FAIL("the dictionary was accepted: " << text);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("support dictionaries: refused as read, naming the key", "[support]") {
  CHECK_THAT(refusedSupportDictionary("{\"aten.relu.default\": nul").what(), Catch::StartsWith("ops.json: not JSON"));
  CHECK_THAT(refusedSupportDictionary("[]").what(), Catch::Contains("a support dictionary is a JSON object"));
  CHECK(refusedSupportDictionary("{\"relu\": null}").where() == "key 'relu'");
  CHECK(refusedSupportDictionary("{\"aten.relu.default\": 1}").where() == "key 'aten.relu.default'");
  CHECK(refusedSupportDictionary("{\"aten.relu.default\": [[]]}").where() == "key 'aten.relu.default'");
  CHECK(std::string(refusedSupportDictionary("{\"aten.relu.default\": [[\"float33\"]]}").what()) ==
        "ops.json: key 'aten.relu.default': argument 0: unknown dtype \"float33\" (dtypes as torch names them: "
        "float32, bfloat16, int64, ...)");
  partition::SignatureLookup sig = [](const std::string& op) -> std::optional<partition::OperatorSignature> {
    if (op == "aten.to.dtype") return partition::OperatorSignature{{"self", "dtype"}, {true, false}};
    return std::nullopt;
  };
  CHECK(std::string(refusedSupportDictionary("{\"aten.to.dtype\": [null, null, null]}", sig).what()) ==
        "ops.json: key 'aten.to.dtype': lists 3 arguments, but aten.to.dtype takes 2 positional (self, dtype)");
  CHECK(std::string(refusedSupportDictionary("{\"aten.to.dtype\": [null, [\"float32\"]]}", sig).what()) ==
        "ops.json: key 'aten.to.dtype': lists dtypes for argument 1 ('dtype'), which is not a tensor");
  CHECK_NOTHROW(partition::dictionaryTarget("{\"aten.to.dtype\": [[\"float32\", \"bfloat16\"], null]}", "ops.json", sig));
}

TEST_CASE("support marks and runs: a left-out operator, a dtype rule, the minimum size", "[support]") {
  pt2::Package pkg = loadForSupport("mlp");  // linear, relu, ... , linear: 9 top-level nodes
  const ir::Program& p = pkg.program;
  auto target = partition::dictionaryTarget(dictionaryWithout(p, {"aten.relu.default"}), "ops.json");
  CHECK(target->name() == "dictionary ops.json");
  partition::SupportMarks marks = partition::markSupport(p, *target);
  CHECK(marksOf(marks.supported) == "101010101");
  CHECK(marks.reason[1] == "the dictionary does not name aten.relu.default");
  partition::SupportRuns runs = partition::supportRuns(p, marks, 1);
  CHECK(marksOf(runs.runSupported) == "101010101");
  // One stage for all, cut at every run; and two stages cut again.
  partition::Assignment one{1, std::vector<int>(p.graph.nodes.size(), 0)};
  partition::SupportedAssignment sa = partition::cutAtRuns(p, one, runs, marks);
  CHECK(sa.assignment.numStages == 9);
  CHECK(marksOf(sa.stageSupported) == "101010101");
  CHECK(sa.stageReason[1] == "node 'relu' (aten.relu.default): the dictionary does not name aten.relu.default");
  partition::Assignment two{2, {0, 0, 0, 1, 1, 1, 1, 1, 1}};
  partition::SupportedAssignment sb = partition::cutAtRuns(p, two, runs, marks);
  CHECK(sb.assignment.stageOf == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8});
  partition::Assignment early{2, {0, 0, 1, 1, 1, 1, 1, 1, 1}};  // a spec cut inside a run of one
  CHECK(partition::cutAtRuns(p, early, runs, marks).assignment.numStages == 9);

  // Each supported run holds one Linear: at 2 they all join their neighbours.
  partition::SupportMarks m2 = partition::markSupport(p, *target);
  partition::SupportRuns r2 = partition::supportRuns(p, m2, 2);
  CHECK(marksOf(r2.runSupported) == "0");
  CHECK(m2.reason[0] == "in a supported run of 1 compute node, fewer than --min-supported-nodes 2");

  auto bf16 = partition::dictionaryTarget(R"({"aten.linear.default": [["bfloat16"]], "aten.relu.default": null})", "bf16.json");
  partition::SupportMarks mb = partition::markSupport(p, *bf16);
  CHECK(marksOf(mb.supported) == "010101010");
  CHECK(mb.reason[0] == "argument 0 is float32, the target takes bfloat16");
}

TEST_CASE("support runs: values that are not tensors never cross a run boundary", "[support]") {
  // llama_dynamic reads its symbolic sizes once and reshapes with them in
  // every layer. Leaving out any one operator must keep each such value's
  // producer and users in one run.
  pt2::Package pkg = loadForSupport("llama_dynamic");
  const ir::Program& p = pkg.program;
  ir::numberNodes(p.graph);
  size_t checkedEdges = 0;
  for (const char* op : {"aten.silu.default", "aten.rsqrt.default", "aten.embedding.default", "aten.linear.default"}) {
    auto target = partition::dictionaryTarget(dictionaryWithout(p, {op}), "ops.json");
    partition::SupportMarks marks = partition::markSupport(p, *target);
    partition::SupportRuns runs = partition::supportRuns(p, marks, 1);
    INFO(op);
    for (size_t i = 0; i < p.graph.nodes.size(); ++i)
      p.graph.nodes[i]->forEachInputValue([&](const ir::Value* v) {
        if (v->kind == ir::ValueKind::Tensor || !v->producer) return;
        auto at = ir::positionIn(p.graph, v->producer);
        REQUIRE(at);
        CHECK(runs.runOf[*at] == runs.runOf[i]);
        ++checkedEdges;
      });
    // Every run is wholly supported or holds an unsupported node; neighbours differ.
    for (size_t r = 1; r < runs.runSupported.size(); ++r) CHECK(runs.runSupported[r] != runs.runSupported[r - 1]);
    for (size_t i = 0; i < p.graph.nodes.size(); ++i)
      CHECK(static_cast<bool>(marks.supported[i]) == static_cast<bool>(runs.runSupported[runs.runOf[i]]));
  }
  CHECK(checkedEdges > 0);
  // Without SiLU: the span from the first size read to its last user stays
  // one unsupported run, and says why.
  auto nosilu = partition::dictionaryTarget(dictionaryWithout(p, {"aten.silu.default"}), "ops.json");
  partition::SupportMarks marks = partition::markSupport(p, *nosilu);
  partition::SupportRuns runs = partition::supportRuns(p, marks, 1);
  CHECK(marksOf(runs.runSupported) == "0101");
  CHECK_THAT(runs.runReason[0], Catch::Contains("which share a value that is not a tensor and so stay in one stage"));
}
