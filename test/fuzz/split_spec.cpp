// split spec text -> parseSplitSpec, then assignStages against a small fixed
// program with nested modules and a no_grad region (built here the way
// test/test_util.cpp builds program JSON), checking what carving relies on.
#include "ir/module_tree.h"
#include "ir/verifier.h"
#include "partition/assign.h"
#include "partition/split_spec.h"
#include "passes/pass_manager.h"
#include "pt2/program_json.h"
#include "targets.h"

namespace pipecut::fuzz {

namespace {

using ir::Json;

Json tensorMeta() {
  return Json{{"dtype", 7}, {"sizes", Json::array({Json{{"as_int", 2}}})}, {"requires_grad", false},
              {"device", Json{{"type", "cpu"}, {"index", nullptr}}}, {"strides", Json::array({Json{{"as_int", 1}}})},
              {"storage_offset", Json{{"as_int", 0}}}, {"layout", 7}};
}

Json tensorArg(const std::string& name) { return Json{{"as_tensor", Json{{"name", name}}}}; }

// nn_module_stack for a module path: the root frame, then one frame per prefix.
std::string moduleStack(const std::string& path) {
  std::string s = "L__self__,,__main__.Model";
  if (path.empty()) return s;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string prefix = path.substr(0, dot);
    std::string key = "L__self___" + prefix;
    for (char& c : key)
      if (c == '.') c = '_';
    s += ";" + key + "," + prefix + ",torch.nn.Module";
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return s;
}

Json node(const std::string& target, const std::vector<Json>& args, const std::string& out, const std::string& module) {
  Json inputs = Json::array();
  const char* names[] = {"self", "other"};
  for (size_t i = 0; i < args.size(); ++i)
    inputs.push_back(Json{{"name", i < 2 ? names[i] : ""}, {"arg", args[i]}, {"kind", 1}});
  return Json{{"target", target}, {"inputs", inputs}, {"outputs", Json::array({tensorArg(out)})},
              {"metadata", Json{{"nn_module_stack", moduleStack(module)}}}, {"is_hop_single_tensor_return", nullptr},
              {"name", out}};
}

Json graph(const Json& inputs, const Json& nodes, const Json& outputs) {
  Json tv = Json::object();
  for (const auto& in : inputs) tv[in["as_tensor"]["name"].get<std::string>()] = tensorMeta();
  for (const auto& n : nodes)
    for (const auto& o : n["outputs"]) tv[o["as_tensor"]["name"].get<std::string>()] = tensorMeta();
  return Json{{"inputs", inputs},
              {"outputs", outputs},
              {"nodes", nodes},
              {"tensor_values", tv},
              {"sym_int_values", Json::object()},
              {"sym_bool_values", Json::object()},
              {"sym_float_values", Json::object()},
              {"custom_obj_values", Json::object()},
              {"is_single_tensor_return", false}};
}

// x -> enc.0 -> enc.1 -> no_grad region in rot (body: rot.inner, rot) ->
// dec.0 (skip from enc.1) -> dec.1.attn -> head -> root add with x.
Json fixedProgramJson() {
  Json body = graph(Json::array({tensorArg("bx")}),
                    Json::array({node("torch.ops.aten.exp.default", {tensorArg("bx")}, "r0", "rot.inner"),
                                 node("torch.ops.aten.sin.default", {tensorArg("r0")}, "r1", "rot")}),
                    Json::array({tensorArg("r1")}));
  Json hop = node("torch.ops.higher_order.wrap_with_set_grad_enabled",
                  {Json{{"as_bool", false}}, Json{{"as_graph", Json{{"name", "submod_1"}, {"graph", body}}}}, tensorArg("a1")},
                  "getitem", "rot");
  hop["is_hop_single_tensor_return"] = false;
  hop["name"] = "wrap_with_set_grad_enabled";
  Json nodes = Json::array({
      node("torch.ops.aten.relu.default", {tensorArg("x")}, "a0", "enc.0"),
      node("torch.ops.aten.neg.default", {tensorArg("a0")}, "a1", "enc.1"),
      hop,
      node("torch.ops.aten.add.Tensor", {tensorArg("a1"), tensorArg("getitem")}, "d0", "dec.0"),
      node("torch.ops.aten.mul.Tensor", {tensorArg("d0"), tensorArg("d0")}, "d1", "dec.1.attn"),
      node("torch.ops.aten.relu.default", {tensorArg("d1")}, "h", "head"),
      node("torch.ops.aten.add.Tensor", {tensorArg("h"), tensorArg("x")}, "out", ""),
  });
  Json sig{{"input_specs", Json::array({Json{{"user_input", Json{{"arg", tensorArg("x")}}}}})},
           {"output_specs", Json::array({Json{{"user_output", Json{{"arg", tensorArg("out")}}}}})}};
  Json gm{{"graph", graph(Json::array({tensorArg("x")}), nodes, Json::array({tensorArg("out")}))},
          {"signature", sig},
          {"module_call_graph", Json::array()},
          {"metadata", Json::object()},
          {"treespec_namedtuple_fields", Json::object()}};
  return Json{{"graph_module", gm}, {"opset_version", Json{{"aten", 10}}}, {"range_constraints", Json::object()},
              {"schema_version", Json{{"major", pt2::kSchemaMajor}, {"minor", 17}}},
              {"verifiers", Json::array({"TRAINING"})}, {"torch_version", "2.11.0"}, {"guards_code", Json::array()}};
}

struct Fixed {
  ir::Program program;
  ir::ModuleTree tree;
};

const Fixed& fixed() {
  static const Fixed f = [] {
    Fixed f;
    mustSucceed("building the fixed program", [&] {
      f.program = pt2::parseProgram(fixedProgramJson());
      passes::PassManager pm;
      passes::NormalizeOptions opts;
      opts.moduleContiguous = true;
      opts.verifyEach = true;
      passes::addNormalizePipeline(pm, opts);
      pm.run(f.program);
      ir::verify(f.program);
      f.tree = ir::ModuleTree::build(f.program, {});
    });
    return f;
  }();
  return f;
}

}  // namespace

int split_spec(const uint8_t* data, size_t size) {
  const Fixed& f = fixed();
  partition::SplitSpec spec;
  if (!refusesOrRuns("parseSplitSpec", [&] { spec = partition::parseSplitSpec(std::string(asText(data, size)), "spec.json"); }))
    return 0;
  // The canonical form goes into the manifest: it must be a spec that reads the same.
  mustSucceed("parseSplitSpec(canonical)", [&] {
    partition::SplitSpec again = partition::parseSplitSpec(spec.canonical, "canonical");
    if (again.canonical != spec.canonical || again.kind != spec.kind) finding("the canonical spec reads differently");
  });
  partition::Assignment a;
  if (!refusesOrRuns("assignStages", [&] { a = partition::assignStages(f.program, spec, f.tree); })) return 0;

  // What carving relies on: every node in a stage, stages non-empty, data flowing forward.
  const auto& nodes = f.program.graph.nodes;
  if (a.numStages < 1) finding("assignStages returned " + std::to_string(a.numStages) + " stages");
  if (a.stageOf.size() != nodes.size()) finding("assignStages assigned " + std::to_string(a.stageOf.size()) + " of " +
                                                std::to_string(nodes.size()) + " nodes");
  std::vector<size_t> count(static_cast<size_t>(a.numStages), 0);
  for (int s : a.stageOf) {
    if (s < 0 || s >= a.numStages) finding("a node assigned to stage " + std::to_string(s));
    count[static_cast<size_t>(s)]++;
  }
  for (size_t s = 0; s < count.size(); ++s)
    if (!count[s]) finding("stage " + std::to_string(s) + " is empty");
  ir::NodeEdges edges = ir::nodeEdges(f.program.graph);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (size_t d : edges.depsOf(i))
      if (a.stageOf[d] > a.stageOf[i]) finding("data flows backward into node '" + nodes[i]->label() + "'");
  return 0;
}

}  // namespace pipecut::fuzz
