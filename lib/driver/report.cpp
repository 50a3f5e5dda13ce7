// What `pipecut split --preview` prints and `--dot` draws, from the manifest.
#include "driver/report.h"

#include <cstdio>
#include <sstream>

#include "support/progress.h"

namespace pipecut::driver {

namespace {

std::string sourceStr(const Manifest& m, const ValueSource& s) {
  if (s.kind == ValueSource::Kind::UserInput) return "input '" + m.inputs.at(s.userInput).name + "'";
  return "stage " + std::to_string(s.stage);
}

}  // namespace

std::string previewText(const Manifest& m) {
  std::ostringstream os;
  os << "stages: " << m.stages.size() << "\n";
  if (!m.supportTarget.empty())
    os << "support: " << m.supportTarget << " (runs under " << m.minSupportedNodes << " compute nodes join their neighbours)\n";
  for (const auto& st : m.stages) {
    os << "  stage " << st.index << ": " << st.nodeCount << " nodes, parameters " << st.parameterBytes
       << " B, sends " << st.boundaryBytesPerSample << " B/sample\n";
    if (st.supported) os << "    " << (*st.supported ? "supported" : "unsupported: " + st.unsupportedReason) << "\n";
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
  return os.str();
}

std::string balanceText(const partition::BalanceResult& b) {
  std::ostringstream os;
  char buf[64];
  auto cost = [&](double c) {
    if (b.by == partition::BalanceBy::Time) std::snprintf(buf, sizeof buf, "%.3f ms", c);
    else if (b.by == partition::BalanceBy::Flops) std::snprintf(buf, sizeof buf, "%.4g FLOPs", c);
    else std::snprintf(buf, sizeof buf, "%.0f B", c);
    return std::string(buf);
  };
  std::snprintf(buf, sizeof buf, "%.3f", b.imbalance);
  os << "balanced by " << partition::balanceByName(b.by) << " over " << b.candidates.size() << " cut candidates: imbalance "
     << buf << " (heaviest / mean)\n";
  for (size_t s = 0; s < b.stages.size(); ++s) {
    const auto& st = b.stages[s];
    os << "  stage " << s << ": " << cost(st.cost);
    if (st.transfer > 0) os << " (" << cost(st.transfer) << " of it moving values)";
    os << ", " << st.units << (st.units == 1 ? " unit" : " units") << " ("
       << st.first << (st.units > 1 ? " .. " + st.last : std::string()) << ")";
    if (s < b.cutBytes.size()) os << ", then " << b.cutBytes[s] << " B/sample cross the cut";
    os << "\n";
  }
  os << "  spec: " << b.spec.canonical << "\n";
  return os.str();
}

std::string dotQuoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string stagesDot(const Manifest& m) {
  std::ostringstream os;
  os << kDotMarker << "digraph stages {\n  rankdir=LR;\n  node [shape=box];\n";
  for (size_t k = 0; k < m.inputs.size(); ++k)
    os << "  in" << k << " [shape=ellipse, label=" << dotQuoted(m.inputs[k].name) << "];\n";
  for (size_t k = 0; k < m.outputs.size(); ++k)
    os << "  out" << k << " [shape=ellipse, label=" << dotQuoted(m.outputs[k].name) << "];\n";
  for (const auto& st : m.stages) {
    os << "  s" << st.index << " [label=\"stage " << st.index << "\\n" << st.nodeCount << " nodes\\n"
       << st.parameterBytes << " B params\"];\n";
    for (const auto& in : st.inputs)
      os << "  " << (in.source.kind == ValueSource::Kind::UserInput ? "in" + std::to_string(in.source.userInput)
                                                                     : "s" + std::to_string(in.source.stage))
         << " -> s" << st.index << " [label=" << dotQuoted(in.name) << "];\n";
    for (const auto& out : st.outputs)
      for (const auto& c : out.consumers)
        if (c.kind == Consumer::Kind::UserOutput) os << "  s" << st.index << " -> out" << c.userOutput << ";\n";
  }
  os << "}\n";
  return os.str();
}

support::Destination dotDestination(const std::string& path, std::vector<std::string> inputs, bool force) {
  support::Destination d;
  d.path = path;
  d.what = "Graphviz file";
  d.previousOutput = [](const std::filesystem::path& p) {
    return support::startsWithMarker(p, kDotMarker, "'// written by pipecut'");
  };
  d.inputs.assign(inputs.begin(), inputs.end());
  d.force = force;
  return d;
}

std::string bindingSummary(const weights::Binding& b, const weights::WeightSource& source, bool listUnused) {
  const auto& files = source.checkpoint().files();
  std::vector<size_t> count(files.size());
  std::vector<uint64_t> bytes(files.size());
  for (const auto& bound : b.bound) {
    count[bound.from->file]++;
    bytes[bound.from->file] += bound.from->bytes.size;
  }
  std::ostringstream os;
  os << "pipecut: weights: " << b.bound.size() << " tensors bound from " << files.size() << " file"
     << (files.size() == 1 ? "" : "s") << "\n";
  for (size_t f = 0; f < files.size(); ++f)
    os << "pipecut:   " << files[f].path << ": " << count[f] << " tensors, " << support::humanBinaryBytes(bytes[f]) << "\n";
  if (!b.kept.empty()) os << "pipecut:   " << b.kept.size() << " tensors keep the .pt2's own bytes (no source holds them)\n";
  if (!b.unused.empty()) {
    os << "pipecut:   " << b.unused.size() << " checkpoint tensor" << (b.unused.size() == 1 ? "" : "s")
       << (b.unused.size() == 1 ? " binds" : " bind") << " to nothing in the program" << (listUnused ? ":" : " (-v lists them)") << "\n";
    if (listUnused)
      for (const auto* c : b.unused) os << "pipecut:     " << c->name << " (" << files[c->file].path << ")\n";
  }
  return os.str();
}

}  // namespace pipecut::driver
