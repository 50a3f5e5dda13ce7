#include "driver/compile.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "driver/aoti_compile_script.h"
#include "driver/compile_support.h"
#include "driver/support_targets.h"
#include "emit/libtorch_version.h"
#include "ir/clone.h"
#include "manifest/directory.h"
#include "manifest/manifest.h"
#include "passes/pass_manager.h"
#include "passes/unroll_map.h"
#include "pt2/package.h"
#include "runtime/cpu_matmul.h"
#include "support/digest.h"
#include "support/error.h"
#include "support/files.h"
#include "support/host_cpu.h"
#include "support/parallel.h"
#include "support/progress.h"
#include "support/sha256.h"
#include "support/staging.h"
#include "support/subprocess.h"
#include "support/zip_directory.h"

namespace pipecut::driver {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

using namespace compiling;

// The exported ranges of the symbols the stage's inputs use: a stage with
// state is exported again (scripts/aoti_compile.py), with these.
Json symbolRanges(const Manifest& m, const Stage& st) {
  Json out = Json::object();
  for (const StageInput& in : st.inputs)
    for (const DimSpec& d : in.tensor.shape)
      for (const SymbolRange& r : m.symbols)
        if (!d.symbol.empty() && r.symbol == d.symbol) out[d.symbol] = {r.min, r.max ? Json(*r.max) : Json()};
  return out;
}

Json stateOf(const Stage& st) {
  Json out = Json::array();
  for (const StageState& s : st.state) out.push_back({{"name", s.name}, {"initial", s.initial}});
  return out;
}

// "stage_000.pt2" -> "stage_000.aoti-cpu.pt2".
std::string packageName(const std::string& pt2, const std::string& device) {
  std::string stem = pt2.size() > 4 && pt2.ends_with(".pt2") ? pt2.substr(0, pt2.size() - 4) : pt2;
  return stem + ".aoti-" + device + ".pt2";
}

// What one stage needs.
struct StagePlan {
  const Stage* stage = nullptr;
  const StageFile* source = nullptr;
  const StageFile* previous = nullptr;  // the package for this device the manifest lists, if any
  std::string key, name;
  // Skip: a stage the split's --support target (aoti, aoti-cuda) marked
  // unsupported; it runs in another format (pipecut-run --stage-format auto).
  enum class From { Keep, Cache, Compile, Skip } from = From::Compile;
  Json cached;  // From::Cache: the cache's record
};

// The tensors a weightless stage's .pt2 holds no bytes of (the compile
// script compiles around stand-ins and keeps them out of the package).
Json externalOf(const Stage& st) {
  Json out = Json::array();
  for (const ExternalTensor& e : st.external) out.push_back(e.name);
  return out;
}

}  // namespace

unsigned defaultCompileJobs(const std::vector<uint64_t>& parameterBytes, bool weightsInside, uint64_t memAvailable,
                            unsigned cores) {
  uint64_t perJob = 1ull << 30;
  for (uint64_t w : parameterBytes) perJob = std::max<uint64_t>(perJob, (weightsInside ? 3 * w : w + w / 4) + (1ull << 30));
  const uint64_t byMemory = memAvailable ? std::max<uint64_t>(1, memAvailable / perJob) : UINT64_MAX;
  return static_cast<unsigned>(
      std::max<uint64_t>(1, std::min<uint64_t>({std::max(1u, cores), byMemory, parameterBytes.size()})));
}

std::string defaultCompileCache() {
  if (std::string d = env("PIPECUT_CACHE_DIR"); !d.empty()) return d + "/compiled";
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/pipecut/compiled";
  return env("HOME") + "/.cache/pipecut/compiled";
}

CompileResult compileDirectory(const CompileRequest& r) {
  if (r.train) return compileTraining(r);
  const auto start = std::chrono::steady_clock::now();
  if (r.device != "cpu" && r.device != "cuda")
    throw Error(ErrorKind::Usage, "", "--device", "'" + r.device + "': expected cpu or cuda");
  const SplitDirectory split = openSplitDirectory(r.dir);
  const Manifest& m = split.manifest;
  // Everything the new directory will hold comes from the manifest.
  const support::Destination dst = splitRewrite(r.dir);
  const Cache cache = openCache(r);

  // CPU kernels take their OpenMP thread count when they run, not the
  // compiling machine's core count: pipecut-run's thread policy decides
  // (stages side by side in one process each get their share).
  // A CUDA package's Triton kernels go inside its library, not beside it:
  // pipecut-run then loads it like a CPU package (runtime/aoti_package.h),
  // its one file written under TMPDIR and unlinked once loaded, where
  // LibTorch's loader extracts the package into /tmp and a killed run
  // leaves it there.
  // A CPU package's weights stay in the stage's .pt2 beside it, which
  // pipecut-run maps and hands to the kernels (runtime/aoti_package.h): a
  // package of kernels only is not a second copy of the stage on disk, nor
  // a write of the stage's size at every load. (CUDA packages keep theirs
  // until that path has run on a GPU.)
  Json config = r.device == "cpu"
                    ? Json{{"cpp.dynamic_threads", true}, {"aot_inductor.package_constants_in_so", false}}
                    : Json{{"aot_inductor.embed_kernel_binary", true}};
  if (!r.inductorConfig.empty()) {
    const Json given = givenInductorConfig(r.inductorConfig);
    for (auto& [k, v] : given.items()) config[k] = v;
    // Freezing (weights prepacked for the kernels) and runtime constant
    // folding (`_FOLDED_CONST_*`, computed from the weights at first run)
    // make constants of their own, which no .pt2 holds: such a package
    // keeps its weights, compiled so at once (the compile script would
    // find them afterwards and compile the stage a second time).
    if ((settingOn(given, "freezing") || settingOn(given, "aot_inductor.use_runtime_constant_folding")) &&
        !given.contains("aot_inductor.package_constants_in_so"))
      config.erase("aot_inductor.package_constants_in_so");
  }
  if (!r.cpuMatmul.empty() && r.device != "cpu")
    throw Error(ErrorKind::Usage, "", "--cpu-matmul", "chooses the kernels of CPU packages (--device cpu)");
  const auto matmul = runtime::parseCpuMatmul(r.cpuMatmul.empty() ? "auto" : r.cpuMatmul);
  if (!matmul)
    throw Error(ErrorKind::Usage, "", "--cpu-matmul", "expected auto, onednn or blas, got '" + r.cpuMatmul + "'");
  // Auto is settled here, by the compiling machine's CPU (the package's
  // kernels are compiled for its instruction sets too), and recorded as
  // settled: the key and the record say which kernels a package holds.
  if (r.device == "cpu") {
    const runtime::CpuMatmul settled = runtime::resolveCpuMatmul(*matmul, support::hostCpuVendor());
    config["pipecut.cpu_matmul"] = runtime::cpuMatmulName(settled);
    // MKL's route: each linear multiplies by its weight transposed once, at
    // the package's first run (scripts/aoti_compile.py,
    // transpose_linear_weights, says why), unless the user said otherwise
    // or freezing packs the weights its own way.
    if (settled == runtime::CpuMatmul::Blas && !settingOn(config, "freezing") && !config.contains("pipecut.transpose_weights"))
      config["pipecut.transpose_weights"] = true;
  }
  // A weightless split's stages hold no weights to compile in: their
  // packages take them at load (pipecut-run --weights binds them), on every
  // device, and nothing may fold them at compile time.
  if (m.weightless()) {
    if (settingOn(config, "freezing") || (config.contains("aot_inductor.package_constants_in_so") &&
                                          config["aot_inductor.package_constants_in_so"] != false))
      throw Error(ErrorKind::Usage, "", "--inductor-config",
                  r.dir + " is a weightless split (its stages hold no weights): its packages take their weights at "
                  "load, so neither freezing nor aot_inductor.package_constants_in_so can be on; split with --weights "
                  "to compile the weights in");
    config["aot_inductor.package_constants_in_so"] = false;
  }
  const std::string options = config.dump();  // keys sorted: one text per configuration
  const bool weightless = weightsLeftOut(options);
  const std::string scriptSha256 = sha256Bytes(kAotiCompileScript, sizeof(kAotiCompileScript) - 1);
  Python py;
  bool probed = false;
  auto ensurePython = [&] {
    if (probed) return;
    py = findPython(r);
    probe(py, r.device);
    probed = true;
  };

  std::vector<StagePlan> plans(m.stages.size());
  std::vector<std::string> sourceSha(m.stages.size()), sourceDirectory(m.stages.size());
  for (const Stage& st : m.stages) {
    plans[st.index].stage = &st;
    plans[st.index].source = &pt2Of(r.dir, st);
    plans[st.index].name = packageName(plans[st.index].source->path, r.device);
    for (const StageFile& f : st.files)
      if (f.format == "aoti" && f.compiled->device == r.device) plans[st.index].previous = &f;
    if (compilesSupportedStages(m.supportTarget) && st.supported == false) plans[st.index].from = StagePlan::From::Skip;
  }
  support::parallelFor(plans.size(), 0, [&](size_t s) {
    const StageFile& f = *plans[s].source;
    const std::string path = (fs::path(r.dir) / f.path).string();
    sourceSha[s] = !f.sha256.empty() ? f.sha256 : digestFile(Digest::Sha256, path);
    sourceDirectory[s] = support::zipDirectorySha256(path);
  });
  auto keyOf = [&](size_t s, const std::string& torchVersion) {
    const std::string k = Json{{"source_sha256", sourceSha[s]}, {"device", r.device}, {"torch", torchVersion},
                               {"options", options}, {"script_sha256", scriptSha256}}.dump();
    return sha256Bytes(k.data(), k.size());
  };
  // A package already in the directory is kept when its key, taken with the
  // torch that compiled it, is unchanged (a torch of LibTorch's version) and
  // its bytes still match: an unchanged directory needs no Python at all.
  bool allKept = true;
  for (StagePlan& p : plans) {
    if (p.from == StagePlan::From::Skip) continue;
    const StageFile* prev = p.previous;
    if (prev && emit::publicVersion(prev->compiled->torchVersion) == emit::libtorchVersion() &&
        prev->path == p.name && prev->compiled->key == keyOf(p.stage->index, prev->compiled->torchVersion) &&
        fileMatches(fs::path(r.dir) / prev->path, prev->bytes, prev->xxh3_128)) {
      p.from = StagePlan::From::Keep;
      p.key = prev->compiled->key;
    }
    allKept = allKept && p.from == StagePlan::From::Keep;
  }
  if (!allKept) ensurePython();
  for (StagePlan& p : plans) {
    if (p.from == StagePlan::From::Keep || p.from == StagePlan::From::Skip) continue;
    p.key = keyOf(p.stage->index, py.torchVersion);
    if (auto rec = cache.find(p.key)) {
      p.from = StagePlan::From::Cache;
      p.cached = *rec;
    }
  }
  std::vector<const StagePlan*> compiles;
  for (const StagePlan& p : plans)
    if (p.from == StagePlan::From::Compile) compiles.push_back(&p);

  CompileResult result;
  result.python = py.path;
  result.torchVersion = py.torchVersion;
  result.stages.resize(plans.size());
  Manifest out = m;
  std::atomic<size_t> done{0};
  std::mutex runningMutex;
  std::vector<uint32_t> running;
  support::ProgressLine line(r.progress && !compiles.empty(), [&](double elapsed) {
    std::lock_guard<std::mutex> lock(runningMutex);
    std::string now;
    for (uint32_t s : running) now += (now.empty() ? "" : ", ") + std::to_string(s);
    return "pipecut: compiled " + std::to_string(done.load()) + " of " + std::to_string(compiles.size()) +
           " stages for " + r.device + (now.empty() ? "" : " (now: stage " + now + ")") + ", " + minutes(elapsed);
  });
  support::writeStaged(dst, [&](const fs::path& tmp) {
    // Every listed file but the packages being replaced, as hard links.
    for (const Stage& st : m.stages)
      for (const StageFile& f : st.files)
        if (!(f.format == "aoti" && f.compiled->device == r.device)) linkOrCopy(fs::path(r.dir) / f.path, tmp / f.path);
    for (const StagePlan& p : plans)
      if (p.from == StagePlan::From::Keep) linkOrCopy(fs::path(r.dir) / p.name, tmp / p.name);
      else if (p.from == StagePlan::From::Cache) linkOrCopy(cache.dir / (p.key + ".pt2"), tmp / p.name);

    // Inductor's own cache beside ours (or, without ours, in a directory of
    // this run's): nothing lands in /tmp/torchinductor_$USER.
    ScratchDir scratch;
    const std::string inductorCache = inductorCacheDir(cache, scratch);
    std::vector<double> seconds(plans.size(), 0);
    std::vector<uint64_t> parameterBytes;
    for (const StagePlan* p : compiles) parameterBytes.push_back(p->stage->parameterBytes);
    const unsigned jobs = r.jobs ? r.jobs : defaultJobs(parameterBytes, !weightless);
    std::mutex logMutex;
    support::parallelFor(compiles.size(), jobs, [&](size_t i) {
      const StagePlan& p = *compiles[i];
      const uint32_t s = p.stage->index;
      {
        std::lock_guard<std::mutex> lock(runningMutex);
        running.push_back(s);
      }
      ScratchDir sourceCopy;
      const fs::path source = compileSource(fs::absolute(fs::path(r.dir) / p.source->path), sourceCopy);
      Json req = {{"mode", "compile"},
                  {"source", source.string()},
                  {"output", fs::absolute(tmp / p.name).string()},
                  {"device", r.device},
                  {"options", Json::parse(options)},
                  {"inputs", exampleInputs(m, *p.stage)},
                  {"symbols", symbolRanges(m, *p.stage)},
                  {"state", stateOf(*p.stage)},
                  {"external", externalOf(*p.stage)}};
      const ScriptRun run = runScript(py, kAotiCompileScript, req, {{"TORCHINDUCTOR_CACHE_DIR", inductorCache}});
      {
        std::lock_guard<std::mutex> lock(runningMutex);
        running.erase(std::find(running.begin(), running.end(), s));
      }
      if (r.verbose) {
        std::lock_guard<std::mutex> lock(logMutex);
        std::cerr << "pipecut: stage " << s << " compiler output:\n" << run.process.output << std::flush;
      }
      std::error_code ec;
      if (run.process.exitCode != 0 || !run.answer.is_object() || !fs::is_regular_file(tmp / p.name, ec))
        throw Error(ErrorKind::InvalidInput, (fs::path(r.dir) / p.source->path).string(), "stage " + std::to_string(s),
                    "AOTInductor cannot compile it for " + r.device + ": " + run.failure("without a package") +
                        (r.verbose ? "" : " (--verbose shows the compiler's output)"));
      seconds[s] = run.answer.value("seconds", 0.0);
      ++done;
    });

    // The manifest: each stage's package for this device replaced by the new one.
    bool sha256 = true;  // packages get a SHA-256 when every other file has one (split --sha256)
    for (const Stage& st : m.stages)
      for (const StageFile& f : st.files) sha256 = sha256 && !f.sha256.empty();
    support::parallelFor(plans.size(), 0, [&](size_t s) {
      const StagePlan& p = plans[s];
      CompiledStage& c = result.stages[s];
      c.stage = static_cast<uint32_t>(s);
      if (p.from == StagePlan::From::Skip) {
        c.how = "skipped";
        return;
      }
      Stage& st = out.stages[s];
      std::erase_if(st.files, [&](const StageFile& f) { return f.format == "aoti" && f.compiled->device == r.device; });
      StageFile f;
      f.path = p.name;
      f.format = "aoti";
      const fs::path path = tmp / p.name;
      f.bytes = fs::file_size(path);
      f.xxh3_128 = p.from == StagePlan::From::Keep ? p.previous->xxh3_128 : digestFile(Digest::Xxh3_128, path.string());
      if (sha256) f.sha256 = digestFile(Digest::Sha256, path.string());
      f.compiled = p.from == StagePlan::From::Keep
                       ? *p.previous->compiled
                       : CompiledPackage{r.device, py.torchVersion, p.source->path, p.source->xxh3_128, options, p.key};
      // Kept or not, the package is this .pt2's (its key holds the file's SHA-256).
      f.compiled->sourceDirectorySha256 = sourceDirectory[s];
      st.files.push_back(f);
      c.path = p.name;
      c.bytes = f.bytes;
      c.key = p.key;
      c.how = p.from == StagePlan::From::Keep ? "kept" : p.from == StagePlan::From::Cache ? "cached" : "compiled";
      c.compileSeconds = p.from == StagePlan::From::Cache ? p.cached.value("compile_seconds", 0.0) : seconds[s];
      if (p.from == StagePlan::From::Compile)
        cache.put(p.key, path, {{"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}, {"torch_version", py.torchVersion},
                                {"device", r.device}, {"compile_seconds", seconds[s]}});
    });
    result.manifestSha256 = writeManifests(tmp.string(), out);
  });
  line.stop();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace pipecut::driver
