#pragma once
#include <string>

#include "weights/options.h"

namespace pipecut::cli {

struct InspectOptions {
  std::string model;
  bool json = false;
  std::string dotFile;
  bool force = false;
  weights::BindOptions weights;
  std::string support;
  bool inlineGradRegions = false;
};
int runInspect(const InspectOptions& o);

struct NormalizeOptions {
  std::string model;
  std::string output;
  bool moduleContiguous = false;
  bool verifyEach = false;
  bool force = false;
};
int runNormalize(const NormalizeOptions& o);

struct SplitOptions {
  std::string model;
  std::string spec;
  int stages = 0;            // with balance: automatic cuts instead of --spec
  std::string balance;       // params, flops, time
  std::string cost;          // --balance time: the profile
  std::string output;
  std::string formats = "torchscript,pt2";
  bool noRecompute = false;
  bool inlineGradRegions = false;
  bool preview = false;
  bool hashSource = false;
  bool stageSha256 = false;
  std::string dotFile;
  bool verifyEach = false;
  bool quiet = false;
  unsigned jobs = 0;
  bool force = false;
  weights::BindOptions weights;
  std::string bindAt = "split";  // split or run
  bool verbose = false;
  std::string support;
  size_t minSupportedNodes = 1;
};
int runSplit(const SplitOptions& o);

struct VerifyOptions {
  std::string dir;
  bool quiet = false;
  bool json = false;
  bool sha256 = false;
  std::string expectManifest;
};
int runVerify(const VerifyOptions& o);

struct CompileOptions {
  std::string dir;
  std::string device = "cpu";
  unsigned jobs = 0;
  std::string python;
  std::string cache;
  bool noCache = false;
  bool quiet = false;
  bool json = false;
  bool verbose = false;
  std::string inductorConfig;
  std::string cpuMatmul;  // "" for the default
  bool train = false;
  std::string recompute = "none";
};
int runCompile(const CompileOptions& o);

struct MergeOptions {
  std::string checkpoint;
  std::string output;
  bool quiet = false;
  bool force = false;
};
int runMerge(const MergeOptions& o);

}  // namespace pipecut::cli
