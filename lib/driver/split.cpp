#include "driver/split.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <thread>
#include <vector>

#include "driver/load.h"
#include "driver/report.h"
#include "emit/torchscript.h"
#include "ir/clone.h"
#include "ir/module_tree.h"
#include "manifest/directory.h"
#include "partition/assign.h"
#include "partition/carve.h"
#include "partition/split_spec.h"
#include "partition/support.h"
#include "passes/pass_manager.h"
#include "support/error.h"
#include "support/files.h"
#include "support/parallel.h"
#include "support/phase_times.h"
#include "support/progress.h"
#include "support/sha256.h"
#include "support/staging.h"
#include "support/zip_directory.h"
#include "support/digest.h"

namespace pipecut::driver {

namespace fs = std::filesystem;

std::string stageName(uint32_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "stage_%03u", i);
  return buf;
}

namespace {

// Counters the writers bump and the progress line reads.
struct WriteProgress {
  std::atomic<uint64_t> bytes{0};
  std::atomic<size_t> filesDone{0};
  uint64_t totalBytes = 0;
  size_t totalFiles = 0;

  std::string line(double seconds) const {
    double done = static_cast<double>(bytes.load());
    return "pipecut: wrote " + std::to_string(filesDone.load()) + " of " + std::to_string(totalFiles) +
           " stage files, " + support::humanBytes(done) + " of ~" + support::humanBytes(static_cast<double>(totalBytes)) +
           ", " + support::humanBytes(done / seconds) + "/s";
  }
};

// One stage file: written through a hashing writer, so its digests cost no
// second read.
StageFile writeStageFile(const fs::path& dir, const std::string& file, const std::string& format,
                         const std::function<void(const std::function<size_t(const void*, size_t)>&)>& produce,
                         WriteProgress& progress, bool sha256) {
  support::HashingWriter w((dir / file).string(), sha256);
  produce([&](const void* data, size_t n) {
    w.write(data, n);
    progress.bytes += n;
    return n;
  });
  StageFile f{file, format, w.finish(), w.bytes()};
  f.xxh3_128 = w.xxh3_128();
  progress.filesDone++;
  return f;
}

}  // namespace

namespace {

// The source's identities (manifest source_directory_sha256, source_sha256)
// as far as they have been computed: each is computed once.
struct SourceHashes {
  std::string directory, file;
};

// The spec the balancer chooses, in place of a file. `hashes` receives the
// source identity that checking a profile needed.
partition::BalanceResult balanceCuts(const SplitRequest& r, int stages, const pt2::Package& pkg,
                                     const ir::ModuleTree& tree, SourceHashes& hashes) {
  support::ScopedPhase phase("balance");
  partition::CostProfile profile;
  partition::BalanceRequest br;
  br.stages = stages;
  br.by = r.balanceBy;
  if (r.balanceBy == partition::BalanceBy::Time && !r.costProfile.empty()) {  // none: balance() refuses
    profile = partition::readCostProfile(r.costProfile);
    // Node names repeat across models (every Llama has a linear_3): only the
    // source's identity tells that the times were measured on this very
    // program. Profiles from before source_directory_sha256 carry only the
    // whole file's hash: that costs a read of the model.
    const bool byDirectory = !profile.sourceDirectorySha256.empty();
    const std::string field = byDirectory ? "source_directory_sha256" : "source_sha256";
    const std::string& theirs = byDirectory ? profile.sourceDirectorySha256 : profile.sourceSha256;
    const std::string& hash = byDirectory ? (hashes.directory = support::zipDirectorySha256(r.model))
                                          : (hashes.file = sha256File(r.model));
    if (theirs != hash)
      throw Error(ErrorKind::InvalidInput, r.costProfile, field,
                  "the profile was measured on another model (" + profile.sourceModel + ", " + field + " " +
                      theirs.substr(0, 12) + "...), not " + r.model + " (" + hash.substr(0, 12) + "...)");
    br.profile = &profile;
  }
  try {
    return partition::balance(pkg, tree, br);
  } catch (const Error& e) {
    if (!e.file().empty()) throw;
    e.rethrowWithFile(r.model);
  }
}

// The manifest's record of the checkpoint files: every file opened, in
// order, with the tensors the stages took from it.
std::vector<WeightSourceFile> weightSourceFiles(
    const weights::WeightSource& source, const std::map<std::string, const weights::CheckpointTensor*>& boundFrom,
    const std::unordered_map<const weights::CheckpointTensor*, std::string>& digests) {
  const auto& files = source.checkpoint().files();
  std::vector<std::map<std::string, const weights::CheckpointTensor*>> used(files.size());
  for (const auto& [fqn, c] : boundFrom) used[c->file].emplace(c->name, c);
  std::vector<WeightSourceFile> out;
  for (size_t f = 0; f < files.size(); ++f) {
    WeightSourceFile w;
    w.file = fs::path(files[f].path).filename().string();
    w.bytes = files[f].size();
    w.tensors = static_cast<uint32_t>(used[f].size());
    Xxh3_128 h;
    for (const auto& [name, c] : used[f]) {
      const std::string line = name + " " + c->dtype->torchName + " " + c->shapeStr() + " " + digests.at(c) + "\n";
      h.update(line.data(), line.size());
    }
    w.xxh3_128 = h.hexDigest();
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

Manifest runSplit(const SplitRequest& r, partition::BalanceResult* balanced, std::string* manifestSha256,
                  SplitWeights* weightsReport) {
  const bool balancing = r.stages > 0;
  std::vector<std::string> inputs = {r.model};
  for (const std::string* p : {&r.spec, &r.costProfile})
    if (!p->empty()) inputs.push_back(*p);
  for (const std::string& w : r.weights.sources) inputs.push_back(w);
  if (r.support.given() && r.support.target.front() != '{' && !isBuiltinSupportTarget(r.support.target))
    inputs.push_back(r.support.target);
  support::Destination outDir;
  outDir.path = r.output;
  outDir.kind = support::StagedKind::Directory;
  outDir.what = "split directory";
  outDir.previousOutput = [](const fs::path& p) { return splitDirectoryInTheWay(p.string()); };
  outDir.inputs.assign(inputs.begin(), inputs.end());
  outDir.force = r.force;
  const support::Destination dot = dotDestination(r.dotFile, inputs, r.force);
  if (!r.preview) support::checkDestination(outDir);
  if (!r.dotFile.empty()) support::checkDestination(dot);
  partition::SplitSpec spec;
  if (!balancing && !r.spec.empty()) spec = partition::readSplitSpec(r.spec);
  if (!balancing && r.spec.empty() && !r.support.given())
    throw Error(ErrorKind::Usage, "", "--spec", "a split needs --spec, --stages with --balance, or --support");
  std::unique_ptr<partition::SupportTarget> supportTarget;
  if (r.support.given()) supportTarget = makeSupportTarget(r.support);
  if (r.bindAtRun && !r.weights.given())
    throw Error(ErrorKind::Usage, "", "--bind-at", "'run' pins the checkpoint given with --weights; none was given");
  std::shared_ptr<const weights::WeightSource> source;
  if (r.weights.given()) {
    support::ScopedPhase phase("open weights");
    source = std::make_shared<const weights::WeightSource>(r.weights);
  }
  weights::Binding binding;
  LoadOptions load;
  load.moduleContiguous = true;
  load.verifyEach = r.verifyEach;
  load.weights = source.get();
  load.binding = &binding;
  pt2::Package pkg = loadNormalized(r.model, load);
  // What the stages need from the checkpoint: each program tensor bound
  // from it, and the checkpoint tensor it came from.
  std::map<std::string, const weights::CheckpointTensor*> boundFrom;
  if (source) {
    weights::requireBound(pkg, r.model, source.get());
    weights::restrictToProgram(binding, pkg, *source);
    // Stage files that hold their weights hold their state's initial value
    // too, as the real export's do: a meta export's KV cache, zeros. A
    // weightless split leaves it to the run, as it leaves the weights.
    if (!r.bindAtRun) weights::zeroExternalState(pkg);
    for (const auto& b : binding.bound) boundFrom.emplace(b.fqn, b.from);
  }
  // Each checkpoint tensor's digest, computed once.
  std::unordered_map<const weights::CheckpointTensor*, std::string> digests;
  auto digestAll = [&](const std::vector<const weights::CheckpointTensor*>& todo) {
    std::vector<std::string> out(todo.size());
    support::parallelFor(todo.size(), 0, [&](size_t i) { out[i] = weights::tensorDigest(todo[i]->bytes); });
    for (size_t i = 0; i < todo.size(); ++i) digests.emplace(todo[i], std::move(out[i]));
  };
  if (r.bindAtRun) {
    // Read and pinned now; the stages take the bytes at run time. Tensors
    // bound from one checkpoint tensor stay one (tied).
    support::ScopedPhase phase("digest weights");
    std::vector<const weights::CheckpointTensor*> todo;
    std::unordered_set<const weights::CheckpointTensor*> seen;
    for (const auto& [fqn, c] : boundFrom)
      if (seen.insert(c).second) todo.push_back(c);
    digestAll(todo);
    for (const auto& [fqn, c] : boundFrom)
      for (auto* table : {&pkg.weights, &pkg.constants})
        if (auto it = table->find(fqn); it != table->end()) weights::unbind(it->second, c->name);
  }
  // The module tree and carving both look the lifted tensors up by name;
  // nothing changes the package's tables from here on.
  const pt2::TensorIndex tensors(pkg);
  ir::ModuleTree tree;
  try {
    support::ScopedPhase phase("module tree");
    tree = ir::ModuleTree::build(pkg.program, pkg.liftedTensorBytes(tensors));
  } catch (const Error& e) {
    e.rethrowWithFile(r.model);
  }
  // Where the target's support ends (before balancing: the balancer's cuts
  // are added to these).
  partition::SupportMarks marks;
  partition::SupportRuns runs;
  if (supportTarget) {
    support::ScopedPhase phase("support");
    try {
      marks = partition::markSupport(pkg.program, *supportTarget);
    } catch (const Error& e) {
      if (!e.file().empty()) throw;
      e.rethrowWithFile(r.model);
    }
    runs = partition::supportRuns(pkg.program, marks, r.minSupportedNodes);
  }
  // Stages from the spec (or the balancer), else one, then cut where runs end.
  auto assign = [&](const partition::SplitSpec& s) {
    if (!balancing && r.spec.empty())
      return partition::Assignment{1, std::vector<int>(pkg.program.graph.nodes.size(), 0)};
    return partition::assignStages(pkg.program, s, tree);
  };
  SourceHashes hashes;
  partition::BalanceResult chosen;
  if (balancing && !supportTarget) {
    chosen = balanceCuts(r, r.stages, pkg, tree, hashes);
    spec = chosen.spec;
  } else if (balancing) {
    // The support cuts come first; the balancer places the rest. Its cuts
    // and the support cuts may coincide, so the balancer is asked for more
    // stages until the two together make --stages (or as close below as it
    // gets); support cuts alone beyond --stages all stay.
    const int runCount = static_cast<int>(runs.runSupported.size());
    bool have = false;
    for (int n = std::max(1, r.stages - runCount + 1); n <= r.stages; ++n) {
      partition::BalanceResult b;
      try {
        b = balanceCuts(r, n, pkg, tree, hashes);
      } catch (const Error&) {
        if (!have) throw;
        break;  // more stages than cut candidates
      }
      const int total = partition::cutAtRuns(pkg.program, assign(b.spec), runs, marks).assignment.numStages;
      if (have && total > r.stages) break;
      chosen = std::move(b);
      have = true;
      if (total >= r.stages) break;
    }
    spec = chosen.spec;
  }
  std::vector<char> stageSupported;
  std::vector<std::string> stageReason;
  partition::Carving carving;
  try {
    support::ScopedPhase phase("assign and carve");
    partition::Assignment assignment = assign(spec);
    if (balancing) partition::checkReproduces(chosen, assignment);
    if (supportTarget) {
      partition::SupportedAssignment sa = partition::cutAtRuns(pkg.program, assignment, runs, marks);
      assignment = std::move(sa.assignment);
      stageSupported = std::move(sa.stageSupported);
      stageReason = std::move(sa.stageReason);
    }
    partition::CarveOptions co;
    co.recompute = r.recompute;
    co.programs = !r.preview;  // a preview reports the cut; it builds no stage program
    carving = partition::carve(pkg, tensors, assignment, co);
  } catch (const Error& e) {
    throw Error(e.kind(), balancing || r.spec.empty() ? r.model : r.spec, e.where(), e.message());
  }
  Manifest& m = carving.manifest;
  if (supportTarget) {
    m.supportTarget = supportTarget->name();
    m.minSupportedNodes = static_cast<uint32_t>(r.minSupportedNodes);
    for (size_t s = 0; s < m.stages.size(); ++s) {
      m.stages[s].supported = stageSupported.at(s) != 0;
      m.stages[s].unsupportedReason = stageReason.at(s);
    }
  }
  if (r.bindAtRun)
    for (auto& st : m.stages)
      for (auto& e : st.external)
        if (auto it = boundFrom.find(e.name); it != boundFrom.end()) e.xxh3_128 = digests.at(it->second);
  m.sourceModel = fs::path(r.model).filename().string();
  m.pipecutVersion = PIPECUT_VERSION;
  m.splitSpec = spec.canonical;
  if (balanced) *balanced = std::move(chosen);
  if (weightsReport) {
    weightsReport->source = source;
    weightsReport->binding = binding;
  }

  if (!r.dotFile.empty())
    support::writeFileStaged(dot, [&](const support::ByteSink& sink) {
      std::string t = stagesDot(m);
      sink(t.data(), t.size());
    });
  // Leaves the heavy state to the OS when the process is about to end.
  auto handOff = [&] {
    if (!r.exitsAfter) return;
    new pt2::Package(std::move(pkg));
    new partition::Carving(std::move(carving));
  };
  if (r.preview) {
    Manifest out = m;
    handOff();
    return out;
  }

  // Two writers per core by default: a writer spends part of its time
  // blocked in the kernel (page-cache writeback it started, dirty-page
  // throttling), and the other keeps the core busy meanwhile. Measured on
  // the 7B split (bench/scale.py's llama7b4, 2 cores): --format pt2 2.6 s
  // with 4 writers against 3.4 s with 2.
  const unsigned jobs = r.jobs ? r.jobs : 2 * std::max(1u, std::thread::hardware_concurrency());

  // Bad input found in a stage's program, blamed on the model and the stage.
  auto inStage = [&](const partition::CarvedStage& stage, const Error& e) {
    return Error(e.kind(), r.model, "stage " + std::to_string(stage.info.index) + ": " + e.where(), e.message());
  };

  // The plan's last step, before any file is written: for NativeRT
  // (--inline-grad-regions) each stage's .pt2 is written from a rewritten
  // copy of its program, its payload shared; the .pt is emitted from the
  // program as carved. A rewrite that fails verification fails the split here.
  std::vector<std::optional<pt2::Package>> nativeRt(carving.stages.size());
  if (r.inlineGradRegions && r.pt2) {
    support::ScopedPhase phase("rewrite for NativeRT");
    support::parallelFor(carving.stages.size(), jobs, [&](size_t i) {
      const partition::CarvedStage& stage = carving.stages[i];
      try {
        ir::Program program = ir::cloneProgram(stage.package.program);
        passes::PassManager pm;
        passes::addNativeRtPipeline(pm, r.verifyEach);
        pm.run(program);
        nativeRt[i] = pt2::withProgram(stage.package, std::move(program));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::InvalidInput) throw;  // as it was, type and all
        throw inStage(stage, e);
      }
    });
  }

  // Every stage file is its own task; the source hash is one more, read from
  // the page cache the writers fill anyway.
  WriteProgress progress;
  for (const auto& st : m.stages) progress.totalBytes += st.parameterBytes * ((r.torchscript ? 1 : 0) + (r.pt2 ? 1 : 0));
  support::ProgressLine line(r.progress, [&](double s) { return progress.line(s); });
  support::ScopedPhase writePhase("write stages");
  support::writeStaged(outDir, [&](const fs::path& tmp) {
    struct Slot {
      size_t stage;
      StageFile file;
      std::optional<MissingFile> missing;  // the format cannot express this stage
    };
    std::vector<Slot> slots;
    std::vector<std::function<void()>> tasks;
    m.sourceDirectorySha256 = hashes.directory.empty() ? support::zipDirectorySha256(r.model) : hashes.directory;
    if (!hashes.file.empty()) m.sourceSha256 = hashes.file;
    else if (r.hashSource) tasks.emplace_back([&] { m.sourceSha256 = sha256File(r.model); });
    for (auto& stage : carving.stages) {
      std::string name = stageName(stage.info.index);
      if (r.torchscript) slots.push_back({stage.info.index, {name + ".pt", "torchscript", "", 0}});
      if (r.pt2) slots.push_back({stage.info.index, {name + ".pt2", "pt2", "", 0}});
    }
    progress.totalFiles = slots.size();
    auto writeSlot = [&](Slot& slot) {
      partition::CarvedStage& stage = carving.stages[slot.stage];
      const std::string file = slot.file.path;
      try {
        if (slot.file.format == "torchscript") {
          try {
            slot.file = writeStageFile(tmp, file, "torchscript", [&](const auto& sink) {
              emit::writeTorchScript(stage.package, stageName(stage.info.index), sink);
            }, progress, r.stageSha256);
          } catch (const Error& e) {
            // With both formats asked for, a stage TorchScript cannot express
            // still gets its .pt2; the manifest says what is missing and why.
            if (e.kind() != ErrorKind::InvalidInput || !r.pt2) throw;
            fs::remove(tmp / file);
            slot.missing = MissingFile{"torchscript", (e.where().empty() ? "" : e.where() + ": ") + e.message()};
          }
        } else {
          const pt2::Package& package = nativeRt[slot.stage] ? *nativeRt[slot.stage] : stage.package;
          slot.file = writeStageFile(tmp, file, "pt2", [&](const auto& sink) { pt2::writePackage(package, sink); },
                                     progress, r.stageSha256);
          slot.file.gradRegionsInlined = r.inlineGradRegions;
        }
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::InvalidInput) throw;  // as it was, type and all
        throw inStage(stage, e);
      }
    };
    // The checkpoint tensors' digests, stage by stage, right after the
    // stage's files in the task list: the writers have just paged the
    // bytes in, so the hash reads them from the page cache, not the disk.
    std::vector<std::vector<const weights::CheckpointTensor*>> toDigest(carving.stages.size());
    if (source && !r.bindAtRun) {
      std::unordered_set<const weights::CheckpointTensor*> claimed;
      for (size_t s = 0; s < carving.stages.size(); ++s)
        for (const auto& spec : carving.stages[s].package.program.inputSpecs)
          if (auto it = boundFrom.find(spec.target); it != boundFrom.end() && claimed.insert(it->second).second)
            toDigest[s].push_back(it->second);
    }
    std::vector<std::vector<std::string>> stageDigests(carving.stages.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      tasks.emplace_back([&, i] { writeSlot(slots[i]); });
      const bool lastOfStage = i + 1 == slots.size() || slots[i + 1].stage != slots[i].stage;
      const size_t s = slots[i].stage;
      if (lastOfStage && !toDigest[s].empty())
        tasks.emplace_back([&, s] {
          for (const auto* c : toDigest[s]) stageDigests[s].push_back(weights::tensorDigest(c->bytes));
        });
    }
    support::parallelFor(tasks.size(), jobs, [&](size_t i) { tasks[i](); });
    for (size_t s = 0; s < toDigest.size(); ++s)
      for (size_t k = 0; k < toDigest[s].size(); ++k) digests.emplace(toDigest[s][k], stageDigests[s][k]);
    if (source) m.weightSources = weightSourceFiles(*source, boundFrom, digests);
    for (const Slot& slot : slots) {
      if (slot.missing) m.stages[slot.stage].missing.push_back(*slot.missing);
      else m.stages[slot.stage].files.push_back(slot.file);
    }
    const std::string sha = writeManifests(tmp.string(), m);
    if (manifestSha256) *manifestSha256 = sha;
  });
  line.stop();
  Manifest out = m;
  handOff();
  return out;
}

}  // namespace pipecut::driver
