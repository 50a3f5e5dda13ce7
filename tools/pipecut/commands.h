#pragma once
#include <string>

namespace pipecut::cli {

struct InspectOptions {
  std::string model;
  bool json = false;
  std::string dotFile;
};
int runInspect(const InspectOptions& o);

struct NormalizeOptions {
  std::string model;
  std::string output;
  bool moduleContiguous = false;
  bool verifyEach = false;
};
int runNormalize(const NormalizeOptions& o);

}  // namespace pipecut::cli
