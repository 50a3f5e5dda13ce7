// pipecut compile --train: per stage, the joint forward/backward graph of its
// .pt2 built in the user's Python (scripts/train_compile.py), partitioned
// into F, I, W and B (I and W in one; only F and B for a stage no gradient
// leaves) and compiled
// by AOTInductor, one package per program. Program files sit beside the
// stage's other files as "<stem>.train-<device>.<P>.pt2", recorded as format
// "aoti-train"; an inference package for the same device stays as it was.
//
// Content-addressed as inference packages are (driver/compile.h): a stage's
// key covers its .pt2's SHA-256, the device, the torch, the options, the
// compile script, the recompute policy and which inputs take gradients.
// The programs of a stage are kept, taken from the cache or compiled
// together.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>

#include "driver/compile.h"
#include "driver/compile_support.h"
#include "driver/train_compile_script.h"
#include "emit/libtorch_version.h"
#include "manifest/directory.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/parallel.h"
#include "support/progress.h"
#include "support/sha256.h"
#include "support/staging.h"
#include "support/zip_directory.h"

namespace pipecut::driver {

namespace train_programs {

using namespace compiling;

// What one stage needs.
struct Unit {
  const Stage* stage = nullptr;
  const StageFile* source = nullptr;
  std::vector<std::string> programs;          // "F", "I", "W", "B" or "F", "B"
  std::map<std::string, std::string> names;   // program -> file name
  std::map<std::string, const StageFile*> previous;  // the manifest's, for this device
  Json gradInputs = Json::array();
  std::string key;
  enum class From { Keep, Cache, Compile } from = From::Compile;
  double seconds = 0;                         // Compile: this run's; Cache: the record's
};

// Inputs that take a gradient: floating values from other stages, the
// trainer's rule (runtime/train/transport.cpp, TrainEdge::carriesGradient).
Json gradInputsOf(const Stage& st) {
  Json out = Json::array();
  for (uint32_t k = 0; k < st.inputs.size(); ++k) {
    if (st.inputs[k].source.kind != ValueSource::Kind::StageOutput) continue;
    // at::isFloatingType's set, by torch's names (the driver is torch-free).
    const std::string& dtype = st.inputs[k].tensor.dtype;
    if (dtype.starts_with("float") || dtype == "bfloat16") out.push_back(k);
  }
  return out;
}

// "stage_000.pt2" -> "stage_000.train-cpu.F.pt2".
std::string programName(const std::string& pt2, const std::string& device, const std::string& program) {
  std::string stem = pt2.size() > 4 && pt2.ends_with(".pt2") ? pt2.substr(0, pt2.size() - 4) : pt2;
  return stem + ".train-" + device + "." + program + ".pt2";
}

bool isTrainPackage(const StageFile& f, const std::string& device) {
  return f.format == "aoti-train" && f.compiled && f.compiled->device == device;
}

// Training examples have the exported (static) sizes: training data are
// batched at the exported size (pipecut-run --train refuses symbolic ones).
Json staticInputs(const Manifest& m, const Stage& st) {
  Json inputs = exampleInputs(m, st);
  for (auto& in : inputs) in.erase("dims");
  return inputs;
}

}  // namespace train_programs

CompileResult compileTraining(const CompileRequest& r) {
  using namespace train_programs;
  const auto start = std::chrono::steady_clock::now();
  if (r.device != "cpu" && r.device != "cuda")
    throw Error(ErrorKind::Usage, "", "--device", "'" + r.device + "': expected cpu or cuda");
  if (!r.cpuMatmul.empty())
    throw Error(ErrorKind::Usage, "", "--cpu-matmul", "chooses the linear kernels of inference packages; training programs run Inductor's own");
  if (r.recompute.empty()) throw Error(ErrorKind::Usage, "", "--recompute", "expected none, all or a regular expression");
  if (r.recompute != "none" && r.recompute != "all") {
    try {
      std::regex check(r.recompute);
    } catch (const std::regex_error& e) {
      throw Error(ErrorKind::Usage, "", "--recompute", "'" + r.recompute + "' is not a regular expression: " + e.what());
    }
  }
  const SplitDirectory split = openSplitDirectory(r.dir);
  const Manifest& m = split.manifest;
  const support::Destination dst = splitRewrite(r.dir);
  if (m.outputs.size() != 1 || !m.outputs[0].tensor.shape.empty())
    throw Error(ErrorKind::InvalidInput, r.dir, "manifest outputs",
                "--train compiles a program whose single output is a scalar loss (as pipecut-run --train trains)");

  const Cache cache = openCache(r);
  // Every tensor is an input of the programs (the optimizer updates them):
  // the packages hold no weights, and nothing folds them.
  Json config = r.device == "cpu" ? Json{{"cpp.dynamic_threads", true}} : Json{{"aot_inductor.embed_kernel_binary", true}};
  if (!r.inductorConfig.empty()) {
    const Json given = givenInductorConfig(r.inductorConfig);
    if (settingOn(given, "freezing"))
      throw Error(ErrorKind::Usage, "", "--inductor-config", "freezing folds weights into the package; training programs take them as inputs");
    for (auto& [k, v] : given.items()) config[k] = v;
  }
  const std::string options = config.dump();
  const std::string scriptSha256 = sha256Bytes(kTrainCompileScript, sizeof(kTrainCompileScript) - 1);

  std::vector<Unit> units(m.stages.size());
  std::vector<std::string> sourceSha(m.stages.size()), sourceDirectory(m.stages.size());
  for (const Stage& st : m.stages) {
    Unit& u = units[st.index];
    u.stage = &st;
    u.source = &pt2Of(r.dir, st);
    u.gradInputs = gradInputsOf(st);
    // B beside I and W: the schedules that run W right after I (all but
    // zb1p) run one program, which hands nothing from I to W (~11% quicker
    // on the bench's loss stage than I then W).
    u.programs = u.gradInputs.empty() ? std::vector<std::string>{"F", "B"} : std::vector<std::string>{"F", "I", "W", "B"};
    for (const std::string& p : u.programs) u.names[p] = programName(u.source->path, r.device, p);
    for (const StageFile& f : st.files)
      if (isTrainPackage(f, r.device)) u.previous[f.compiled->program] = &f;
  }
  support::parallelFor(units.size(), 0, [&](size_t s) {
    const StageFile& f = *units[s].source;
    const std::string path = (fs::path(r.dir) / f.path).string();
    sourceSha[s] = !f.sha256.empty() ? f.sha256 : digestFile(Digest::Sha256, path);
    sourceDirectory[s] = support::zipDirectorySha256(path);
  });
  auto keyOf = [&](size_t s, const std::string& torchVersion) {
    const std::string k = Json{{"mode", "train"},           {"source_sha256", sourceSha[s]}, {"device", r.device},
                               {"torch", torchVersion},     {"options", options},           {"script_sha256", scriptSha256},
                               {"recompute", r.recompute},  {"grad_inputs", units[s].gradInputs}}.dump();
    return sha256Bytes(k.data(), k.size());
  };
  // Kept: every program of the stage already there, of this key, its bytes unchanged.
  bool allKept = true;
  for (Unit& u : units) {
    bool keep = u.previous.size() == u.programs.size();
    for (const std::string& p : u.programs) {
      auto it = u.previous.find(p);
      if (!keep || it == u.previous.end()) {
        keep = false;
        break;
      }
      const StageFile& f = *it->second;
      keep = emit::publicVersion(f.compiled->torchVersion) == emit::libtorchVersion() && f.path == u.names[p] &&
             f.compiled->key == keyOf(u.stage->index, f.compiled->torchVersion) &&
             fileMatches(fs::path(r.dir) / f.path, f.bytes, f.xxh3_128);
    }
    if (keep) {
      u.from = Unit::From::Keep;
      u.key = u.previous.at("F")->compiled->key;
    }
    allKept = allKept && keep;
  }
  Python py;
  if (!allKept) {
    py = findPython(r);
    probe(py, r.device);
  }
  for (Unit& u : units) {
    if (u.from == Unit::From::Keep) continue;
    u.key = keyOf(u.stage->index, py.torchVersion);
    bool cached = true;
    double seconds = 0;
    for (const std::string& p : u.programs) {
      auto rec = cache.find(u.key + "." + p);
      cached = cached && rec.has_value();
      if (rec) seconds += rec->value("compile_seconds", 0.0);
    }
    if (cached) {
      u.from = Unit::From::Cache;
      u.seconds = seconds;
    }
  }
  std::vector<Unit*> compiles;
  for (Unit& u : units)
    if (u.from == Unit::From::Compile) compiles.push_back(&u);

  CompileResult result;
  result.python = py.path;
  result.torchVersion = py.torchVersion;
  result.stages.resize(units.size());
  Manifest out = m;
  std::atomic<size_t> done{0};
  support::ProgressLine line(r.progress && !compiles.empty(), [&](double elapsed) {
    return "pipecut: compiled the training programs of " + std::to_string(done.load()) + " of " +
           std::to_string(compiles.size()) + " stages for " + r.device + ", " + minutes(elapsed);
  });
  support::writeStaged(dst, [&](const fs::path& tmp) {
    for (const Stage& st : m.stages)
      for (const StageFile& f : st.files)
        if (!isTrainPackage(f, r.device)) linkOrCopy(fs::path(r.dir) / f.path, tmp / f.path);
    for (const Unit& u : units)
      for (const std::string& p : u.programs) {
        if (u.from == Unit::From::Keep) linkOrCopy(fs::path(r.dir) / u.names.at(p), tmp / u.names.at(p));
        else if (u.from == Unit::From::Cache) linkOrCopy(cache.dir / (u.key + "." + p + ".pt2"), tmp / u.names.at(p));
      }
    ScratchDir scratch;
    const std::string inductorCache = inductorCacheDir(cache, scratch);
    std::vector<uint64_t> parameterBytes;
    for (const Unit* u : compiles) parameterBytes.push_back(u->stage->parameterBytes);
    const unsigned jobs = r.jobs ? r.jobs : defaultJobs(parameterBytes, false);
    std::mutex logMutex;
    support::parallelFor(compiles.size(), jobs, [&](size_t i) {
      Unit& u = *compiles[i];
      const uint32_t s = u.stage->index;
      ScratchDir sourceCopy;
      const fs::path source = compileSource(fs::absolute(fs::path(r.dir) / u.source->path), sourceCopy);
      Json outputs = Json::object();
      for (const std::string& p : u.programs) outputs[p] = fs::absolute(tmp / u.names.at(p)).string();
      Json req = {{"mode", "compile_train"},
                  {"source", source.string()},
                  {"device", r.device},
                  {"options", Json::parse(options)},
                  {"inputs", staticInputs(m, *u.stage)},
                  {"grad_inputs", u.gradInputs},
                  {"recompute", r.recompute},
                  {"outputs", outputs}};
      const ScriptRun run = runScript(py, kTrainCompileScript, req, {{"TORCHINDUCTOR_CACHE_DIR", inductorCache}});
      if (r.verbose) {
        std::lock_guard<std::mutex> lock(logMutex);
        std::cerr << "pipecut: stage " << s << " compiler output:\n" << run.process.output << std::flush;
      }
      bool complete = run.process.exitCode == 0 && run.answer.is_object();
      std::error_code ec;
      for (const std::string& p : u.programs) complete = complete && fs::is_regular_file(tmp / u.names.at(p), ec);
      if (!complete)
        throw Error(ErrorKind::InvalidInput, (fs::path(r.dir) / u.source->path).string(), "stage " + std::to_string(s),
                    "cannot compile its training programs for " + r.device + ": " + run.failure("without every program") +
                        (r.verbose ? "" : " (--verbose shows the compiler's output)"));
      u.seconds = run.answer.value("seconds", 0.0);
      ++done;
    });

    bool sha256 = true;
    for (const Stage& st : m.stages)
      for (const StageFile& f : st.files) sha256 = sha256 && !f.sha256.empty();
    support::parallelFor(units.size(), 0, [&](size_t s) {
      const Unit& u = units[s];
      CompiledStage& c = result.stages[s];
      c.stage = static_cast<uint32_t>(s);
      Stage& st = out.stages[s];
      std::erase_if(st.files, [&](const StageFile& f) { return isTrainPackage(f, r.device); });
      for (const std::string& p : u.programs) {
        StageFile f;
        f.path = u.names.at(p);
        f.format = "aoti-train";
        const fs::path path = tmp / f.path;
        f.bytes = fs::file_size(path);
        f.xxh3_128 = u.from == Unit::From::Keep ? u.previous.at(p)->xxh3_128 : digestFile(Digest::Xxh3_128, path.string());
        if (sha256) f.sha256 = digestFile(Digest::Sha256, path.string());
        f.compiled = u.from == Unit::From::Keep
                         ? *u.previous.at(p)->compiled
                         : CompiledPackage{r.device, py.torchVersion, u.source->path, u.source->xxh3_128, options, u.key};
        f.compiled->sourceDirectorySha256 = sourceDirectory[s];
        f.compiled->program = p;
        f.compiled->recompute = r.recompute;
        st.files.push_back(f);
        c.programs.push_back(f.path);
        c.bytes += f.bytes;
        if (u.from == Unit::From::Compile)
          cache.put(u.key + "." + p, path,
                    {{"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}, {"torch_version", py.torchVersion}, {"device", r.device},
                     {"compile_seconds", p == "F" ? u.seconds : 0.0}});
      }
      c.path = c.programs.front();
      c.key = u.key;
      c.how = u.from == Unit::From::Keep ? "kept" : u.from == Unit::From::Cache ? "cached" : "compiled";
      c.compileSeconds = u.from == Unit::From::Keep ? 0 : u.seconds;
    });
    result.manifestSha256 = writeManifests(tmp.string(), out);
  });
  line.stop();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pipecut::driver
