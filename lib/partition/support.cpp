#include "partition/support.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include <nlohmann/json.hpp>

#include "ir/op_traits.h"
#include "ir/schedule.h"
#include "support/dtypes.h"
#include "support/error.h"

namespace pipecut::partition {

namespace {

using ir::Json;

// One dictionary entry: nullopt takes any dtypes; else per positional
// argument, nullopt (any) or the dtypes allowed.
using ArgDtypes = std::optional<std::vector<std::optional<std::set<int>>>>;

std::string dtypeList(const std::set<int>& codes) {
  std::vector<std::string> names;
  for (int c : codes) names.push_back(support::dtypeFromCode(c)->torchName);
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

class DictionaryTarget : public SupportTarget {
 public:
  DictionaryTarget(std::string file, std::map<std::string, ArgDtypes> ops, std::set<std::string> checked)
      : file_(std::move(file)), ops_(std::move(ops)), checked_(std::move(checked)) {}

  std::string name() const override {
    return file_ == "--support" ? "dictionary (inline)" : "dictionary " + std::filesystem::path(file_).filename().string();
  }

  std::optional<std::string> refuses(const ir::Node& n, const NodeContext&) const override {
    const std::string op = n.opName();
    auto it = ops_.find(op);
    if (it == ops_.end()) return "the dictionary does not name " + op;
    if (!it->second) return std::nullopt;
    const auto& args = *it->second;
    const std::string where = "key '" + op + "'";
    // Entries past the arguments the call gives (export leaves defaulted
    // ones out) have nothing to check. Against a known schema the lists were
    // checked as they were read; else against the call.
    size_t given = 0;
    while (given < n.inputs.size() && n.inputs[given].kind.value_or(1) == 1) ++given;
    if (!checked_.count(op) && args.size() > given)
      throw Error(ErrorKind::InvalidInput, file_, where,
                  "lists " + std::to_string(args.size()) + " arguments, but node '" + n.label() + "' calls " + op +
                      " with " + std::to_string(given));
    for (size_t i = 0; i < args.size() && i < given; ++i) {
      if (!args[i]) continue;
      const ir::Argument& a = n.inputs[i].arg;
      if (a.tag == ir::ArgTag::None) continue;  // an optional tensor left out
      const bool tensor = (a.tag == ir::ArgTag::Tensor || a.tag == ir::ArgTag::OptionalTensor) && a.isValue();
      if (!tensor)
        throw Error(ErrorKind::InvalidInput, file_, where,
                    "lists dtypes for argument " + std::to_string(i) + " ('" + n.inputs[i].name + "'), which is not a tensor (node '" +
                        n.label() + "')");
      const ir::Value* v = a.value();
      if (!v->meta) continue;
      if (!args[i]->count(v->meta->dtype))
        return "argument " + std::to_string(i) + " is " + support::dtypeFromCode(v->meta->dtype)->torchName +
               ", the target takes " + dtypeList(*args[i]);
    }
    return std::nullopt;
  }

 private:
  std::string file_;
  std::map<std::string, ArgDtypes> ops_;
  std::set<std::string> checked_;  // keys whose lists were checked against the schema
};

bool isSymbolicKind(ir::ValueKind k) {
  return k == ir::ValueKind::SymInt || k == ir::ValueKind::SymBool || k == ir::ValueKind::SymFloat;
}

size_t computeNodes(const ir::Node& n) {
  size_t count = 0;
  bool tensorOut = false;
  n.forEachOutputValue([&](const ir::Value* v) { tensorOut |= v->kind == ir::ValueKind::Tensor; });
  if (tensorOut) ++count;
  for (const ir::Graph* body : n.subgraphs())
    for (const auto& m : body->nodes) count += computeNodes(*m);
  return count;
}

// The first refusal in `n` or its bodies, appending every node's verdict.
std::optional<std::string> judge(const ir::Node& n, size_t top, int depth, const NodeContext& ctx,
                                 const SupportTarget& target, std::vector<NodeVerdict>& out) {
  const size_t at = out.size();
  out.push_back(NodeVerdict{&n, top, depth, true, ""});
  const bool follows = computesSizesOnly(n) || ir::isExportGuard(n);
  std::optional<std::string> own = follows ? std::nullopt : target.refuses(n, ctx);
  std::optional<std::string> first = own;
  NodeContext inner{&n};
  for (const ir::Graph* body : n.subgraphs())
    for (const auto& m : body->nodes) {
      std::optional<std::string> r = judge(*m, top, depth + 1, inner, target, out);
      if (r && !first) first = "its body holds node '" + m->label() + "' (" + m->opName() + "): " + *r;
    }
  out[at].supported = !first.has_value();
  if (own) out[at].reason = *own;
  else if (first) out[at].reason = *first;
  return first;
}

}  // namespace

bool computesSizesOnly(const ir::Node& n) {
  if (n.isHigherOrder() || n.outputs.empty()) return false;
  bool any = false, onlySym = true;
  n.forEachOutputValue([&](const ir::Value* v) {
    any = true;
    onlySym &= isSymbolicKind(v->kind);
  });
  return any && onlySym;
}

std::unique_ptr<SupportTarget> dictionaryTarget(const std::string& text, const std::string& file,
                                                const SignatureLookup& signatures) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw Error(ErrorKind::InvalidInput, file, "", std::string("not JSON: ") + e.what());
  }
  if (!j.is_object())
    throw Error(ErrorKind::InvalidInput, file, "", "a support dictionary is a JSON object {\"operator\": null | [...]}");
  std::map<std::string, ArgDtypes> ops;
  std::set<std::string> checked;
  for (const auto& [key, value] : j.items()) {
    const std::string where = "key '" + key + "'";
    if (key.empty() || key.find('.') == std::string::npos)
      throw Error(ErrorKind::InvalidInput, file, where,
                  "not an operator name as pipecut inspect prints them (e.g. aten.linear.default)");
    if (value.is_null()) {
      ops.emplace(key, std::nullopt);
      continue;
    }
    if (!value.is_array())
      throw Error(ErrorKind::InvalidInput, file, where,
                  "expected null (any dtypes) or a list with one entry per positional argument, got " + value.dump());
    std::vector<std::optional<std::set<int>>> args;
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& entry = value[i];
      if (entry.is_null()) {
        args.emplace_back();
        continue;
      }
      if (!entry.is_array() || entry.empty())
        throw Error(ErrorKind::InvalidInput, file, where,
                    "argument " + std::to_string(i) + ": expected null or a non-empty list of dtype names, got " + entry.dump());
      std::set<int> codes;
      for (const Json& d : entry) {
        const support::DType* dt = d.is_string() ? support::dtypeFromTorchName(d.get<std::string>()) : nullptr;
        if (!dt)
          throw Error(ErrorKind::InvalidInput, file, where,
                      "argument " + std::to_string(i) + ": unknown dtype " + d.dump() + " (dtypes as torch names them: float32, bfloat16, int64, ...)");
        codes.insert(dt->code);
      }
      args.emplace_back(std::move(codes));
    }
    if (std::optional<OperatorSignature> sig = signatures ? signatures(key) : std::nullopt) {
      std::string names;
      for (const auto& n : sig->names) names += (names.empty() ? "" : ", ") + n;
      if (args.size() > sig->names.size())
        throw Error(ErrorKind::InvalidInput, file, where,
                    "lists " + std::to_string(args.size()) + " arguments, but " + key + " takes " +
                        std::to_string(sig->names.size()) + " positional (" + names + ")");
      for (size_t i = 0; i < args.size(); ++i)
        if (args[i] && !sig->tensor[i])
          throw Error(ErrorKind::InvalidInput, file, where,
                      "lists dtypes for argument " + std::to_string(i) + " ('" + sig->names[i] + "'), which is not a tensor");
      checked.insert(key);
    }
    ops.emplace(key, std::move(args));
  }
  return std::make_unique<DictionaryTarget>(file, std::move(ops), std::move(checked));
}

SupportMarks markSupport(const ir::Program& program, const SupportTarget& target) {
  SupportMarks m;
  m.target = target.name();
  const auto& nodes = program.graph.nodes;
  m.supported.assign(nodes.size(), 1);
  m.reason.assign(nodes.size(), "");
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::optional<std::string> r = judge(*nodes[i], i, 0, NodeContext{}, target, m.nodes);
    if (r) m.supported[i] = 0, m.reason[i] = *r;
  }
  return m;
}

SupportRuns supportRuns(const ir::Program& program, SupportMarks& marks, size_t minSupportedNodes) {
  const auto& nodes = program.graph.nodes;
  const size_t n = nodes.size();
  ir::numberNodes(program.graph);

  // 1. Groups joined by values that are not tensors.
  std::vector<size_t> parent(n);
  std::iota(parent.begin(), parent.end(), size_t{0});
  auto find = [&](size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t i = 0; i < n; ++i)
    nodes[i]->forEachInputValue([&](const ir::Value* v) {
      if (v->kind == ir::ValueKind::Tensor || !v->producer) return;
      if (auto p = ir::positionIn(program.graph, v->producer)) parent[find(*p)] = find(i);
    });
  std::map<size_t, std::vector<size_t>> groups;
  for (size_t i = 0; i < n; ++i) groups[find(i)].push_back(i);
  // A group spans [first, last] of the program order, and stages are
  // ranges of it: a cut anywhere in the span would separate the group. So a
  // span that holds an unsupported node is one unsupported run, all of it.
  // That can widen another group's unsupported span: repeat until nothing
  // changes (each round only adds marks).
  std::vector<size_t> unsupportedPrefix(n + 1);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) unsupportedPrefix[i + 1] = unsupportedPrefix[i] + (marks.supported[i] ? 0 : 1);
    for (const auto& [root, members] : groups) {
      if (members.size() < 2) continue;
      const size_t first = members.front(), last = members.back();
      if (unsupportedPrefix[last + 1] == unsupportedPrefix[first]) continue;
      size_t culprit = first;
      while (marks.supported[culprit]) ++culprit;
      for (size_t k = first; k <= last; ++k)
        if (marks.supported[k]) {
          marks.supported[k] = 0;
          marks.reason[k] = "lies between nodes '" + nodes[first]->label() + "' and '" + nodes[last]->label() +
                            "', which share a value that is not a tensor and so stay in one stage, with unsupported "
                            "node '" + nodes[culprit]->label() + "'";
          changed = true;
        }
    }
  }

  // 2. Supported runs too small to stand alone; 3. maximal runs.
  std::vector<size_t> compute(n);
  for (size_t i = 0; i < n; ++i) compute[i] = computeNodes(*nodes[i]);
  for (size_t i = 0; i < n;) {
    size_t j = i, count = 0;
    while (j < n && marks.supported[j] == marks.supported[i]) count += compute[j++];
    if (marks.supported[i] && count < minSupportedNodes)
      for (size_t k = i; k < j; ++k) {
        marks.supported[k] = 0;
        marks.reason[k] = "in a supported run of " + std::to_string(count) + " compute node" + (count == 1 ? "" : "s") +
                          ", fewer than --min-supported-nodes " + std::to_string(minSupportedNodes);
      }
    i = j;
  }
  SupportRuns r;
  r.runOf.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || marks.supported[i] != marks.supported[i - 1]) {
      r.runSupported.push_back(marks.supported[i]);
      r.runReason.push_back(marks.supported[i] ? "" : "node '" + nodes[i]->label() + "' (" + nodes[i]->opName() + "): " + marks.reason[i]);
    }
    r.runOf[i] = static_cast<int>(r.runSupported.size()) - 1;
  }
  return r;
}

SupportedAssignment cutAtRuns(const ir::Program& program, const Assignment& a, const SupportRuns& runs,
                              const SupportMarks& marks) {
  SupportedAssignment out;
  std::map<std::pair<int, int>, int> rank;
  for (size_t i = 0; i < a.stageOf.size(); ++i) rank.emplace(std::pair{a.stageOf[i], runs.runOf[i]}, 0);
  int next = 0;
  for (auto& [key, id] : rank) {
    id = next++;
    out.stageSupported.push_back(runs.runSupported[static_cast<size_t>(key.second)]);
  }
  out.stageReason.assign(static_cast<size_t>(next), "");
  out.assignment.numStages = next;
  out.assignment.stageOf.resize(a.stageOf.size());
  for (size_t i = 0; i < a.stageOf.size(); ++i) {
    const int s = out.assignment.stageOf[i] = rank.at({a.stageOf[i], runs.runOf[i]});
    std::string& reason = out.stageReason[static_cast<size_t>(s)];
    if (!marks.supported[i] && reason.empty())
      reason = "node '" + program.graph.nodes[i]->label() + "' (" + program.graph.nodes[i]->opName() + "): " + marks.reason[i];
  }
  return out;
}

}  // namespace pipecut::partition
