// The JSON <-> IR layer: every Argument variant survives a round trip, and
// malformed programs are refused with messages that name the spot.
#include <catch2/catch.hpp>
#include <cmath>

#include "ir/verifier.h"
#include "pt2/program_json.h"
#include "support/error.h"
#include "test_util.h"

using namespace pipecut;
using ir::Json;

namespace {

Json named(const char* name, Json arg) { return Json{{"name", name}, {"arg", std::move(arg)}, {"kind", 2}}; }

// A node that takes one argument of every variant the schema has.
Json everyVariantProgram() {
  Json body = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"bx"}, "by")}),
                                {"bx"}, "by")["graph_module"]["graph"];
  Json args = Json::array({
      named("none", {{"as_none", true}}),
      named("tensor", {{"as_tensor", {{"name", "x"}}}}),
      named("tensors", {{"as_tensors", Json::array({Json{{"name", "x"}}, Json{{"name", "x"}}})}}),
      named("int", {{"as_int", -3}}),
      named("ints", {{"as_ints", Json::array({1, 2, 3})}}),
      named("float", {{"as_float", 0.125}}),
      named("float_inf", {{"as_float", "Infinity"}}),
      named("floats", {{"as_floats", Json::array({1.5, "-Infinity", "NaN"})}}),
      named("string", {{"as_string", "mean"}}),
      named("strings", {{"as_strings", Json::array({"a", "b"})}}),
      named("sym_int", {{"as_sym_int", {{"as_name", "s"}}}}),
      named("sym_ints", {{"as_sym_ints", Json::array({Json{{"as_name", "s"}}, Json{{"as_int", 4}}})}}),
      named("scalar_type", {{"as_scalar_type", 7}}),
      named("memory_format", {{"as_memory_format", 1}}),
      named("layout", {{"as_layout", 7}}),
      named("device", {{"as_device", {{"type", "cuda"}, {"index", 1}}}}),
      named("bool", {{"as_bool", true}}),
      named("bools", {{"as_bools", Json::array({true, false})}}),
      named("sym_bool", {{"as_sym_bool", {{"as_name", "b"}}}}),
      named("sym_bools", {{"as_sym_bools", Json::array({Json{{"as_name", "b"}}, Json{{"as_bool", false}}})}}),
      named("optional_tensors", {{"as_optional_tensors", Json::array({Json{{"as_tensor", {{"name", "x"}}}}, Json{{"as_none", true}}})}}),
      named("graph", {{"as_graph", {{"name", "body_0"}, {"graph", body}}}}),
      named("custom_obj", {{"as_custom_obj", {{"name", "obj"}, {"class_fqn", "__torch__.torch.classes.my.Obj"}}}}),
      named("operator", {{"as_operator", "torch.ops.aten.add.Tensor"}}),
      named("sym_float", {{"as_sym_float", {{"as_name", "f"}}}}),
      named("sym_floats", {{"as_sym_floats", Json::array({Json{{"as_name", "f"}}, Json{{"as_float", 2.5}}})}}),
      named("optional_tensor", {{"as_optional_tensor", {{"as_none", true}}}}),
      named("complex", {{"as_complex", {{"real", 1.0}, {"imag", -2.0}}}}),
      named("nested_tensors", {{"as_nested_tensors", Json::array({Json::array({Json{{"name", "x"}}}), Json::array()})}}),
      named("int_lists", {{"as_int_lists", Json::array({Json::array({1, 2}), Json::array({3})})}}),
      named("string_to_argument", {{"as_string_to_argument", {{"k", {{"as_tensor", {{"name", "x"}}}}}, {"n", {{"as_int", 1}}}}}}),
      named("float_lists", {{"as_float_lists", Json::array({Json::array({1.5}), Json::array({"Infinity"})})}}),
  });
  // A higher-order op: the only kind of node that may carry a graph argument.
  Json node{{"target", "torch.ops.higher_order.my_everything"}, {"inputs", args},
            {"outputs", Json::array({Json{{"as_tensor", {{"name", "out"}}}}, Json{{"as_none", true}},
                                     Json{{"as_sym_int", {{"as_name", "s2"}}}}})},
            {"metadata", {{"nn_module_stack", "L__self__,,M;L__self___a,a,torch.nn.Linear"}, {"stack_trace", "x"}}},
            {"is_hop_single_tensor_return", nullptr}, {"name", "out"}};
  Json p = test::programJson(Json::array({node}), {"x"}, "out");
  Json& g = p["graph_module"]["graph"];
  g["inputs"].push_back(Json{{"as_sym_int", {{"as_name", "s"}}}});
  g["inputs"].push_back(Json{{"as_sym_bool", {{"as_name", "b"}}}});
  g["inputs"].push_back(Json{{"as_sym_float", {{"as_name", "f"}}}});
  g["inputs"].push_back(Json{{"as_custom_obj", {{"name", "obj"}, {"class_fqn", "__torch__.torch.classes.my.Obj"}}}});
  g["sym_int_values"] = {{"s", {{"as_expr", {{"expr_str", "Symbol('s', integer=True)"}, {"hint", {{"as_int", 4}}}}}}},
                         {"s2", {{"as_int", 4}}}};
  g["sym_bool_values"] = {{"b", {{"as_bool", true}}}};
  g["sym_float_values"] = {{"f", {{"as_float", 1.0}}}};
  g["custom_obj_values"] = {{"obj", {{"name", "obj"}, {"class_fqn", "__torch__.torch.classes.my.Obj"}}}};
  auto& specs = p["graph_module"]["signature"]["input_specs"];
  specs.push_back(Json{{"user_input", {{"arg", {{"as_sym_int", {{"as_name", "s"}}}}}}}});
  specs.push_back(Json{{"user_input", {{"arg", {{"as_sym_bool", {{"as_name", "b"}}}}}}}});
  specs.push_back(Json{{"user_input", {{"arg", {{"as_sym_float", {{"as_name", "f"}}}}}}}});
  specs.push_back(Json{{"custom_obj", {{"arg", {{"name", "obj"}, {"class_fqn", "__torch__.torch.classes.my.Obj"}}},
                                       {"custom_obj_name", "obj"}}}});
  return p;
}

std::string errorOf(const Json& j) {
  try {
    pt2::parseProgram(j);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::InvalidInput);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("every Argument variant survives read and write unchanged", "[json]") {
  Json original = everyVariantProgram();
  ir::Program p = pt2::parseProgram(original);
  ir::verify(p);
  CHECK(pt2::serializeProgram(p) == original);

  const ir::Node& n = *p.graph.nodes.at(0);
  CHECK(n.inputs.size() == 32);
  CHECK(std::isinf(n.inputs[6].arg.asFloat()));
  REQUIRE(n.inputs[21].arg.tag == ir::ArgTag::Graph);
  CHECK(n.inputs[21].arg.graph()->nodes.size() == 1);
  CHECK(n.frames().size() == 2);
  CHECK(n.modulePath() == "a");
  CHECK(p.graph.find("s")->symMeta["as_expr"]["hint"]["as_int"] == 4);
}

TEST_CASE("unknown fields are accepted and a newer minor version reads", "[json]") {
  Json j = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"x"}, "out")}));
  j["schema_version"]["minor"] = 99;
  j["graph_module"]["graph"]["some_future_field"] = 1;
  j["graph_module"]["graph"]["nodes"][0]["another_new_field"] = "x";
  ir::Program p = pt2::parseProgram(j);
  CHECK(p.schemaMinor == 99);
  CHECK(p.graph.nodes.size() == 1);
}

TEST_CASE("malformed programs are refused with the spot named", "[json]") {
  Json good = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"x"}, "a"),
                                             test::tensorNode("torch.ops.aten.neg.default", {"a"}, "out")}));
  REQUIRE(errorOf(good).empty());

  Json j = good;
  j["schema_version"]["major"] = 9;
  CHECK_THAT(errorOf(j), Catch::Contains("unsupported schema major version 9"));

  j = good;
  j["graph_module"]["graph"]["nodes"][1]["inputs"][0]["arg"]["as_tensor"]["name"] = "ghost";
  CHECK_THAT(errorOf(j), Catch::Contains("node 'out', torch.ops.aten.neg.default") &&
                             Catch::Contains("uses undefined value 'ghost'"));

  j = good;
  j["graph_module"]["graph"]["nodes"][1]["inputs"][0]["arg"] = Json{{"as_banana", 1}};
  CHECK_THAT(errorOf(j), Catch::Contains("unknown Argument variant 'as_banana'") && Catch::Contains("nodes[1]"));

  j = good;
  j["graph_module"]["graph"]["nodes"][1]["outputs"][0]["as_tensor"]["name"] = "a";
  CHECK(errorOf(j) == "graph_module.graph.nodes[1].outputs[0]: value 'a' is defined twice");
  j = good;  // a node output named like a graph input: the output is the second definition
  j["graph_module"]["graph"]["nodes"][0]["outputs"][0]["as_tensor"]["name"] = j["graph_module"]["graph"]["inputs"][0]["as_tensor"]["name"];
  CHECK_THAT(errorOf(j), Catch::StartsWith("graph_module.graph.nodes[0].outputs[0]: value '") && Catch::EndsWith("' is defined twice"));
  j = good;  // two graph inputs of one name
  j["graph_module"]["graph"]["inputs"].push_back(j["graph_module"]["graph"]["inputs"][0]);
  CHECK_THAT(errorOf(j), Catch::StartsWith("graph_module.graph.inputs[") && Catch::EndsWith("' is defined twice"));

  j = good;
  j["graph_module"]["graph"]["nodes"][0]["metadata"]["nn_module_stack"] = "a,b";
  CHECK_THAT(errorOf(j), Catch::Contains("malformed nn_module_stack"));

  j = good;  // a module path nested past the limit: every prefix would be kept, so refused at reading
  std::string deep = "m";
  for (size_t k = 0; k < ir::ModulePaths::kMaxDepth; ++k) deep += ".m";
  j["graph_module"]["graph"]["nodes"][0]["metadata"]["nn_module_stack"] = "L__self__,,M;k," + deep + ",T";
  CHECK(errorOf(j) == "graph_module.graph.nodes[0] (node 'a', torch.ops.aten.relu.default).metadata.nn_module_stack: "
                      "module path nested deeper than 256 levels");
  deep.resize(deep.size() - 2);  // one level less: read
  j["graph_module"]["graph"]["nodes"][0]["metadata"]["nn_module_stack"] = "L__self__,,M;k," + deep + ",T";
  CHECK(errorOf(j).empty());

  j = good;
  j["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = Json{{"as_int", "three"}};
  CHECK_THAT(errorOf(j), Catch::Contains("inputs[0].arg.as_int") && Catch::Contains("expected an integer"));

  j = good;
  j["graph_module"]["signature"]["output_specs"][0]["user_output"]["arg"]["as_tensor"]["name"] = "nope";
  CHECK_THAT(errorOf(j), Catch::Contains("output_specs[0]") && Catch::Contains("undefined value 'nope'"));

  j = good;
  Json body = test::programJson(Json::array({test::tensorNode("torch.ops.aten.relu.default", {"bx"}, "by")}),
                                {"bx"}, "by")["graph_module"]["graph"];
  j["graph_module"]["graph"]["nodes"][1]["inputs"].push_back(
      Json{{"name", "body"}, {"arg", {{"as_graph", {{"name", "body_0"}, {"graph", body}}}}}});
  CHECK_THAT(errorOf(j), Catch::Contains("nodes[1] (node 'out', torch.ops.aten.neg.default).inputs[1].arg: "
                                         "a graph argument is only valid on a higher-order op"));

  j = good;
  j["graph_module"]["graph"]["nodes"][0].erase("target");
  CHECK_THAT(errorOf(j), Catch::Contains("nodes[0]: missing field 'target'"));
}

TEST_CASE("nn_module_stack paths may contain commas inside brackets", "[json]") {
  auto frames = ir::parseModuleStack(
      "L__self__,,M;L__self___mid,mid_block.resnets.slice(1, None, None).0,diffusers.Block;"
      "[\"k\", \"a.b\", \"torch.nn.Linear\"]");
  REQUIRE(frames);
  REQUIRE(frames->size() == 3);
  CHECK((*frames)[0].path.empty());
  CHECK((*frames)[1].path == "mid_block.resnets.slice(1, None, None).0");
  CHECK((*frames)[1].type == "diffusers.Block");
  CHECK((*frames)[2].path == "a.b");
  CHECK_FALSE(ir::parseModuleStack("only,two"));
}

TEST_CASE("module paths are interned once, ancestors first, and calls by key and path", "[json]") {
  ir::ModulePaths t;
  REQUIRE(t.size() == 1);
  CHECK(t.path(ir::ModulePaths::kRoot).empty());
  CHECK(t.parent(ir::ModulePaths::kRoot) == ir::ModulePaths::kNone);
  const uint32_t c = t.intern("a.b.c");
  REQUIRE(t.size() == 4);  // the root, "a", "a.b", "a.b.c"
  const auto a = t.find("a"), ab = t.find("a.b");
  REQUIRE(a);
  REQUIRE(ab);
  CHECK(t.parent(c) == *ab);
  CHECK(t.parent(*ab) == *a);
  CHECK(t.parent(*a) == ir::ModulePaths::kRoot);
  CHECK(*a < *ab);  // ancestors first: a parent's id is smaller
  CHECK(*ab < c);
  CHECK(t.path(c) == "a.b.c");
  CHECK(t.intern("a.b.c") == c);  // once
  const uint32_t d = t.intern("a.b.d");  // shares its ancestors
  CHECK(t.size() == 5);
  CHECK(t.parent(d) == *ab);
  CHECK_FALSE(t.find("a.b.e"));
  // Paths of other spellings keep the dotted-parent rule (the last '.').
  CHECK(t.path(t.parent(t.intern("s.slice(1, None, None).0"))) == "s.slice(1, None, None)");
  CHECK(t.parent(t.intern(".x")) == ir::ModulePaths::kRoot);
  CHECK(t.path(t.parent(t.intern("y."))) == "y");
  // Too deep: refused, nothing added.
  std::string deep = "m";
  for (size_t k = 0; k < ir::ModulePaths::kMaxDepth; ++k) deep += ".m";
  const size_t before = t.size();
  CHECK(t.intern(deep) == ir::ModulePaths::kNone);
  CHECK(t.size() == before);
  // A call is a (key, path) pair.
  const uint32_t k1 = t.internCall("L__self___b", *ab);
  CHECK(t.internCall("L__self___b", *ab) == k1);
  CHECK(t.internCall("L__self___b_1", *ab) != k1);  // the module called again from elsewhere
  CHECK(t.internCall("L__self___b", c) != k1);
  CHECK(t.calls() == 3);
}

TEST_CASE("stacks parsed with one table share their frames' ids", "[json]") {
  auto paths = std::make_shared<ir::ModulePaths>();
  auto s1 = ir::parseModuleStack("L__self__,,M;L__self___l0,layers.0,Block;L__self___l0_attn,layers.0.attn,Attn", paths);
  auto s2 = ir::parseModuleStack("L__self__,,M;L__self___l0,layers.0,Block;L__self___l0_mlp,layers.0.mlp,MLP", paths);
  auto s3 = ir::parseModuleStack("L__self__,,M;L__self___l0_again,layers.0,Block", paths);
  REQUIRE(s1);
  REQUIRE(s2);
  REQUIRE(s3);
  REQUIRE(s1->size() == 3);
  for (const auto& f : *s1) {
    CHECK(f.paths == paths.get());
    CHECK(paths->path(f.module) == f.path);
  }
  CHECK((*s1)[1].module == (*s2)[1].module);
  CHECK((*s1)[1].call == (*s2)[1].call);
  CHECK((*s1)[2].module != (*s2)[2].module);
  CHECK(paths->parent((*s2)[2].module) == (*s2)[1].module);
  CHECK(ir::sharedFrames(*s1, *s2) == 2);
  // The same module from another call site: the same path, another call.
  CHECK((*s3)[1].module == (*s1)[1].module);
  CHECK((*s3)[1].call != (*s1)[1].call);
  CHECK(ir::sharedFrames(*s1, *s3) == 1);
  // The table lives as long as a stack does.
  std::weak_ptr<ir::ModulePaths> alive = paths;
  paths.reset();
  s2.reset();
  s3.reset();
  CHECK_FALSE(alive.expired());
  CHECK((*s1)[2].paths->path((*s1)[2].module) == "layers.0.attn");
  s1.reset();
  CHECK(alive.expired());
  // Another table, other ids: no frame is shared across tables.
  auto t1 = ir::parseModuleStack("L__self__,,M;k,a,A");
  auto t2 = ir::parseModuleStack("L__self__,,M;k,a,A");
  CHECK(ir::sharedFrames(*t1, *t2) == 0);
  // Walks that index by id take the first frame's table and refuse another's.
  ir::FrameTable table;
  CHECK(table.get() == nullptr);
  CHECK(&table.of((*t1)[1]) == (*t1)[1].paths);
  CHECK(&table.of((*t1)[0]) == (*t1)[1].paths);
  try {
    table.of((*t2)[1]);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Internal);
    CHECK(std::string(e.what()).find("module frames of two programs in one graph") != std::string::npos);
  }
}

TEST_CASE("symbolic sizes print as their symbol names", "[json]") {
  ir::SymInt s;
  s.isExpr = true;
  s.expr = "Add(Symbol('s77', positive=True, integer=True), Integer(1))";
  CHECK(s.str() == "Add(s77, 1)");
  s.expr = "Symbol('s0', integer=True)";
  CHECK(s.str() == "s0");
}

TEST_CASE("a graph finds every value by name through growth and pruning", "[json]") {
  ir::Graph g;
  std::vector<ir::Value*> defined;
  for (int i = 0; i < 5000; ++i) defined.push_back(g.define("v" + std::to_string(i), ir::ValueKind::Tensor, nullptr));
  CHECK(g.define("v17", ir::ValueKind::Tensor, nullptr) == nullptr);  // taken: refused, nothing added
  CHECK(g.values.size() == 5000);
  for (int i = 0; i < 5000; ++i) REQUIRE(g.find("v" + std::to_string(i)) == defined[i]);
  CHECK(g.find("v5000") == nullptr);
  CHECK(g.find("") == nullptr);

  // Only graph inputs keep values alive here: keep every third.
  for (int i = 0; i < 5000; i += 3) g.inputs.push_back(ir::Argument::tensor(defined[i]));
  g.pruneValues();
  CHECK(g.values.size() == 1667);
  for (int i = 0; i < 5000; ++i) REQUIRE(g.find("v" + std::to_string(i)) == (i % 3 == 0 ? defined[i] : nullptr));
  CHECK(g.define("v1", ir::ValueKind::Tensor, nullptr) != nullptr);  // a pruned name is free again
  CHECK(g.define("v3", ir::ValueKind::Tensor, nullptr) == nullptr);
}

TEST_CASE("an argument's ref list keeps one ref inline and lists in order", "[json]") {
  ir::Value a, b, c;
  auto values = [](const ir::RefList& l) {
    std::vector<const ir::Value*> out;
    for (const ir::Ref& r : l) out.push_back(r.value);
    return out;
  };
  ir::RefList l;
  CHECK(l.empty());
  CHECK(l.begin() == l.end());
  l.push_back(ir::Ref{&a, nullptr});
  CHECK(l.size() == 1);
  CHECK(l[0].value == &a);
  l.push_back(ir::Ref{nullptr, Json{{"as_int", 3}}});
  l.push_back(ir::Ref{&c, nullptr});
  CHECK(l.size() == 3);
  CHECK(values(l) == std::vector<const ir::Value*>{&a, nullptr, &c});
  CHECK(l.at(1).literal == Json{{"as_int", 3}});
  CHECK_THROWS_AS(l.at(3), std::out_of_range);
  ir::RefList copy = l;  // a copy owns its refs
  copy[0].value = &b;
  CHECK(l[0].value == &a);
  CHECK(values(copy) == std::vector<const ir::Value*>{&b, nullptr, &c});
  ir::RefList moved = std::move(copy);
  CHECK(moved.size() == 3);
  moved = {ir::Ref{&b, nullptr}};
  CHECK(values(moved) == std::vector<const ir::Value*>{&b});
  moved.push_back(ir::Ref{&c, nullptr});
  CHECK(values(moved) == std::vector<const ir::Value*>{&b, &c});
  moved = {};
  CHECK(moved.empty());
  moved.push_back(ir::Ref{&a, nullptr});
  CHECK(values(moved) == std::vector<const ir::Value*>{&a});
  // Through an Argument, as every pass reads it.
  ir::Argument arg = ir::Argument::tensor(&a);
  CHECK(arg.isValue());
  CHECK(arg.value() == &a);
}
