#include "driver/inspect.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "driver/load.h"
#include "driver/report.h"
#include "ir/module_tree.h"
#include "ir/verifier.h"
#include "pt2/package.h"
#include "pt2/program_json.h"
#include "support/error.h"
#include "support/progress.h"
#include "support/dtypes.h"
#include "partition/support.h"
#include "weights/binding.h"

namespace pipecut::driver {

namespace {

using ir::Json;

std::string argSummary(const ir::Argument& a) {
  if (a.tag == ir::ArgTag::Graph) return "<graph " + a.name() + ">";
  if (a.isValue()) return a.value()->name;
  if (!a.literal.is_null()) return a.literal.dump();
  return ir::argTagKey(a.tag);
}

struct Io {
  std::string name, kind, dtype, shape;
};

Json ioJson(const Io& io) { return Json{{"name", io.name}, {"kind", io.kind}, {"dtype", io.dtype}, {"shape", io.shape}}; }

Io describeValue(const ir::Argument& a, const std::string& kind) {
  Io io;
  io.kind = kind;
  if (a.isValue()) {
    io.name = a.value()->name;
    if (a.value()->meta) {
      io.dtype = support::dtypeFromCode(a.value()->meta->dtype)->torchName;
      io.shape = a.value()->meta->shapeStr();
    } else {
      io.dtype = ir::valueKindName(a.value()->kind);
    }
  } else {
    io.name = argSummary(a);
    io.dtype = "constant";
  }
  return io;
}

struct Region {
  std::string op, node, module, args;
  size_t bodyNodes = 0;
  int depth = 0;
};

void collect(const ir::Graph& g, int depth, std::map<std::string, size_t>& ops, std::vector<Region>& regions) {
  for (const auto& n : g.nodes) {
    ops[n->opName()]++;
    if (!n->isHigherOrder()) continue;
    Region r;
    r.op = n->opName().substr(std::string("higher_order.").size());
    r.node = n->label();
    r.module = n->modulePath();
    r.depth = depth;
    std::string args;
    for (const auto& in : n->inputs) {
      if (in.arg.tag == ir::ArgTag::Graph) break;  // operands follow the body
      if (!args.empty()) args += ", ";
      args += argSummary(in.arg);
    }
    r.args = args;
    for (const ir::Graph* sub : n->subgraphs()) r.bodyNodes += sub->nodeCountRecursive();
    regions.push_back(r);
    for (const ir::Graph* sub : n->subgraphs()) collect(*sub, depth + 1, ops, regions);
  }
}

void writeDot(const pt2::Package& pkg, const ir::ModuleTree& tree, const support::Destination& dst) {
  const ir::Graph& g = pkg.program.graph;
  std::map<std::string, std::vector<const ir::Node*>> byModule;
  for (const auto& n : g.nodes) byModule[n->modulePath()].push_back(n.get());
  std::ostringstream os;
  os << driver::kDotMarker << "digraph program {\n  rankdir=TB;\n  node [shape=box, fontsize=10];\n";
  std::set<const ir::Value*> userInputs;
  for (const auto& s : pkg.program.inputSpecs)
    if (s.kind == ir::InputKind::UserInput && s.arg.isValue()) {
      userInputs.insert(s.arg.value());
      os << "  " << dotQuoted("in:" + s.arg.value()->name) << " [shape=ellipse, label=" << dotQuoted(s.arg.value()->name) << "];\n";
    }
  int cluster = 0;
  std::function<void(const ir::ModuleInfo&, int)> emit = [&](const ir::ModuleInfo& m, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    bool isRoot = m.path.empty();
    if (!isRoot) {
      os << pad << "subgraph cluster_" << cluster++ << " {\n" << pad << "  label="
         << dotQuoted(m.path + (m.type.empty() ? "" : " (" + m.type.substr(m.type.rfind('.') + 1) + ")")) << ";\n";
    }
    for (const ir::Node* n : byModule[m.path]) {
      os << pad << "  " << dotQuoted(n->label()) << " [label=" << dotQuoted(n->label() + "\\n" + n->opName());
      if (n->isHigherOrder()) os << ", style=filled, fillcolor=lightyellow";
      os << "];\n";
    }
    for (const auto& c : m.children) emit(tree.modules().at(c), indent + 1);
    if (!isRoot) os << pad << "}\n";
  };
  emit(tree.root(), 0);
  for (const auto& n : g.nodes) {
    std::set<std::string> seen;
    n->forEachInputValue([&](ir::Value* v) {
      std::string from;
      if (v->producer) from = v->producer->label();
      else if (userInputs.count(v)) from = "in:" + v->name;
      else return;
      if (seen.insert(from).second) os << "  " << dotQuoted(from) << " -> " << dotQuoted(n->label()) << ";\n";
    });
  }
  os << "  out [shape=ellipse, label=\"outputs\"];\n";
  for (const auto& o : g.outputs)
    o.forEachValue([&](ir::Value* v) {
      if (v->producer) os << "  " << dotQuoted(v->producer->label()) << " -> out;\n";
    });
  os << "}\n";
  support::writeFileStaged(dst, [&](const support::ByteSink& sink) {
    std::string text = os.str();
    sink(text.data(), text.size());
  });
}

// What the checkpoint binds, as split binds it: the normalized program's
// tensors (dead code dropped), each from a source or the .pt2.
struct WeightsReport {
  std::shared_ptr<const weights::WeightSource> source;
  weights::Binding binding;
  std::vector<std::string> needed;   // the program's lifted tensors after normalization
  std::vector<std::string> missing;  // needed, with no bytes anywhere
};

WeightsReport weightsReport(const InspectRequest& o) {
  WeightsReport r;
  r.source = std::make_shared<const weights::WeightSource>(o.weights);
  LoadOptions load;
  load.weights = r.source.get();
  load.binding = &r.binding;
  pt2::Package pkg = loadNormalized(o.model, load);
  for (const auto& s : pkg.program.inputSpecs)
    if (s.kind != ir::InputKind::UserInput && s.kind != ir::InputKind::ConstantInput && s.kind != ir::InputKind::Token)
      r.needed.push_back(s.target);
  r.missing = weights::missingTensors(pkg);
  weights::restrictToProgram(r.binding, pkg, *r.source);
  return r;
}

Json weightsJson(const WeightsReport& r) {
  const auto& files = r.source->checkpoint().files();
  Json j;
  j["sources"] = Json::array();
  for (const auto& f : files) j["sources"].push_back(Json{{"file", f.path}, {"bytes", f.size()}});
  std::map<std::string, const weights::CheckpointTensor*> bound;
  for (const auto& b : r.binding.bound) bound.emplace(b.fqn, b.from);
  j["bound"] = Json::array();
  j["kept"] = Json::array();
  std::set<std::string> missing(r.missing.begin(), r.missing.end());
  for (const std::string& fqn : r.needed) {
    auto it = bound.find(fqn);
    if (it != bound.end())
      j["bound"].push_back(Json{{"name", fqn}, {"from", it->second->name}, {"file", files[it->second->file].path},
                                {"dtype", it->second->dtype->torchName}, {"shape", it->second->shape}});
    else if (!missing.count(fqn))
      j["kept"].push_back(fqn);
  }
  j["missing"] = r.missing;
  j["unused"] = Json::array();
  for (const auto* c : r.binding.unused) j["unused"].push_back(Json{{"name", c->name}, {"file", files[c->file].path}});
  return j;
}

void weightsText(const WeightsReport& r, std::ostream& os) {
  const auto& files = r.source->checkpoint().files();
  std::set<std::string> needed(r.needed.begin(), r.needed.end());
  size_t bound = 0;
  uint64_t bytes = 0;
  for (const auto& b : r.binding.bound)
    if (needed.count(b.fqn)) ++bound, bytes += b.from->bytes.size;
  os << "  weights: " << bound << " of the " << r.needed.size() << " tensors the program needs bound ("
     << support::humanBinaryBytes(bytes) << ") from " << files.size() << " file" << (files.size() == 1 ? "" : "s") << "\n";
  for (const auto& f : files) os << "    " << f.path << "  " << support::humanBinaryBytes(f.size()) << "\n";
  const size_t kept = r.needed.size() - bound - r.missing.size();
  if (kept) os << "    " << kept << " keep the .pt2's own bytes\n";
  if (!r.missing.empty()) {
    os << "    missing (no source holds them; exported on the meta device, so no bytes here either):\n";
    for (const auto& m : r.missing) os << "      " << m << "\n";
  }
  if (!r.binding.unused.empty()) {
    os << "    unused (in the checkpoint, bound to nothing in the program):\n";
    for (const auto* c : r.binding.unused) os << "      " << c->name << "  (" << files[c->file].path << ")\n";
  }
}

// Each node's verdict under a --support target, on the program as split
// sees it.
struct SupportReport {
  std::string target;
  size_t supported = 0, unsupported = 0;
  std::map<std::string, std::pair<size_t, size_t>> ops;  // op: (supported, unsupported)
  struct Refused {
    std::string node, op, module, reason;
  };
  std::vector<Refused> refused;
};

SupportReport supportReport(const InspectRequest& o) {
  std::unique_ptr<partition::SupportTarget> target = makeSupportTarget(o.support);
  LoadOptions load;
  load.moduleContiguous = true;
  pt2::Package pkg = loadNormalized(o.model, load);
  partition::SupportMarks marks;
  try {
    marks = partition::markSupport(pkg.program, *target);
  } catch (const Error& e) {
    if (!e.file().empty()) throw;
    e.rethrowWithFile(o.model);
  }
  SupportReport r;
  r.target = marks.target;
  for (const auto& v : marks.nodes) {
    auto& [yes, no] = r.ops[v.node->opName()];
    if (v.supported) ++yes, ++r.supported;
    else {
      ++no, ++r.unsupported;
      r.refused.push_back({v.node->label(), v.node->opName(), v.node->modulePath(), v.reason});
    }
  }
  return r;
}

Json supportJson(const SupportReport& r) {
  Json j{{"target", r.target}, {"supported_nodes", r.supported}, {"unsupported_nodes", r.unsupported}};
  j["operators"] = Json::object();
  for (const auto& [op, c] : r.ops) j["operators"][op] = Json{{"supported", c.first}, {"unsupported", c.second}};
  j["unsupported"] = Json::array();
  for (const auto& u : r.refused)
    j["unsupported"].push_back(Json{{"node", u.node}, {"op", u.op}, {"module", u.module}, {"reason", u.reason}});
  return j;
}

void supportText(const SupportReport& r, std::ostream& os) {
  os << "  support (" << r.target << "): " << r.supported << " of " << r.supported + r.unsupported
     << " nodes supported\n";
  for (const auto& [op, c] : r.ops) {
    os << "    " << op << "  " << c.first << " supported";
    if (c.second) os << ", " << c.second << " unsupported";
    os << "\n";
  }
  if (!r.refused.empty()) {
    os << "  unsupported nodes:\n";
    for (const auto& u : r.refused)
      os << "    " << u.node << " (" << u.op << ") in " << (u.module.empty() ? "(root)" : u.module) << ": " << u.reason
         << "\n";
  }
}

}  // namespace

void inspect(const InspectRequest& o, std::ostream& os) {
  const support::Destination dot = driver::dotDestination(o.dotFile, {o.model}, o.force);
  if (!o.dotFile.empty()) support::checkDestination(dot);
  std::optional<WeightsReport> weights;
  if (o.weights.given()) weights = weightsReport(o);
  std::optional<SupportReport> support;
  if (o.support.given()) support = supportReport(o);
  pt2::Package pkg = pt2::readPackage(o.model);
  const ir::Program& p = pkg.program;

  std::vector<Io> inputs, outputs;
  uint64_t paramBytes = 0, bufferBytes = 0, constantBytes = 0;
  size_t nParams = 0, nBuffers = 0, nConstants = 0;
  auto bytesOf = [&](const std::string& fqn) { return pkg.tensorBytes(fqn); };
  for (const auto& s : p.inputSpecs) {
    switch (s.kind) {
      case ir::InputKind::UserInput: inputs.push_back(describeValue(s.arg, "user_input")); break;
      case ir::InputKind::ConstantInput: inputs.push_back(Io{s.target, "constant_input", "constant", s.constantValue.dump()}); break;
      case ir::InputKind::Parameter: ++nParams; paramBytes += bytesOf(s.target); break;
      case ir::InputKind::Buffer: ++nBuffers; bufferBytes += bytesOf(s.target); break;
      case ir::InputKind::TensorConstant: ++nConstants; constantBytes += bytesOf(s.target); break;
      default: break;
    }
  }
  for (const auto& s : p.outputSpecs) outputs.push_back(describeValue(s.arg, ir::outputKindKey(s.kind)));

  std::map<std::string, size_t> ops;
  std::vector<Region> regions;
  collect(p.graph, 0, ops, regions);
  ir::ModuleTree tree;
  try {
    tree = ir::ModuleTree::build(p, pkg.liftedTensorBytes());
  } catch (const Error& e) {
    e.rethrowWithFile(o.model);
  }

  std::string verified = "ok";
  try {
    ir::verify(p);
  } catch (const Error& e) {
    verified = e.what();
  }
  std::string dialect = p.verifiers.is_array() && !p.verifiers.empty() ? p.verifiers[0].get<std::string>() : "";

  if (!o.dotFile.empty()) writeDot(pkg, tree, dot);

  if (o.json) {
    Json j;
    j["file"] = o.model;
    j["torch_version"] = p.torchVersion;
    j["schema_version"] = Json{{"major", p.schemaMajor}, {"minor", p.schemaMinor}};
    j["dialect"] = dialect;
    j["meta_export"] = pkg.metaExport;
    if (weights) j["weights"] = weightsJson(*weights);
    if (support) j["support"] = supportJson(*support);
    j["inputs"] = Json::array();
    for (const auto& io : inputs) j["inputs"].push_back(ioJson(io));
    j["outputs"] = Json::array();
    for (const auto& io : outputs) j["outputs"].push_back(ioJson(io));
    // Dynamic dimensions: the sizes export allows each symbol (null: unbounded).
    j["symbols"] = Json::object();
    if (p.rangeConstraints.is_object())
      for (const auto& [sym, r] : p.rangeConstraints.items())
        j["symbols"][sym] = r.is_object() ? Json{{"min", r.value("min_val", Json())}, {"max", r.value("max_val", Json())}}
                                          : Json{{"min", nullptr}, {"max", nullptr}};
    j["parameters"] = Json{{"count", nParams}, {"bytes", paramBytes}};
    j["buffers"] = Json{{"count", nBuffers}, {"bytes", bufferBytes}};
    j["constants"] = Json{{"count", nConstants}, {"bytes", constantBytes}};
    j["nodes"] = Json{{"top_level", p.graph.nodes.size()}, {"total", p.graph.nodeCountRecursive()}};
    j["verified"] = verified;
    j["operators"] = Json::object();
    for (const auto& [op, n] : ops) j["operators"][op] = n;
    j["higher_order_regions"] = Json::array();
    for (const auto& r : regions)
      j["higher_order_regions"].push_back(Json{{"op", r.op}, {"node", r.node}, {"module", r.module},
                                               {"args", r.args}, {"body_nodes", r.bodyNodes}, {"depth", r.depth}});
    j["modules"] = Json::array();
    for (const auto& [m, depth] : tree.preorder())
      j["modules"].push_back(Json{{"path", m->path}, {"type", m->type}, {"depth", depth},
                                  {"nodes", m->totalNodes}, {"own_nodes", m->ownNodes},
                                  {"param_bytes", m->totalParamBytes}, {"own_param_bytes", m->ownParamBytes}});
    os << j.dump(2) << "\n";
    return;
  }

  os << o.model << "\n";
  os << "  torch " << p.torchVersion << ", schema " << p.schemaMajor << "." << p.schemaMinor;
  if (!dialect.empty()) os << ", dialect " << dialect;
  if (pkg.metaExport) os << "\n  exported on the meta device: no tensor bytes in the file (bind them with --weights)";
  os << "\n  inputs:\n";
  for (const auto& io : inputs) os << "    " << io.name << "  " << io.dtype << " " << io.shape << "\n";
  os << "  outputs:\n";
  for (const auto& io : outputs)
    os << "    " << io.name << "  " << io.dtype << " " << io.shape << (io.kind == "user_output" ? "" : "  (" + io.kind + ")") << "\n";
  if (p.rangeConstraints.is_object() && !p.rangeConstraints.empty()) {
    os << "  symbols:\n";
    for (const auto& [sym, r] : p.rangeConstraints.items()) {
      auto bound = [&](const char* key, const char* none) {
        const Json& b = r.is_object() && r.contains(key) ? r[key] : Json();
        return b.is_number() ? b.dump() : std::string(none);
      };
      os << "    " << sym << "  [" << bound("min_val", "-inf") << ", " << bound("max_val", "inf") << "]\n";
    }
  }
  os << "  parameters: " << nParams << " (" << support::humanBinaryBytes(paramBytes) << "), buffers: " << nBuffers << " ("
     << support::humanBinaryBytes(bufferBytes) << "), constants: " << nConstants << " (" << support::humanBinaryBytes(constantBytes) << ")\n";
  os << "  nodes: " << p.graph.nodeCountRecursive() << " (" << p.graph.nodes.size() << " top level); verified: "
     << verified << "\n";
  os << "  operators:\n";
  for (const auto& [op, n] : ops) os << "    " << op << "  " << n << "\n";
  if (!regions.empty()) {
    os << "  higher-order regions:\n";
    for (const auto& r : regions)
      os << "    " << std::string(static_cast<size_t>(r.depth) * 2, ' ') << r.op << "(" << r.args << ") node '" << r.node
         << "' in " << (r.module.empty() ? "(root)" : r.module) << ": " << r.bodyNodes << " nodes\n";
  }
  if (weights) weightsText(*weights, os);
  if (support) supportText(*support, os);
  os << "  modules (nodes, parameter bytes):\n";
  for (const auto& [m, depth] : tree.preorder()) {
    std::string type = m->type.empty() ? "" : m->type.substr(m->type.rfind('.') + 1);
    os << "    " << std::string(static_cast<size_t>(depth) * 2, ' ') << (m->path.empty() ? "(root)" : m->path);
    if (!type.empty()) os << " " << type;
    os << "  nodes " << m->totalNodes << "  params " << m->totalParamBytes << " B";
    if (m->totalParamBytes >= 1024) os << " (" << support::humanBinaryBytes(m->totalParamBytes) << ")";
    os << "\n";
  }
}

}  // namespace pipecut::driver
