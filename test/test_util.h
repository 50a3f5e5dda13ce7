#pragma once
#include <string>
#include <vector>

#include "ir/ir.h"

namespace pipecut::test {

std::string sourcePath(const std::string& rel);   // under the repo root
std::string outPath(const std::string& rel);      // under the test output dir (created)
std::vector<std::string> fixtureNames();          // testdata/models/*.pt2 stems, sorted
std::string fixture(const std::string& name);     // path of testdata/models/NAME.pt2

struct RunResult {
  int exitCode = -1;
  std::string output;  // stdout and stderr together
};
RunResult runPipecut(const std::string& args);

// A minimal valid program JSON: one user input x, `nodes` in between, output `out`.
ir::Json programJson(const ir::Json& nodes, const std::vector<std::string>& inputs = {"x"},
                     const std::string& output = "out");
ir::Json tensorNode(const std::string& target, const std::vector<std::string>& ins, const std::string& out,
                    const std::string& moduleStack = "");
bool fileExists(const std::string& path);

}  // namespace pipecut::test
