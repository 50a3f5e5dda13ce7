// `pipecut split`: normalize, assign stages from the spec, carve stage
// programs, emit them (TorchScript and/or .pt2) with a manifest, and put the
// directory in place atomically.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "commands.h"
#include "emit/torchscript.h"
#include "ir/module_tree.h"
#include "ir/verifier.h"
#include "manifest/manifest.h"
#include "partition/assign.h"
#include "partition/carve.h"
#include "partition/split_spec.h"
#include "passes/pass_manager.h"
#include "pt2/package.h"
#include "support/error.h"
#include "support/staging.h"

namespace pipecut::cli {

namespace fs = std::filesystem;

namespace {

std::string stageName(uint32_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "stage_%03u", i);
  return buf;
}

std::string sourceStr(const Manifest& m, const ValueSource& s) {
  if (s.kind == ValueSource::Kind::UserInput) return "input '" + m.inputs.at(s.userInput).name + "'";
  return "stage " + std::to_string(s.stage);
}

void printPreview(const Manifest& m, std::ostream& os) {
  os << "stages: " << m.stages.size() << "\n";
  for (const auto& st : m.stages) {
    os << "  stage " << st.index << ": " << st.nodeCount << " nodes, parameters " << st.parameterBytes
       << " B, sends " << st.boundaryBytesPerSample << " B/sample\n";
    if (!st.modules.empty()) {
      os << "    modules:";
      for (const auto& mod : st.modules) os << " " << mod;
      os << "\n";
    }
    for (const auto& in : st.inputs) os << "    in  " << in.name << " <- " << sourceStr(m, in.source) << "\n";
    for (const auto& out : st.outputs) {
      os << "    out " << out.name << " ->";
      for (const auto& c : out.consumers)
        os << (c.kind == Consumer::Kind::StageInput ? " stage " + std::to_string(c.stage)
                                                    : " output " + std::to_string(c.userOutput));
      os << "\n";
    }
    if (!st.recomputed.empty()) {
      os << "    recomputed:";
      for (const auto& r : st.recomputed) os << " " << r;
      os << "\n";
    }
  }
  for (const auto& g : m.tiedGroups) {
    os << "  tied:";
    for (const auto& n : g.names) os << " " << n;
    os << " (stages";
    for (auto s : g.stages) os << " " << s;
    os << ")\n";
  }
}

std::string stagesDot(const Manifest& m) {
  std::ostringstream os;
  os << "digraph stages {\n  rankdir=LR;\n  node [shape=box];\n";
  for (size_t k = 0; k < m.inputs.size(); ++k)
    os << "  in" << k << " [shape=ellipse, label=\"" << m.inputs[k].name << "\"];\n";
  for (size_t k = 0; k < m.outputs.size(); ++k)
    os << "  out" << k << " [shape=ellipse, label=\"" << m.outputs[k].name << "\"];\n";
  for (const auto& st : m.stages) {
    os << "  s" << st.index << " [label=\"stage " << st.index << "\\n" << st.nodeCount << " nodes\\n"
       << st.parameterBytes << " B params\"];\n";
    for (const auto& in : st.inputs)
      os << "  " << (in.source.kind == ValueSource::Kind::UserInput ? "in" + std::to_string(in.source.userInput)
                                                                     : "s" + std::to_string(in.source.stage))
         << " -> s" << st.index << " [label=\"" << in.name << "\"];\n";
    for (const auto& out : st.outputs)
      for (const auto& c : out.consumers)
        if (c.kind == Consumer::Kind::UserOutput) os << "  s" << st.index << " -> out" << c.userOutput << ";\n";
  }
  os << "}\n";
  return os.str();
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorKind::Internal, path, "", "write failed");
}

}  // namespace

int runSplit(const SplitOptions& o) {
  bool torchscript = false, pt2Format = false;
  {
    std::stringstream ss(o.formats);
    std::string f;
    while (std::getline(ss, f, ',')) {
      if (f == "torchscript") torchscript = true;
      else if (f == "pt2") pt2Format = true;
      else throw Error(ErrorKind::Usage, "", "--format", "unknown format '" + f + "' (torchscript, pt2)");
    }
  }
  partition::SplitSpec spec = partition::readSplitSpec(o.spec);
  pt2::Package pkg = pt2::readPackage(o.model);
  try {
    passes::PassManager pm;
    passes::NormalizeOptions norm;
    norm.moduleContiguous = true;
    norm.verifyEach = o.verifyEach;
    passes::addNormalizePipeline(pm, norm);
    pm.run(pkg.program);
    ir::verify(pkg.program);
  } catch (const Error& e) {
    throw Error(e.kind(), o.model, e.where(), e.message());
  }
  ir::ModuleTree tree;
  try {
    tree = ir::ModuleTree::build(pkg.program, pkg.liftedTensorBytes());
  } catch (const Error& e) {
    e.rethrowWithFile(o.model);
  }
  partition::Assignment assignment;
  partition::Carving carving;
  try {
    assignment = partition::assignStages(pkg.program, spec, tree);
    partition::CarveOptions co;
    co.recompute = !o.noRecompute;
    carving = partition::carve(pkg, assignment, co);
  } catch (const Error& e) {
    throw Error(e.kind(), o.spec, e.where(), e.message());
  }
  Manifest& m = carving.manifest;
  m.sourceModel = fs::path(o.model).filename().string();
  m.sourceSha256 = sha256File(o.model);
  m.pipecutVersion = PIPECUT_VERSION;
  m.splitSpec = spec.canonical;

  if (o.preview || !o.dotFile.empty()) {
    if (!o.dotFile.empty()) pt2::writeFileAtomically(o.dotFile, [&](const auto& sink) {
      std::string t = stagesDot(m);
      sink(t.data(), t.size());
    });
    if (o.preview) {
      printPreview(m, std::cout);
      return 0;
    }
  }

  // Written beside `-o` and swapped into place (support/staging.h): on an
  // error, or if killed, `-o` keeps its previous contents.
  support::writeStaged(o.output, support::StagedKind::Directory, [&](const fs::path& tmp) {
    for (auto& stage : carving.stages) {
      std::string name = stageName(stage.info.index);
      Stage& info = m.stages[stage.info.index];
      if (torchscript) {
        std::string file = name + ".pt";
        try {
          emit::writeTorchScript(stage.package, name, (tmp / file).string());
        } catch (const Error& e) {
          throw Error(e.kind(), o.model, "stage " + std::to_string(stage.info.index) + ": " + e.where(), e.message());
        }
        info.files.push_back(StageFile{file, "torchscript", sha256File((tmp / file).string()),
                                       static_cast<uint64_t>(fs::file_size(tmp / file))});
      }
      if (pt2Format) {
        std::string file = name + ".pt2";
        pt2::writePackageFile(stage.package, (tmp / file).string());
        info.files.push_back(StageFile{file, "pt2", sha256File((tmp / file).string()),
                                       static_cast<uint64_t>(fs::file_size(tmp / file))});
      }
    }
    writeText((tmp / "manifest.json").string(), manifestToJson(m));
    writeText((tmp / "manifest.pb").string(), manifestToBinary(m));
  });
  std::cout << "wrote " << m.stages.size() << " stages to " << o.output << "\n";
  return 0;
}

int runVerify(const VerifyOptions& o) {
  Manifest m = readManifest(o.dir);
  std::set<std::string> listed = {"manifest.json", "manifest.pb"};
  size_t checked = 0;
  for (const auto& st : m.stages)
    for (const auto& f : st.files) {
      fs::path p = fs::path(o.dir) / f.path;
      listed.insert(f.path);
      std::string where = "stage " + std::to_string(st.index) + " file '" + f.path + "'";
      if (!fs::exists(p)) throw Error(ErrorKind::InvalidInput, o.dir, where, "missing");
      uint64_t size = fs::file_size(p);
      if (size != f.bytes)
        throw Error(ErrorKind::InvalidInput, o.dir, where,
                    "is " + std::to_string(size) + " bytes, the manifest says " + std::to_string(f.bytes));
      std::string h = sha256File(p.string());
      if (h != f.sha256)
        throw Error(ErrorKind::InvalidInput, o.dir, where, "sha256 " + h + " differs from the manifest's " + f.sha256);
      ++checked;
    }
  for (const auto& e : fs::directory_iterator(o.dir)) {
    std::string name = e.path().filename().string();
    if (!listed.count(name))
      throw Error(ErrorKind::InvalidInput, o.dir, "file '" + name + "'", "is not listed in the manifest");
  }
  if (fs::exists(fs::path(o.dir) / "manifest.json") && fs::exists(fs::path(o.dir) / "manifest.pb")) {
    std::ifstream in(fs::path(o.dir) / "manifest.json", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (manifestToBinary(manifestFromJson(text, (fs::path(o.dir) / "manifest.json").string())) != manifestToBinary(m))
      throw Error(ErrorKind::InvalidInput, o.dir, "manifest.json", "disagrees with manifest.pb");
  }
  std::cout << "ok: " << checked << " stage files match " << o.dir << "/manifest\n";
  return 0;
}

}  // namespace pipecut::cli
