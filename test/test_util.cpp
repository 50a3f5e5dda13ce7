#include "test_util.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace pipecut::test {

namespace fs = std::filesystem;
using ir::Json;

std::string sourcePath(const std::string& rel) { return std::string(PIPECUT_SOURCE_DIR) + "/" + rel; }

// Each kernel level the numeric tests run under (ATEN_CPU_CAPABILITY) gets its
// own output tree, so the two runs never share split directories.
std::string outPath(const std::string& rel) {
  fs::path root(PIPECUT_TEST_OUT);
  if (const char* level = std::getenv("ATEN_CPU_CAPABILITY"); level && *level) root /= std::string("kernels-") + level;
  fs::path p = root / rel;
  fs::create_directories(p.parent_path());
  return p.string();
}

std::vector<std::string> fixtureNames() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(sourcePath("testdata/models")))
    if (e.path().extension() == ".pt2") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string fixture(const std::string& name) { return sourcePath("testdata/models/" + name + ".pt2"); }

RunResult runPipecut(const std::string& args) {
  RunResult r;
  std::string cmd = std::string(PIPECUT_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = pclose(p);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool fileExists(const std::string& path) { return fs::exists(path); }

Json tensorNode(const std::string& target, const std::vector<std::string>& ins, const std::string& out,
                const std::string& moduleStack) {
  Json inputs = Json::array();
  const char* names[] = {"self", "other", "third", "fourth"};
  for (size_t i = 0; i < ins.size(); ++i)
    inputs.push_back(Json{{"name", names[i]}, {"arg", Json{{"as_tensor", Json{{"name", ins[i]}}}}}, {"kind", 1}});
  Json md = Json::object();
  if (!moduleStack.empty()) md["nn_module_stack"] = moduleStack;
  return Json{{"target", target}, {"inputs", inputs},
              {"outputs", Json::array({Json{{"as_tensor", Json{{"name", out}}}}})},
              {"metadata", md}, {"is_hop_single_tensor_return", nullptr}, {"name", out}};
}

Json programJson(const Json& nodes, const std::vector<std::string>& inputs, const std::string& output) {
  Json meta = Json{{"dtype", 7}, {"sizes", Json::array({Json{{"as_int", 2}}})}, {"requires_grad", false},
                   {"device", Json{{"type", "cpu"}, {"index", nullptr}}},
                   {"strides", Json::array({Json{{"as_int", 1}}})}, {"storage_offset", Json{{"as_int", 0}}},
                   {"layout", 7}};
  Json g;
  g["inputs"] = Json::array();
  Json specs = Json::array();
  Json tv = Json::object();
  for (const auto& in : inputs) {
    g["inputs"].push_back(Json{{"as_tensor", Json{{"name", in}}}});
    specs.push_back(Json{{"user_input", Json{{"arg", Json{{"as_tensor", Json{{"name", in}}}}}}}});
    tv[in] = meta;
  }
  for (const auto& n : nodes)
    for (const auto& o : n["outputs"])
      if (o.contains("as_tensor")) tv[o["as_tensor"]["name"].get<std::string>()] = meta;
  g["outputs"] = Json::array({Json{{"as_tensor", Json{{"name", output}}}}});
  g["nodes"] = nodes;
  g["tensor_values"] = tv;
  g["sym_int_values"] = Json::object();
  g["sym_bool_values"] = Json::object();
  g["sym_float_values"] = Json::object();
  g["custom_obj_values"] = Json::object();
  g["is_single_tensor_return"] = false;
  Json sig{{"input_specs", specs},
           {"output_specs", Json::array({Json{{"user_output", Json{{"arg", Json{{"as_tensor", Json{{"name", output}}}}}}}}})}};
  Json gm{{"graph", g}, {"signature", sig}, {"module_call_graph", Json::array()}, {"metadata", Json::object()},
          {"treespec_namedtuple_fields", Json::object()}};
  return Json{{"graph_module", gm}, {"opset_version", Json{{"aten", 10}}}, {"range_constraints", Json::object()},
              {"schema_version", Json{{"major", 8}, {"minor", 17}}}, {"verifiers", Json::array({"TRAINING"})},
              {"torch_version", "2.11.0"}, {"guards_code", Json::array()}};
}

}  // namespace pipecut::test
