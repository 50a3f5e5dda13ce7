// Normalization passes on small hand-built graphs.
#include <catch2/catch.hpp>

#include <random>

#include "ir/schedule.h"
#include "ir/value_index.h"
#include "ir/module_tree.h"
#include "ir/verifier.h"
#include "passes/grouped_query_attention.h"
#include "passes/map_as_loop.h"
#include "passes/pass_manager.h"
#include "passes/unroll_map.h"
#include "pt2/package.h"
#include "pt2/program_json.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;
using ir::Json;

namespace {

std::vector<std::string> order(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes) out.push_back(n->label());
  return out;
}

ir::Program parse(const Json& j) { return pt2::parseProgram(j); }

Json withParam(Json j, const std::string& placeholder, const std::string& fqn) {
  Json& g = j["graph_module"]["graph"];
  g["inputs"].insert(g["inputs"].begin(), Json{{"as_tensor", {{"name", placeholder}}}});
  g["tensor_values"][placeholder] = g["tensor_values"]["x"];
  auto& specs = j["graph_module"]["signature"]["input_specs"];
  specs.insert(specs.begin(), Json{{"parameter", {{"arg", {{"name", placeholder}}}, {"parameter_name", fqn}}}});
  return j;
}

Json withConstant(Json j, const std::string& placeholder, const std::string& fqn) {
  Json& g = j["graph_module"]["graph"];
  g["inputs"].insert(g["inputs"].begin(), Json{{"as_tensor", {{"name", placeholder}}}});
  g["tensor_values"][placeholder] = g["tensor_values"]["x"];
  auto& specs = j["graph_module"]["signature"]["input_specs"];
  specs.insert(specs.begin(),
               Json{{"tensor_constant", {{"arg", {{"name", placeholder}}}, {"tensor_constant_name", fqn}}}});
  return j;
}

}  // namespace

TEST_CASE("topological order is stable and fixes out-of-order graphs", "[passes]") {
  // c uses b, b uses a; d is independent and listed first.
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.relu.default", {"x"}, "d"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"b", "d"}, "out"),
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "a"),
      test::tensorNode("torch.ops.aten.exp.default", {"a"}, "b"),
  })));
  CHECK_THROWS_WITH(ir::verify(p), Catch::Contains("node 'out' (aten.add.Tensor) uses value 'b' before its definition"));
  ir::verify(p, ir::VerifyOptions{false});
  passes::PassManager pm;
  pm.add(passes::topologicalOrderPass());
  pm.setVerifyEach(true);
  pm.run(p);
  CHECK(order(p.graph) == std::vector<std::string>{"d", "a", "b", "out"});
  ir::verify(p);
}

// The verifier answers a clean graph in one walk and re-checks any other
// with the full two walks: the error and its precedence are those of the
// full check (every node's outputs before any node's inputs).
TEST_CASE("the verifier reports the full check's first error", "[passes]") {
  auto program = [] {
    return parse(test::programJson(Json::array({
        test::tensorNode("torch.ops.aten.neg.default", {"x"}, "a"),
        test::tensorNode("torch.ops.aten.exp.default", {"a"}, "b"),
        test::tensorNode("torch.ops.aten.add.Tensor", {"b", "a"}, "out"),
    })));
  };
  auto input = [](ir::Program& p, size_t node, size_t k) -> ir::Value*& {
    return p.graph.nodes[node]->inputs[k].arg.refs[0].value;
  };
  {
    ir::Program p = program();
    ir::verify(p);
    input(p, 1, 0) = p.graph.find("b");
    CHECK_THROWS_WITH(ir::verify(p), "graph: node 'b' (aten.exp.default) uses value 'b' before its definition by "
                                     "node 'b' (aten.exp.default)");
    CHECK_THROWS_WITH(ir::verify(p, ir::VerifyOptions{false}), "graph: node 'b' (aten.exp.default) uses its own output 'b'");
  }
  {
    ir::Program p = program();
    input(p, 0, 0) = p.graph.find("b");
    CHECK_THROWS_WITH(ir::verify(p), "graph: node 'a' (aten.neg.default) uses value 'b' before its definition by "
                                     "node 'b' (aten.exp.default)");
    ir::verify(p, ir::VerifyOptions{false});  // a cycle, but every value is defined
  }
  {
    ir::Program p = program();
    p.graph.find("b")->producer = p.graph.nodes[2].get();
    CHECK_THROWS_WITH(ir::verify(p), "graph: node 'b' (aten.exp.default) outputs value 'b' produced elsewhere");
  }
  {
    // Node 0 uses a later value and node 2 claims node 1's output: the
    // output walk comes first.
    ir::Program p = program();
    input(p, 0, 0) = p.graph.find("out");
    p.graph.find("b")->producer = p.graph.nodes[2].get();
    CHECK_THROWS_WITH(ir::verify(p), "graph: node 'b' (aten.exp.default) outputs value 'b' produced elsewhere");
  }
  {
    ir::Program p = program();
    ir::Value* stray = p.graph.define("stray", ir::ValueKind::Tensor, nullptr);
    input(p, 2, 1) = stray;
    CHECK_THROWS_WITH(ir::verify(p), "graph: node 'out' (aten.add.Tensor) uses value 'stray', which nothing defines");
  }
  {
    ir::Program other = program();
    ir::Program p = program();
    input(p, 1, 0) = other.graph.find("a");
    CHECK_THROWS_WITH(ir::verify(p), "graph: node 'b' (aten.exp.default) refers to value 'a' of another graph scope");
  }
}

// numberValues skips the walk when nothing changed `values`; every change
// must make the next call number again.
TEST_CASE("value numbers follow every change to a graph's values", "[passes]") {
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "a"),
      test::tensorNode("torch.ops.aten.exp.default", {"a"}, "b"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"b", "a"}, "out"),
  })));
  ir::Graph& g = p.graph;
  auto numbered = [&] {
    g.numberValues();
    for (size_t i = 0; i < g.values.size(); ++i)
      if (g.values[i]->number != i || !g.owns(g.values[i].get())) return false;
    return true;
  };
  CHECK(numbered());
  ir::Value* stray = g.define("stray", ir::ValueKind::Tensor, nullptr);
  CHECK(numbered());
  CHECK(g.values.back().get() == stray);
  CHECK(g.define("stray", ir::ValueKind::Tensor, nullptr) == nullptr);  // taken: nothing added
  CHECK(numbered());
  // "stray" and "b" go: "b"'s producer is dropped with it.
  g.nodes[2]->inputs[0].arg.refs[0].value = g.find("a");
  g.nodes.erase(g.nodes.begin() + 1);
  g.pruneValues();
  CHECK(g.find("b") == nullptr);
  CHECK(g.find("stray") == nullptr);
  CHECK(numbered());
  ir::verify(p);
  // Flags for another number of values are a caller's bug, not a pruning.
  const size_t before = g.values.size();
  CHECK_THROWS_WITH(g.pruneValues(std::vector<char>(before + 1, 1)),
                    "graph: pruneValues: flags for " + std::to_string(before + 1) + " values, the graph has " +
                        std::to_string(before));
  CHECK(g.values.size() == before);
}

TEST_CASE("node edges list each use, users ascending, and tell an ordered graph", "[passes]") {
  // out uses b twice and d; b uses a; d is listed first and independent.
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.relu.default", {"x"}, "d"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"b", "b"}, "e"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"e", "d"}, "out"),
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "a"),
      test::tensorNode("torch.ops.aten.exp.default", {"a"}, "b"),
  })));
  ir::NodeEdges e = ir::nodeEdges(p.graph);
  auto list = [](std::span<const size_t> s) { return std::vector<size_t>(s.begin(), s.end()); };
  CHECK(list(e.depsOf(0)).empty());
  CHECK(list(e.depsOf(1)) == std::vector<size_t>{4, 4});  // once per use
  CHECK(list(e.depsOf(2)) == std::vector<size_t>{1, 0});  // input order
  CHECK(list(e.depsOf(4)) == std::vector<size_t>{3});
  CHECK(list(e.usersOf(0)) == std::vector<size_t>{2});
  CHECK(list(e.usersOf(4)) == std::vector<size_t>{1, 1});
  CHECK(list(e.usersOf(2)).empty());
  CHECK_FALSE(ir::isTopological(e));
  auto ready = ir::earliestFirst();
  auto sorted = ir::listSchedule(e, *ready, nullptr);
  CHECK(sorted == std::vector<size_t>{0, 3, 4, 1, 2});
  ir::applyOrder(p.graph, sorted);
  CHECK(ir::isTopological(ir::nodeEdges(p.graph)));
  // A cycle: listed first, a node on it named.
  ir::Program c = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.neg.default", {"q"}, "p"),
      test::tensorNode("torch.ops.aten.neg.default", {"p"}, "q"),
      test::tensorNode("torch.ops.aten.neg.default", {"q"}, "out"),
  })));
  size_t onCycle = 99;
  auto none = ir::earliestFirst();
  CHECK(ir::listSchedule(ir::nodeEdges(c.graph), *none, &onCycle).empty());
  CHECK(onCycle == 0);
}

TEST_CASE("the verifier refuses a graph argument on a node that is not a higher-order op", "[passes]") {
  // Passes skip the arguments of other nodes when they look for bodies, so a
  // body there would be invisible to them: the verifier must catch it.
  ir::Program p = parse(test::programJson(Json::array({test::tensorNode("torch.ops.aten.neg.default", {"x"}, "out")})));
  ir::Argument body;
  body.tag = ir::ArgTag::Graph;
  body.rare().name = "body_0";
  body.rare().graph = std::make_shared<ir::Graph>();
  p.graph.nodes[0]->inputs.push_back({"body", body, std::nullopt});
  CHECK(p.graph.nodes[0]->subgraphs().empty());
  CHECK_THROWS_WITH(ir::verify(p), Catch::Contains("node 'out' (aten.neg.default) has a graph argument 'body'") &&
                                       Catch::Contains("but is not a higher-order op"));
}

TEST_CASE("a node's higher-order flag is taken from its target once; a rewrite after that is caught", "[passes]") {
  ir::Program p = parse(test::programJson(Json::array({test::tensorNode("torch.ops.aten.neg.default", {"x"}, "out")})));
  ir::Node& n = *p.graph.nodes[0];
  CHECK_FALSE(n.isHigherOrder());
  ir::Node copy = n;  // a copy carries the flag with the target it came from
  CHECK_FALSE(copy.isHigherOrder());
  ir::verify(p);
  ir::Node fresh;
  fresh.target = "torch.ops.higher_order.cond";
  CHECK(fresh.isHigherOrder());
  // Passes write the targets of nodes they have just made; rewriting one that
  // was already asked about would leave walks blind to (or looking for) bodies.
  n.target = "torch.ops.higher_order.wrap_with_set_grad_enabled";
  CHECK_FALSE(n.isHigherOrder());
  try {
    ir::verify(p);
    FAIL("verify accepted a stale higher-order flag");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Internal);
    CHECK_THAT(e.what(), Catch::Contains("node 'out'") && Catch::Contains("target rewritten after isHigherOrder() cached it") &&
                             Catch::Contains("(now torch.ops.higher_order.wrap_with_set_grad_enabled)"));
  }
}

TEST_CASE("a cycle is reported with a node on it", "[passes]") {
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.neg.default", {"b"}, "a"),
      test::tensorNode("torch.ops.aten.neg.default", {"a"}, "b"),
      test::tensorNode("torch.ops.aten.add.Tensor", {"b", "x"}, "out"),
  })));
  passes::PassManager pm;
  pm.add(passes::topologicalOrderPass());
  try {
    pm.run(p);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    CHECK_THAT(std::string(e.what()), Catch::Contains("cycle through node 'a'"));
  }
}

TEST_CASE("dead code goes, side effects and used parameters stay", "[passes]") {
  Json j = test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.mul.Tensor", {"x", "p_w"}, "used"),
      test::tensorNode("torch.ops.aten.relu.default", {"x"}, "dead"),
      test::tensorNode("torch.ops.aten.exp.default", {"dead"}, "dead2"),
      test::tensorNode("torch.ops.aten.add_.Tensor", {"x", "x"}, "inplace"),
      test::tensorNode("torch.ops.aten._assert_tensor_metadata.default", {"x"}, "check"),
      test::tensorNode("torch.ops.mylib.custom.default", {"x"}, "custom"),
      test::tensorNode("torch.ops.aten.bernoulli.p", {"x"}, "rng"),
      test::tensorNode("torch.ops.aten.mul.Tensor", {"x", "p_unused"}, "dead3"),
      test::tensorNode("torch.ops.aten.neg.default", {"used"}, "out"),
  }));
  j = withParam(withParam(j, "p_w", "w"), "p_unused", "unused");
  ir::Program p = parse(j);
  passes::PassManager pm;
  pm.add(passes::deadCodePass());
  pm.setVerifyEach(true);
  pm.run(p);
  CHECK(order(p.graph) == std::vector<std::string>{"used", "inplace", "check", "custom", "rng", "out"});
  REQUIRE(p.inputSpecs.size() == 2);
  CHECK(p.inputSpecs[0].target == "w");
  CHECK(p.graph.find("p_unused") == nullptr);
  CHECK(p.graph.find("dead") == nullptr);
  CHECK(p.graph.find("dead2") == nullptr);
  for (const char* kept : {"x", "p_w", "used", "inplace", "rng", "out"}) {
    CAPTURE(kept);
    REQUIRE(p.graph.find(kept) != nullptr);
    CHECK(p.graph.find(kept)->name == kept);
  }
  // A dropped name can be defined again.
  CHECK(p.graph.define("dead", ir::ValueKind::Tensor, nullptr) != nullptr);
  CHECK(p.graph.define("used", ir::ValueKind::Tensor, nullptr) == nullptr);
}

TEST_CASE("the value index finds, refuses duplicates, and erases through growth", "[passes]") {
  std::vector<std::unique_ptr<ir::Value>> values;
  auto make = [&](const std::string& name) {
    values.push_back(std::make_unique<ir::Value>());
    values.back()->name = name;
    return values.back().get();
  };
  ir::ValueIndex index;
  std::vector<ir::Value*> all;
  for (int i = 0; i < 1000; ++i) {
    all.push_back(make("v" + std::to_string(i)));
    REQUIRE(index.insert(all.back()));
  }
  CHECK_FALSE(index.insert(make("v7")));  // a second value of a taken name
  // Erase every other one; lookups of the rest still pass the erased slots.
  for (int i = 0; i < 1000; i += 2) index.erase(all[static_cast<size_t>(i)]);
  index.erase(make("never-indexed"));
  CHECK(index.size() == 500);
  for (int i = 0; i < 1000; ++i) {
    CAPTURE(i);
    CHECK(index.find("v" + std::to_string(i)) == (i % 2 ? all[static_cast<size_t>(i)] : nullptr));
  }
  // Erased names take new values; many inserts after erasing grow or clear the table.
  for (int i = 0; i < 1000; i += 2) REQUIRE(index.insert(make("v" + std::to_string(i))));
  for (int i = 1000; i < 5000; ++i) REQUIRE(index.insert(make("v" + std::to_string(i))));
  CHECK(index.size() == 5000);
  for (int i = 0; i < 5000; ++i) {
    CAPTURE(i);
    ir::Value* v = index.find("v" + std::to_string(i));
    REQUIRE(v != nullptr);
    CHECK(v->name == "v" + std::to_string(i));
  }
  CHECK(index.find("v5000") == nullptr);
  // Erase and reinsert in a loop: tombstones never fill the table.
  for (int round = 0; round < 20000; ++round) {
    ir::Value* v = index.find("v1");
    index.erase(v);
    REQUIRE(index.find("v1") == nullptr);
    REQUIRE(index.insert(make("v1")));
  }
  CHECK(index.size() == 5000);
}

TEST_CASE("duplicate attribute reads merge into one placeholder", "[passes]") {
  Json j = test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.mul.Tensor", {"x", "p_w"}, "a"),
      test::tensorNode("torch.ops.aten.mul.Tensor", {"a", "p_w_again"}, "out"),
  }));
  j = withParam(withParam(j, "p_w_again", "shared.weight"), "p_w", "shared.weight");
  ir::Program p = parse(j);
  passes::PassManager pm;
  pm.add(passes::dedupeAttributesPass());
  pm.setVerifyEach(true);
  pm.run(p);
  REQUIRE(p.inputSpecs.size() == 2);
  CHECK(p.graph.inputs.size() == 2);
  const ir::Node& out = *p.graph.nodes[1];
  CHECK(out.inputs[1].arg.value()->name == "p_w");
}

TEST_CASE("equal lifted constants merge, compared only within their key", "[passes]") {
  // c0..c5 hold two distinct contents, A (c0, c2, c4) and B (c1, c3, c5), as
  // the constant key tells; same() is asked only about constants of one key.
  Json nodes = Json::array();
  std::string prev = "x";
  for (int k = 0; k < 6; ++k) {
    std::string out = "a" + std::to_string(k);
    nodes.push_back(test::tensorNode("torch.ops.aten.add.Tensor", {prev, "c" + std::to_string(k)}, out));
    prev = out;
  }
  nodes.back()["outputs"][0]["as_tensor"]["name"] = "out";
  Json j = test::programJson(nodes);
  for (int k = 5; k >= 0; --k) j = withConstant(j, "c" + std::to_string(k), "lifted_" + std::to_string(k));
  auto content = [](const std::string& fqn) { return (fqn.back() - '0') % 2 == 0 ? "A" : "B"; };
  std::vector<std::pair<std::string, std::string>> asked;
  auto same = [&](const std::string& a, const std::string& b) {
    asked.emplace_back(a, b);
    return std::string(content(a)) == content(b);
  };
  SECTION("with a key") {
    ir::Program p = parse(j);
    passes::PassManager pm;
    pm.add(passes::dedupeAttributesPass(same, [&](const std::string& fqn) { return std::string(content(fqn)); }));
    pm.setVerifyEach(true);
    pm.run(p);
    REQUIRE(p.inputSpecs.size() == 3);  // lifted_0, lifted_1, x
    CHECK(p.inputSpecs[0].target == "lifted_0");
    CHECK(p.inputSpecs[1].target == "lifted_1");
    for (const auto& [a, b] : asked) CHECK(std::string(content(a)) == content(b));
    CHECK(asked.size() == 4);  // each later constant once, against its key's one kept constant
    CHECK(p.graph.nodes[4]->inputs[1].arg.value()->name == "c0");
    CHECK(p.graph.nodes[5]->inputs[1].arg.value()->name == "c1");
  }
  SECTION("without one, every kept constant is a candidate (same result)") {
    ir::Program p = parse(j);
    passes::PassManager pm;
    pm.add(passes::dedupeAttributesPass(same));
    pm.run(p);
    REQUIRE(p.inputSpecs.size() == 3);
    CHECK(asked.size() == 1 + 2 + 2 + 2 + 2);  // c1 against c0; then each against both kept
  }
}

TEST_CASE("placeholders follow the signature order", "[passes]") {
  Json j = withParam(test::programJson(Json::array({
                         test::tensorNode("torch.ops.aten.mul.Tensor", {"x", "p_w"}, "out")})),
                     "p_w", "w");
  auto& inputs = j["graph_module"]["graph"]["inputs"];
  std::swap(inputs[0], inputs[1]);  // x first, the parameter second: disagrees with the specs
  ir::Program p = parse(j);
  CHECK_THROWS_WITH(ir::verify(p), Catch::Contains("does not match placeholder 0"));
  passes::PassManager pm;
  pm.add(passes::placeholderOrderPass());
  pm.setVerifyEach(true);
  pm.run(p);
  CHECK(p.graph.inputs[0].value()->name == "p_w");
  CHECK(p.graph.inputs[1].value()->name == "x");
  // In signature order already: nothing to do, and nothing done.
  CHECK_FALSE(passes::placeholderOrderPass().run(p));
  CHECK(p.graph.inputs[0].value()->name == "p_w");
  // A spec whose value no placeholder defines is refused on either path.
  p.inputSpecs[1].arg = ir::Argument::tensor(p.graph.nodes[0]->outputs[0].value());
  CHECK_THROWS_WITH(passes::placeholderOrderPass().run(p),
                    Catch::Contains("signature.input_specs[1]") && Catch::Contains("'out' has no placeholder"));
}

TEST_CASE("module-contiguous order groups a module's nodes where data flow allows", "[passes]") {
  const std::string A = "L__self__,,M;L__self___a,a,Block", B = "L__self__,,M;L__self___b,b,Block";
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "a1", A),
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "b1", B),
      test::tensorNode("torch.ops.aten.exp.default", {"a1"}, "a2", A),
      test::tensorNode("torch.ops.aten.exp.default", {"b1"}, "b2", B),
      test::tensorNode("torch.ops.aten.add.Tensor", {"a2", "b2"}, "out"),
  })));
  passes::PassManager pm;
  pm.add(passes::moduleContiguousPass());
  pm.setVerifyEach(true);
  pm.run(p);
  CHECK(order(p.graph) == std::vector<std::string>{"a1", "a2", "b1", "b2", "out"});
}

TEST_CASE("the module tree counts nodes per module by frame ids and parameter bytes by FQN", "[passes]") {
  // layers.0 is called twice (two call sites, one path); "a.b" is never a
  // frame of its own, only the parent of one and of a parameter.
  const std::string L0 = "L__self__,,M;L__self___layers_0,layers.0,Block",
                    L0again = "L__self__,,M;L__self___layers_0_1,layers.0,",
                    L0attn = L0 + ";L__self___layers_0_attn,layers.0.attn,Attn",
                    AB = "L__self__,,M;L__self___a_b_c,a.b.c,Leaf";
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "n1", L0),
      test::tensorNode("torch.ops.aten.neg.default", {"n1"}, "n2", L0attn),
      test::tensorNode("torch.ops.aten.neg.default", {"n2"}, "n3", L0),
      test::tensorNode("torch.ops.aten.neg.default", {"n3"}, "n4", AB),
      test::tensorNode("torch.ops.aten.neg.default", {"n4"}, "n5", L0again),
      test::tensorNode("torch.ops.aten.neg.default", {"n5"}, "out"),
  })));
  ir::ModuleTree t = ir::ModuleTree::build(p, {{"layers.0.attn.w", 40}, {"a.b.w", 8}, {"top", 2}});
  auto info = [&](const std::string& path) {
    const ir::ModuleInfo* m = t.find(path);
    REQUIRE(m);
    return *m;
  };
  CHECK(info("").ownNodes == 1);
  CHECK(info("").totalNodes == 6);
  CHECK(info("").ownParamBytes == 2);
  CHECK(info("").totalParamBytes == 50);
  CHECK(info("layers").totalNodes == 4);  // a path's ancestors are modules too
  CHECK(info("layers.0").ownNodes == 3);  // both calls
  CHECK(info("layers.0").type == "Block");  // the first frame that names it
  CHECK(info("layers.0").totalParamBytes == 40);
  CHECK(info("layers.0.attn").ownNodes == 1);
  CHECK(info("layers.0.attn").type == "Attn");
  CHECK(info("a.b").ownNodes == 0);
  CHECK(info("a.b").totalNodes == 1);
  CHECK(info("a.b").ownParamBytes == 8);
  CHECK(info("a.b.c").type == "Leaf");
  CHECK(info("").children == std::vector<std::string>{"layers", "a"});  // "top" is a tensor, not a module
  CHECK_FALSE(t.find("layers.1"));
  // A tensor nested past the limit is refused by name.
  std::string deep = "m";
  for (size_t k = 0; k <= ir::ModulePaths::kMaxDepth; ++k) deep += ".m";
  try {
    ir::ModuleTree::build(p, {{deep, 4}});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("module path nested deeper than 256 levels"));
  }
}

TEST_CASE("verification after each pass names the pass that broke the graph", "[passes]") {
  ir::Program p = parse(test::programJson(Json::array({
      test::tensorNode("torch.ops.aten.neg.default", {"x"}, "a"),
      test::tensorNode("torch.ops.aten.neg.default", {"a"}, "out"),
  })));
  passes::PassManager pm;
  pm.add({"broken", [](ir::Program& prog) {
            std::swap(prog.graph.nodes[0], prog.graph.nodes[1]);
            return true;
          }});
  pm.setVerifyEach(true);
  try {
    pm.run(p);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Internal);
    CHECK_THAT(std::string(e.what()), Catch::Contains("pass 'broken'") && Catch::Contains("uses value 'a' before"));
  }
}

TEST_CASE("module-affinity scheduling picks what the quadratic definition picks", "[passes]") {
  // The definition: among ready nodes, most module frames shared with the
  // node placed last, ties to the earliest position. Compared on random DAGs
  // with random (key, path) stacks drawn from a small tree.
  auto shared = [](const ir::Node& a, const ir::Node& b) {
    size_t k = 0;
    const auto &fa = a.frames(), &fb = b.frames();
    while (k < fa.size() && k < fb.size() && fa[k].key == fb[k].key && fa[k].path == fb[k].path)
      ++k;
    return k;
  };
  struct Reference final : ir::ReadyQueue {
    explicit Reference(const ir::Graph& g, decltype(shared) s) : g(g), s(s) {}
    void push(size_t n) override { ready.push_back(n); }
    bool empty() const override { return ready.empty(); }
    size_t pop(size_t lastIndex) override {
      const ir::Node* last = lastIndex == kNone ? nullptr : g.nodes[lastIndex].get();
      size_t best = 0;
      for (size_t k = 1; k < ready.size(); ++k) {
        size_t dc = last ? s(*last, *g.nodes[ready[k]]) : 0, db = last ? s(*last, *g.nodes[ready[best]]) : 0;
        if (dc > db || (dc == db && ready[k] < ready[best])) best = k;
      }
      size_t n = ready[best];
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
      return n;
    }
    const ir::Graph& g;
    decltype(shared) s;
    std::vector<size_t> ready;
  };
  std::mt19937 rng(7);
  int kept = 0;
  for (int trial = 0; trial < 200; ++trial) {
    size_t n = 1 + rng() % 40;
    Json nodes = Json::array();
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::string> ins{"x"};
      for (size_t k = 0; k < 2 && i > 0; ++k)
        if (rng() % 2) ins.push_back("v" + std::to_string(rng() % i));
      std::string stack, path;
      for (size_t d = 0, depth = rng() % 4; d < depth; ++d) {
        path += (path.empty() ? "" : ".") + std::string(1, static_cast<char>('a' + rng() % 3));
        // The same path under two call keys (a module called twice) is a different frame.
        std::string key = "k" + path + (rng() % 5 == 0 ? "@2" : "");
        stack += (stack.empty() ? "" : ";") + key + "," + path + ",T";
      }
      Json node = test::tensorNode("torch.ops.aten.add.Tensor", {ins.front(), ins.back()}, "v" + std::to_string(i), stack);
      nodes.push_back(node);
    }
    Json j = test::programJson(nodes, {"x"}, "v" + std::to_string(n - 1));
    ir::Program p = parse(j);
    Reference ref(p.graph, shared);
    auto fast = ir::moduleAffinity(p.graph);
    INFO("trial " << trial);
    const std::vector<size_t> scheduled = ir::listSchedule(p.graph, ref, nullptr);
    CHECK(ir::listSchedule(p.graph, *fast, nullptr) == scheduled);
    // Once more on the order just found, mostly module-contiguous: there the
    // policy says it keeps a topological order, and listSchedule returns the
    // order without scheduling. The definition must agree.
    ir::applyOrder(p.graph, scheduled);
    Reference again(p.graph, shared);
    auto fastAgain = ir::moduleAffinity(p.graph);
    kept += fastAgain->keepsTopologicalOrder();
    CHECK(ir::listSchedule(p.graph, *fastAgain, nullptr) == ir::listSchedule(p.graph, again, nullptr));
  }
  CHECK(kept >= 20);  // the identity path ran (41 of 200 trials)
}

// A program of one map over x's rows (x: [length, 4], the length an int or
// an expression), each row times w: y = map(row * w). The body's result
// has `resultSize` elements (4, unless a test says it is symbolic).
static ir::Program mapProgram(const Json& lengthDim, const Json& resultSize = Json{{"as_int", 4}}) {
  auto meta = [](Json sizes, Json strides) {
    return Json{{"dtype", 7}, {"sizes", sizes}, {"requires_grad", false}, {"device", {{"type", "cpu"}, {"index", nullptr}}},
                {"strides", strides}, {"storage_offset", {{"as_int", 0}}}, {"layout", 7}};
  };
  Json row = meta(Json::array({Json{{"as_int", 4}}}), Json::array({Json{{"as_int", 1}}}));
  Json result = meta(Json::array({resultSize}), Json::array({Json{{"as_int", 1}}}));
  Json body{{"inputs", Json::array({Json{{"as_tensor", {{"name", "xi"}}}}, Json{{"as_tensor", {{"name", "w"}}}}})},
            {"outputs", Json::array({Json{{"as_tensor", {{"name", "yi"}}}}})},
            {"nodes", Json::array({test::tensorNode("torch.ops.aten.mul.Tensor", {"xi", "w"}, "yi")})},
            {"tensor_values", {{"xi", row}, {"w", row}, {"yi", result}}},
            {"sym_int_values", Json::object()}, {"sym_bool_values", Json::object()},
            {"sym_float_values", Json::object()}, {"custom_obj_values", Json::object()},
            {"is_single_tensor_return", false}};
  auto named = [](const char* name, Json arg) { return Json{{"name", name}, {"arg", arg}, {"kind", 1}}; };
  Json graphArg = Json{{"as_graph", Json{{"name", "body_graph_0"}, {"graph", body}}}};
  Json xs = Json{{"as_tensors", Json::array({Json{{"name", "x"}}})}};
  Json extra = Json{{"as_tensors", Json::array({Json{{"name", "w"}}})}};
  Json map = Json::object();
  map["target"] = "torch.ops.higher_order.map_impl";
  map["inputs"] = Json::array({named("f", graphArg), named("xs", xs), named("pos_args", extra)});
  map["outputs"] = Json::array({Json{{"as_tensor", Json{{"name", "y"}}}}});
  map["metadata"] = Json::object();
  map["is_hop_single_tensor_return"] = nullptr;
  map["name"] = "map_impl";
  Json j = test::programJson(Json::array({map}), {"x", "w"}, "y");
  auto& tv = j["graph_module"]["graph"]["tensor_values"];
  tv["x"] = meta(Json::array({lengthDim, Json{{"as_int", 4}}}), Json::array({Json{{"as_int", 4}}, Json{{"as_int", 1}}}));
  tv["w"] = row;
  tv["y"] = tv["x"];
  return pt2::parseProgram(j);
}

TEST_CASE("a map of static length unrolls into select, the body per slice, and stack; others stay", "[passes]") {
  ir::Program p = mapProgram(Json{{"as_int", 3}});
  CHECK(passes::unrollStaticMaps(p) == 1);
  std::vector<std::string> targets;
  for (const auto& n : p.graph.nodes) targets.push_back(n->opName());
  CHECK(targets == std::vector<std::string>{"aten.select.int", "aten.mul.Tensor", "aten.select.int", "aten.mul.Tensor",
                                            "aten.select.int", "aten.mul.Tensor", "aten.stack.default"});
  // The second slice starts 4 elements in, a row of x.
  const ir::Value* slice1 = p.graph.nodes[2]->outputs[0].value();
  REQUIRE(slice1->meta);
  CHECK(slice1->meta->sizes.size() == 1);
  CHECK(slice1->meta->storageOffset.value == 4);
  // stack defines the map's own result, which the program returns.
  CHECK(p.graph.find("y")->producer == p.graph.nodes.back().get());
  CHECK_NOTHROW(ir::verify(p));

  ir::Program dynamic = mapProgram(Json{{"as_expr", {{"expr_str", "Symbol('s0', positive=True, integer=True)"}, {"hint", {{"as_int", 3}}}}}});
  CHECK(passes::unrollStaticMaps(dynamic) == 0);
  CHECK(dynamic.graph.nodes.front()->opName() == "higher_order.map_impl");
  ir::Program longMap = mapProgram(Json{{"as_int", passes::kMaxUnroll + 1}});
  CHECK(passes::unrollStaticMaps(longMap) == 0);
}

TEST_CASE("a map over a symbolic or long length becomes a while_loop that writes row i of its result", "[passes]") {
  const Json s0{{"as_expr", {{"expr_str", "Symbol('s0', positive=True, integer=True)"}, {"hint", {{"as_int", 3}}}}}};
  auto targets = [](const ir::Graph& g) {
    std::vector<std::string> t;
    for (const auto& n : g.nodes) t.push_back(n->opName());
    return t;
  };
  ir::Program p = mapProgram(s0);
  CHECK(passes::mapsAsLoops(p) == 1);
  CHECK(targets(p.graph) == std::vector<std::string>{"aten.sym_size.int", "aten.zeros.default", "aten.zeros.default",
                                                     "higher_order.while_loop"});
  const ir::Node& loop = *p.graph.nodes.back();
  // The loop defines the map's own result (its second output, after the
  // counter), which the program returns.
  REQUIRE(loop.outputs.size() == 2);
  CHECK(loop.outputs[1].value() == p.graph.find("y"));
  CHECK(p.graph.find("y")->producer == &loop);
  // Carried: the counter and the result's rows, [s0, 4] like y; additional:
  // the mapped input and w, tensors only (NativeRT refuses a SymInt input).
  REQUIRE(loop.inputs.size() == 4);
  REQUIRE(loop.inputs[2].arg.refs.size() == 2);
  const ir::Value* rows = loop.inputs[2].arg.refs[1].value;
  REQUIRE(rows->meta);
  CHECK(rows->meta->shapeStr() == "[s0, 4]");
  CHECK(rows->meta->strides[0].value == 4);
  std::vector<std::string> extra;
  for (const auto& r : loop.inputs[3].arg.refs) extra.push_back(r.value->name);
  CHECK(extra == std::vector<std::string>{"x", "w"});
  // The buffer's length is x's, read by sym_size.
  const ir::Value* length = p.graph.nodes[0]->outputs[0].value();
  CHECK(length->kind == ir::ValueKind::SymInt);
  CHECK(p.graph.nodes[2]->inputs[0].arg.refs[0].value == length);
  const ir::Graph* cond = loop.inputs[0].arg.body();
  const ir::Graph* body = loop.inputs[1].arg.body();
  REQUIRE(cond);
  REQUIRE(body);
  CHECK(targets(*cond) == std::vector<std::string>{"aten.sym_size.int", "aten.lt.Scalar"});
  CHECK(targets(*body) == std::vector<std::string>{"aten.reshape.default", "aten.index_select.default",
                                                   "aten.squeeze.dim", "aten.mul.Tensor", "aten.add.Tensor",
                                                   "aten.unsqueeze.default", "aten.index_copy.default"});
  for (const ir::Graph* g : {cond, body})
    for (const auto& in : g->inputs) CHECK(in.value()->kind == ir::ValueKind::Tensor);
  CHECK(body->outputs.size() == 2);
  CHECK_NOTHROW(ir::verify(p));
  // Written and read back: the schema's JSON holds it whole.
  const Json written = pt2::serializeProgram(p);
  ir::Program again = pt2::parseProgram(written);
  CHECK(pt2::serializeProgram(again) == written);
  CHECK_NOTHROW(ir::verify(again));

  // A static length over the unrolling limit: literals, no sym_size.
  ir::Program longMap = mapProgram(Json{{"as_int", passes::kMaxUnroll + 1}});
  CHECK(passes::mapsAsLoops(longMap) == 1);
  CHECK(targets(longMap.graph) == std::vector<std::string>{"aten.zeros.default", "aten.zeros.default",
                                                           "higher_order.while_loop"});
  CHECK(targets(*longMap.graph.nodes.back()->inputs[0].arg.body()) == std::vector<std::string>{"aten.lt.Scalar"});
  CHECK(longMap.graph.nodes.back()->inputs[0].arg.body()->nodes[0]->inputs[1].arg.asInt() == passes::kMaxUnroll + 1);
  CHECK_NOTHROW(ir::verify(longMap));

  // A result of symbolic size has no rows to allocate: the map stays.
  ir::Program symbolicResult = mapProgram(s0, s0);
  CHECK(passes::mapsAsLoops(symbolicResult) == 0);
  CHECK(symbolicResult.graph.nodes.front()->opName() == "higher_order.map_impl");
}

// Attention over a key and value widened from 2 heads to 4 the way
// transformers' repeat_kv does (unsqueeze at 2, expand, reshape), the batch
// symbolic. `unsqueezeDim` 1 would tile the heads instead; `widenValue`
// false leaves the value narrow; `dropout` adds dropout_p.
struct GqaCase {
  int64_t unsqueezeDim = 2;
  bool widenValue = true;
  double dropout = 0.0;
  bool keepWideKey = false;  // the widened key is also an output
};

static ir::Program gqaProgram(const GqaCase& c) {
  const Json b{{"as_expr", {{"expr_str", "Symbol('s0', positive=True, integer=True)"}, {"hint", {{"as_int", 3}}}}}};
  auto i = [](int64_t v) { return Json{{"as_int", v}}; };
  auto meta = [](Json sizes) {
    Json strides = Json::array();
    for (size_t k = 0; k < sizes.size(); ++k) strides.push_back(Json{{"as_int", 1}});
    return Json{{"dtype", 7}, {"sizes", sizes}, {"requires_grad", false}, {"device", {{"type", "cpu"}, {"index", nullptr}}},
                {"strides", strides}, {"storage_offset", {{"as_int", 0}}}, {"layout", 7}};
  };
  auto named = [](const char* name, Json arg, int kind = 1) { return Json{{"name", name}, {"arg", arg}, {"kind", kind}}; };
  auto tensor = [](const std::string& n) { return Json{{"as_tensor", {{"name", n}}}}; };
  auto node = [&](const char* target, Json inputs, const std::string& out) {
    return Json{{"target", target}, {"inputs", inputs}, {"outputs", Json::array({tensor(out)})},
                {"metadata", Json::object()}, {"is_hop_single_tensor_return", nullptr}, {"name", out}};
  };
  Json nodes = Json::array();
  auto widen = [&](const std::string& x) {
    nodes.push_back(node("torch.ops.aten.unsqueeze.default",
                         Json::array({named("self", tensor(x)), named("dim", i(c.unsqueezeDim))}), x + "_u"));
    nodes.push_back(node("torch.ops.aten.expand.default",
                         Json::array({named("self", tensor(x + "_u")),
                                      named("size", Json{{"as_sym_ints", Json::array({i(-1), i(2), i(2), i(5), i(8)})}})}),
                         x + "_e"));
    nodes.push_back(node("torch.ops.aten.reshape.default",
                         Json::array({named("self", tensor(x + "_e")),
                                      named("shape", Json{{"as_ints", Json::array({-1, 4, 5, 8})}})}),
                         x + "_w"));
    return x + "_w";
  };
  const std::string key = widen("k"), value = c.widenValue ? widen("v") : "v";
  Json sdpa = Json::array({named("query", tensor("q")), named("key", tensor(key)), named("value", tensor(value))});
  if (c.dropout != 0.0) sdpa.push_back(named("dropout_p", Json{{"as_float", c.dropout}}));
  sdpa.push_back(named("scale", Json{{"as_float", 0.25}}, 2));
  nodes.push_back(node("torch.ops.aten.scaled_dot_product_attention.default", sdpa, "out"));
  Json j = test::programJson(nodes, {"q", "k", "v"}, "out");
  auto& tv = j["graph_module"]["graph"]["tensor_values"];
  tv["q"] = tv["out"] = meta(Json::array({b, i(4), i(5), i(8)}));
  for (const char* x : {"k", "v"}) {
    const std::string s = x;
    tv[s] = meta(Json::array({b, i(2), i(5), i(8)}));
    // Dimension 1 tiles: the expand's groups then sit before the heads.
    tv[s + "_u"] = c.unsqueezeDim == 2 ? meta(Json::array({b, i(2), i(1), i(5), i(8)}))
                                       : meta(Json::array({b, i(1), i(2), i(5), i(8)}));
    tv[s + "_e"] = meta(Json::array({b, i(2), i(2), i(5), i(8)}));
    tv[s + "_w"] = meta(Json::array({b, i(4), i(5), i(8)}));
  }
  if (c.keepWideKey) {
    j["graph_module"]["graph"]["outputs"].push_back(tensor("k_w"));
    j["graph_module"]["signature"]["output_specs"].push_back(Json{{"user_output", {{"arg", tensor("k_w")}}}});
  }
  return pt2::parseProgram(j);
}

TEST_CASE("attention reads the narrow key and value with enable_gqa; the widening goes", "[passes]") {
  auto normalize = [](ir::Program& p) {
    passes::PassManager pm;
    passes::addNormalizePipeline(pm, {.verifyEach = true});
    pm.run(p);
  };
  auto input = [](const ir::Node& n, const std::string& name) -> const ir::Argument* {
    for (const auto& in : n.inputs)
      if (in.name == name) return &in.arg;
    return nullptr;
  };
  ir::Program p = gqaProgram({});
  normalize(p);
  REQUIRE(p.graph.nodes.size() == 1);
  const ir::Node& sdpa = *p.graph.nodes[0];
  CHECK(sdpa.target == passes::kAttentionTarget);
  CHECK(input(sdpa, "key")->value()->name == "k");
  CHECK(input(sdpa, "value")->value()->name == "v");
  REQUIRE(input(sdpa, "enable_gqa"));
  CHECK(input(sdpa, "enable_gqa")->asBool());
  CHECK(sdpa.inputs.back().kind == 2);  // keyword-only in the schema
  CHECK(input(sdpa, "scale")->asFloat() == 0.25);
  const Json written = pt2::serializeProgram(p);
  CHECK(pt2::serializeProgram(pt2::parseProgram(written)) == written);

  // Still read elsewhere, the widening stays; the attention call is narrowed all the same.
  ir::Program kept = gqaProgram({.keepWideKey = true});
  normalize(kept);
  CHECK(kept.graph.nodes.size() == 4);
  CHECK(input(*kept.graph.nodes.back(), "key")->value()->name == "k");

  // Each of these computes something enable_gqa does not, or draws its
  // random mask elsewhere: left as exported.
  for (GqaCase c : {GqaCase{.unsqueezeDim = 1}, GqaCase{.widenValue = false}, GqaCase{.dropout = 0.1}}) {
    CAPTURE(c.unsqueezeDim, c.widenValue, c.dropout);
    ir::Program q = gqaProgram(c);
    CHECK(passes::useGroupedQueryAttention(q) == 0);
    CHECK(input(*q.graph.nodes.back(), "key")->value()->name == "k_w");
    CHECK_FALSE(input(*q.graph.nodes.back(), "enable_gqa"));
  }
}

TEST_CASE("the GQA fixture's attention calls read its KV caches in place", "[passes]") {
  pt2::Package pkg = pt2::readPackage(test::sourcePath("testdata/generate/qwen2_kv.pt2"));
  size_t widened = 0, layers = 0;
  for (const auto& n : pkg.program.graph.nodes) {
    widened += n->target == "torch.ops.aten.expand.default";
    layers += n->target == passes::kAttentionTarget;
  }
  CHECK(layers == 4);
  CHECK(passes::useGroupedQueryAttention(pkg.program) == layers);
  for (const auto& n : pkg.program.graph.nodes) {
    if (n->target != passes::kAttentionTarget) continue;
    for (const auto& in : n->inputs)
      if (in.name == "key" || in.name == "value") CHECK(in.arg.value()->producer->target == "torch.ops.aten.index_copy_.default");
  }
  passes::PassManager pm;
  pm.add(passes::deadCodePass());
  pm.setVerifyEach(true);
  pm.run(pkg.program);
  size_t left = 0;
  for (const auto& n : pkg.program.graph.nodes) left += n->target == "torch.ops.aten.expand.default";
  CHECK(left == widened - 2 * layers);  // the key's and the value's of each layer
}
