#include "partition/carve.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ir/clone.h"
#include "ir/module_tree.h"
#include "ir/op_traits.h"
#include "ir/schedule.h"
#include "ir/state.h"
#include "partition/stage_summary.h"
#include "partition/symbolic.h"
#include "support/dtypes.h"
#include "support/error.h"

namespace pipecut::partition {

using ir::Value;

TensorSpec tensorSpecOf(const Value& v) {
  TensorSpec t;
  if (v.kind != ir::ValueKind::Tensor) {
    t.dtype = ir::valueKindName(v.kind);
    return t;
  }
  if (!v.meta) return t;
  t.dtype = support::dtypeFromCode(v.meta->dtype)->torchName;
  for (const auto& s : v.meta->sizes) {
    DimSpec d;
    if (s.isExpr) d.symbol = s.str();
    else d.size = s.value;
    t.shape.push_back(d);
  }
  return t;
}

// Dimension 0 is taken to be the batch: bytes per batch element. A rank-0
// tensor counts whole. A symbolic dimension counts at the size export traced
// it with, so a dynamic program is costed at its example sizes.
uint64_t perSampleBytes(const Value& v) {
  if (!v.meta) return 0;
  const support::DType* d = support::dtypeFromCode(v.meta->dtype);
  uint64_t n = static_cast<uint64_t>(d->itemSize);
  for (size_t i = 1; i < v.meta->sizes.size(); ++i) {
    std::optional<int64_t> size = v.meta->sizes[i].example();
    if (!size) return 0;
    n *= static_cast<uint64_t>(std::max<int64_t>(0, *size));
  }
  return n;
}

namespace {

const char* liftedKind(ir::InputKind k) {
  switch (k) {
    case ir::InputKind::Parameter: return "parameter";
    case ir::InputKind::Buffer: return "buffer";
    case ir::InputKind::TensorConstant: return "constant";
    case ir::InputKind::CustomObj: return "custom_obj";
    case ir::InputKind::Token: return "token";
    default: return "";
  }
}

std::string flatSpec(size_t n, bool argsKwargs) {
  // torch's pytree "treespec" serialization, protocol 1.
  std::string leaves;
  for (size_t i = 0; i < n; ++i)
    leaves += std::string(i ? ", " : "") + R"({"type": null, "context": null, "children_spec": []})";
  std::string tuple = R"({"type": "builtins.tuple", "context": "null", "children_spec": [)" + leaves + "]}";
  if (!argsKwargs) return "[1, " + tuple + "]";
  return R"([1, {"type": "builtins.tuple", "context": "null", "children_spec": [)" + tuple +
         R"(, {"type": "builtins.dict", "context": "[]", "children_spec": []}]}])";
}

class Carver {
 public:
  Carver(const pt2::Package& whole, const pt2::TensorIndex& index, const Assignment& a, const CarveOptions& o)
      : whole_(whole), tensors_(index), p_(whole.program), g_(whole.program.graph), a_(a), opt_(o) {}

  Carving run() {
    index();
    for (int s = 0; s < a_.numStages; ++s) collectStage(s);
    routeValues();
    Carving c;
    c.manifest = manifestSkeleton();
    auto modules = containedModules(g_, a_);
    liftedTensors_.resize(stages_.size());  // buildStage fills them
    for (int s = 0; s < a_.numStages; ++s) c.stages.push_back(buildStage(s, std::move(modules[static_cast<size_t>(s)])));
    for (const auto& st : c.stages) c.manifest.stages.push_back(st.info);
    c.manifest.tiedGroups = tiedGroups(whole_, liftedTensors_);
    return c;
  }

 private:
  struct StageData {
    std::vector<size_t> nodes;                 // own and recomputed, by original position
    std::vector<const Value*> externals;       // what `nodes` read from outside, first-use order
    std::set<size_t> recomputedNodes;
    std::vector<std::string> recomputedValues;
    std::vector<const Value*> lifted;          // placeholders read, signature order
    std::vector<const Value*> inputs;          // boundary inputs, forward() order
    std::vector<const Value*> outputs;         // values sent on, forward() return order
    std::vector<std::pair<const Value*, size_t>> mutations;  // value, output spec index
    // Symbolic values other stages make (partition/symbolic.h).
    struct Rederived {
      const Value* value;
      const Value* tensor;  // an input of this stage with the symbol as a dimension
      int64_t dim;
    };
    std::vector<Rederived> rederived;
    std::vector<std::pair<const Value*, const Value*>> carriedIn;   // value, its carrier (an input)
    std::vector<std::pair<const Value*, const Value*>> carriedOut;  // value made here, its carrier (an output)
    size_t nodeCount = 0;  // `nodes` with the nodes of their bodies (the manifest's node_count)
  };

  void index() {
    ir::numberNodes(g_);
    g_.numberValues();
    userInput_.assign(g_.values.size(), kNone);
    liftedSpec_.assign(g_.values.size(), kNone);
    for (size_t i = 0; i < p_.inputSpecs.size(); ++i) {
      const auto& s = p_.inputSpecs[i];
      if (s.kind == ir::InputKind::UserInput) {
        if (s.arg.value()) setIndex(userInput_, s.arg.value(), userInputs_.size());
        userInputs_.push_back(i);
      } else if (s.kind != ir::InputKind::ConstantInput) {
        setIndex(liftedSpec_, s.arg.value(), i);
      }
    }
    for (const auto& st : ir::findState(p_)) state_.insert(st.placeholder);
    // The batch runs along the first user input's dimension 0 (input_ids of
    // a decode step), where it is static.
    for (size_t i : userInputs_) {
      const Value* v = p_.inputSpecs[i].arg.value();
      if (v && v->meta && !v->meta->sizes.empty() && !v->meta->sizes[0].isExpr) batch_ = v->meta->sizes[0].value;
      break;
    }
  }

  // The manifest's entry for a state tensor the stage holds: which dimension
  // runs along the batch (the first of the batch's size), and whether it
  // starts at zeros (a cache) or at what the stage files hold.
  StageState stateEntry(const Value& v, const std::string& fqn) const {
    StageState st;
    st.name = fqn;
    st.tensor = tensorSpecOf(v);
    if (v.meta && batch_)
      for (size_t d = 0; d < v.meta->sizes.size(); ++d)
        if (!v.meta->sizes[d].isExpr && v.meta->sizes[d].value == *batch_) {
          st.batchDim = static_cast<int32_t>(d);
          break;
        }
    st.initial = "zeros";
    if (const pt2::StoredTensor* stored = tensors_.find(fqn)) {
      pt2::ByteView bytes = stored->data.view();
      for (size_t i = 0; i < bytes.size; ++i)
        if (bytes.data[i] != 0) {
          st.initial = "stored";
          break;
        }
    }
    return st;
  }

  // The manifest's entry for a tensor the stage needs and its files hold no
  // bytes of (a weightless split), with the other names of its storage in
  // the whole program (tied: any of them may bind it).
  ExternalTensor externalEntry(const pt2::StoredTensor& t, const std::string& kind) {
    ExternalTensor e;
    e.name = t.fqn;
    e.kind = kind;
    e.tensor.dtype = support::dtypeFromCode(t.meta->dtype)->torchName;
    for (const auto& d : t.meta->sizes) e.tensor.shape.push_back(DimSpec{d.value, d.isExpr ? d.str() : ""});
    if (aliases_.empty()) {
      for (const auto* table : {&whole_.weights, &whole_.constants})
        for (const auto& [fqn, other] : *table) {
          if (!other.external) continue;
          auto [holder, name] = other.data.storageKey(other.fqn);
          aliases_[std::string(name)].insert(fqn);
        }
    }
    auto [holder, name] = t.data.storageKey(t.fqn);
    if (auto it = aliases_.find(std::string(name)); it != aliases_.end())
      for (const std::string& other : it->second)
        if (other != t.fqn) e.aliases.push_back(other);
    return e;
  }

  // A carrier stands for the symbolic value it carries.
  const Value* origin(const Value* v) const {
    auto it = carried_.find(v);
    return it == carried_.end() ? v : it->second;
  }

  int homeStage(const Value* v) const {
    v = origin(v);
    return v->producer ? a_.stageOf[pos(v->producer)] : -1;
  }

  // A produced value's place in the program: its producer's position, then
  // its index among that node's outputs. Total and stable (never a pointer),
  // so stage inputs and outputs come in the same order on every run.
  std::pair<size_t, size_t> valueOrder(const Value* v) const {
    v = origin(v);
    size_t index = 0, found = 0;
    for (const auto& out : v->producer->outputs)
      out.forEachValue([&](const Value* o) {
        if (o == v) found = index;
        ++index;
      });
    return {pos(v->producer), found};
  }

  // Nodes needed to compute v in another stage, if that is cheap; empty if not.
  std::vector<size_t> recomputeSlice(const Value* v) const {
    if (!opt_.recompute || !v->producer || v->kind != ir::ValueKind::Tensor) return {};
    uint64_t valueBytes = perSampleBytes(*v);
    if (valueBytes == 0) return {};
    std::vector<size_t> stack{pos(v->producer)}, slice;
    std::unordered_set<size_t> seen(stack.begin(), stack.end());
    std::unordered_set<const Value*> leaves;
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      const ir::Node& n = *g_.nodes[i];
      if (ir::changesState(n) || ir::isComputeHeavy(n)) return {};
      slice.push_back(i);
      if (slice.size() > opt_.maxRecomputeNodes) return {};
      n.forEachInputValue([&](Value* in) {
        if (!in->producer) {
          leaves.insert(in);
        } else if (size_t d = pos(in->producer); seen.insert(d).second) {
          stack.push_back(d);
        }
      });
    }
    uint64_t inputBytes = 0, liftedBytes = 0;
    for (const Value* leaf : leaves) {
      if (indexOf(userInput_, leaf) != kNone) {
        inputBytes += perSampleBytes(*leaf);
        if (perSampleBytes(*leaf) == 0) return {};
      } else if (size_t spec = indexOf(liftedSpec_, leaf); spec != kNone) {
        liftedBytes += tensors_.bytes(p_.inputSpecs[spec].target);
      } else {
        return {};
      }
    }
    if (inputBytes >= valueBytes || liftedBytes > opt_.maxRecomputeLiftedBytes) return {};
    std::sort(slice.begin(), slice.end());
    return slice;
  }


  // External values a node set reads, in first-use order; `nodeCount` gets
  // the nodes with their bodies' (the walk reads their arguments anyway).
  // Membership and "seen" are flags over node positions and value numbers
  // (index() numbers both): hash sets of 10^5 entries cost a cache miss per
  // probe. A value of another scope (the verifier refuses those) goes
  // through a set.
  std::vector<const Value*> externals(const std::vector<size_t>& nodes, size_t& nodeCount) const {
    std::vector<char> inSet(g_.nodes.size(), 0);
    for (size_t i : nodes) inSet[i] = 1;
    std::vector<char> seen(g_.values.size(), 0);
    std::unordered_set<const Value*> seenElsewhere;
    std::vector<const Value*> out;
    nodeCount = nodes.size();
    for (size_t i : nodes) {
      ir::prefetchWalk(g_, i);  // a stage's nodes are mostly one run of the graph's
      for (const auto& in : g_.nodes[i]->inputs) {
        // A body is a graph argument, which only higher-order ops have (the
        // reader refuses it elsewhere): Node::subgraphs without the target.
        if (const ir::Graph* body = in.arg.body()) nodeCount += body->nodeCountRecursive();
        in.arg.forEachValue([&](Value* v) {
          if (v->producer && inSet[pos(v->producer)]) return;
          bool fresh = g_.owns(v) ? !std::exchange(seen[v->number], 1) : seenElsewhere.insert(v).second;
          if (fresh) out.push_back(v);
        });
      }
    }
    return out;
  }

  void collectStage(int s) {
    StageData d;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (a_.stageOf[i] == s) d.nodes.push_back(i);
    std::set<size_t> extra;
    d.externals = externals(d.nodes, d.nodeCount);
    for (const Value* v : d.externals) {
      if (!v->producer) continue;
      auto slice = recomputeSlice(v);
      if (slice.empty()) continue;
      d.recomputedValues.push_back(v->name);
      extra.insert(slice.begin(), slice.end());
    }
    for (size_t i : extra)
      if (a_.stageOf[i] != s) d.recomputedNodes.insert(i);
    if (!d.recomputedNodes.empty()) {
      // Both runs are ascending (positions, a set): merged in linear time
      // where sorting 10^5 positions took a few milliseconds.
      const auto own = static_cast<std::ptrdiff_t>(d.nodes.size());
      d.nodes.insert(d.nodes.end(), d.recomputedNodes.begin(), d.recomputedNodes.end());
      std::inplace_merge(d.nodes.begin(), d.nodes.begin() + own, d.nodes.end());
      d.externals = externals(d.nodes, d.nodeCount);
    }
    stages_.push_back(std::move(d));
  }

  void routeValues() {
    // Which values each stage receives, and from whom.
    std::vector<std::vector<const Value*>> received(stages_.size());
    for (size_t s = 0; s < stages_.size(); ++s) {
      StageData& d = stages_[s];
      std::vector<const Value*> symbolic;
      for (const Value* v : d.externals) {
        if (v->kind == ir::ValueKind::CustomObj || indexOf(liftedSpec_, v) != kNone) {
          d.lifted.push_back(v);
        } else if (indexOf(userInput_, v) != kNone) {
          d.inputs.push_back(v);
        } else if (v->producer) {
          int home = homeStage(v);
          if (home >= static_cast<int>(s)) internalError("carve", "value '" + v->name + "' flows backward");
          (v->kind == ir::ValueKind::Tensor ? received[s] : symbolic).push_back(v);
        } else {
          invalidInput("stage " + std::to_string(s), "value '" + v->name + "' has no source");
        }
      }
      sortByIndex(d.lifted, liftedSpec_);
      sortByIndex(d.inputs, userInput_);
      crossSymbolic(s, symbolic, received[s]);
      std::sort(received[s].begin(), received[s].end(), [&](const Value* x, const Value* y) {
        return std::make_pair(homeStage(x), valueOrder(x)) < std::make_pair(homeStage(y), valueOrder(y));
      });
      d.inputs.insert(d.inputs.end(), received[s].begin(), received[s].end());
    }
    // What each stage sends: values others receive, and user outputs.
    std::vector<std::map<std::pair<size_t, size_t>, const Value*>> sends(stages_.size());
    for (size_t s = 0; s < stages_.size(); ++s)
      for (const Value* v : received[s]) sends[static_cast<size_t>(homeStage(v))].emplace(valueOrder(v), v);
    for (size_t k = 0; k < p_.outputSpecs.size(); ++k) {
      const auto& spec = p_.outputSpecs[k];
      const Value* v = spec.arg.value();
      switch (spec.kind) {
        case ir::OutputKind::UserOutput:
          if (v && v->producer) sends[static_cast<size_t>(homeStage(v))].emplace(valueOrder(v), v);
          else if (spec.arg.refs.size() != 1 || (!v && spec.arg.tag != ir::ArgTag::Tensor))
            invalidInput("signature.output_specs[" + std::to_string(k) + "]",
                         "a constant user output cannot be produced by a stage");
          break;
        case ir::OutputKind::BufferMutation: {
          if (!v->producer) break;  // buffer written with an input: nothing to apply
          size_t home = static_cast<size_t>(homeStage(v));
          for (size_t s = 0; s < stages_.size(); ++s) {
            if (s == home) continue;
            for (const Value* l : stages_[s].lifted)
              if (p_.inputSpecs[specOf(l)].target == spec.target)
                invalidInput("buffer '" + spec.target + "'", "it is updated in stage " + std::to_string(home) +
                                                                  " but read in stage " + std::to_string(s) +
                                                                  "; keep a buffer's readers and its update in one stage");
          }
          stages_[home].mutations.emplace_back(v, k);
          break;
        }
        default:
          invalidInput("signature.output_specs[" + std::to_string(k) + "]",
                       std::string("outputs of kind '") + ir::outputKindKey(spec.kind) +
                           "' (training or input mutation) cannot be pipelined");
      }
    }
    for (size_t s = 0; s < stages_.size(); ++s)
      for (const auto& [p, v] : sends[s]) stages_[s].outputs.push_back(v);
  }

  // Symbolic values stage s uses but another stage makes: read back from a
  // dimension of a tensor the stage has as an input anyway, or carried as a
  // 0-d tensor (one carrier per value, shared by every stage that needs it).
  void crossSymbolic(size_t s, const std::vector<const Value*>& symbolic, std::vector<const Value*>& received) {
    StageData& d = stages_[s];
    for (const Value* v : symbolic) {
      std::optional<std::string> symbol = bareSymbol(*v);
      const Value* source = nullptr;
      int64_t dim = 0;
      if (symbol)
        for (const auto* list : {&d.inputs, &received})
          for (const Value* t : *list)
            if (auto k = dimOfSymbol(*t, *symbol); k && !source) {
              source = t;
              dim = *k;
            }
      if (source) {
        d.rederived.push_back({v, source, dim});
        d.recomputedValues.push_back(v->name);
        continue;
      }
      auto it = carrierOf_.find(v);
      if (it == carrierOf_.end()) {
        std::string name = v->name + "_carrier";
        while (g_.find(name)) name += "_";
        carriers_.push_back(makeCarrier(*v, name, homeDevice()));
        it = carrierOf_.emplace(v, carriers_.back().get()).first;
        carried_[it->second] = v;
        stages_[static_cast<size_t>(homeStage(v))].carriedOut.emplace_back(v, it->second);
      }
      d.carriedIn.emplace_back(v, it->second);
      received.push_back(it->second);
    }
  }

  // Where the program's tensors live: carriers are made there too.
  ir::Device homeDevice() const {
    for (const auto& v : g_.values)
      if (v->meta) return v->meta->device;
    return ir::Device{};
  }

  Manifest manifestSkeleton() const {
    Manifest m;
    m.metaExport = whole_.metaExport;
    m.torchVersion = p_.torchVersion;
    m.schemaVersion = std::to_string(p_.schemaMajor) + "." + std::to_string(p_.schemaMinor);
    for (size_t k : userInputs_) {
      const auto& s = p_.inputSpecs[k];
      UserValue u;
      u.name = s.arg.value() ? s.arg.value()->name : s.target;
      if (s.arg.value()) u.tensor = tensorSpecOf(*s.arg.value());
      m.inputs.push_back(u);
    }
    for (const auto& entry : p_.moduleCallGraph)
      if (entry.fqn.empty() && entry.signature.is_object()) {
        m.inSpec = entry.signature.value("in_spec", "");
        m.outSpec = entry.signature.value("out_spec", "");
      }
    return m;
  }

  CarvedStage buildStage(int s, std::vector<std::string> modules) {
    const StageData& d = stages_[static_cast<size_t>(s)];
    CarvedStage out;
    pt2::Package& pkg = out.package;
    ir::Program& sp = pkg.program;
    pkg.modelName = "model";
    sp.schemaMajor = p_.schemaMajor;
    sp.schemaMinor = p_.schemaMinor;
    sp.torchVersion = p_.torchVersion;
    sp.opsetVersion = p_.opsetVersion;
    sp.verifiers = p_.verifiers;
    sp.rangeConstraints = p_.rangeConstraints;
    sp.graphModuleMetadata = p_.graphModuleMetadata;

    ir::ValueMap map;
    const bool programs = opt_.programs;
    for (const Value* v : d.lifted) {
      const ir::InputSpec& orig = p_.inputSpecs[specOf(v)];
      if (programs) {
        Value* nv = ir::cloneValueInto(*v, sp.graph, nullptr);
        map[v] = nv;
        ir::InputSpec spec = orig;
        spec.arg = orig.kind == ir::InputKind::CustomObj ? orig.arg : ir::Argument::tensor(nv);
        if (orig.kind == ir::InputKind::CustomObj) spec.arg.refs[0].value = nv;
        sp.graph.inputs.push_back(spec.arg);
        sp.inputSpecs.push_back(std::move(spec));
        const std::map<std::string, pt2::StoredTensor>* tables[] = {&whole_.weights, &whole_.constants};
        for (int t = 0; t < 2; ++t)
          if (auto it = tables[t]->find(orig.target); it != tables[t]->end())
            (t == 0 ? pkg.weights : pkg.constants).emplace(orig.target, it->second);
      }
      StageParameter param;
      param.name = orig.target;
      param.kind = liftedKind(orig.kind);
      // A non-persistent buffer is outside the state dict: training
      // checkpoints and `pipecut merge` must leave it out.
      if (orig.kind == ir::InputKind::Buffer && orig.persistent == std::optional<bool>(false))
        param.kind = "non_persistent_buffer";
      const pt2::StoredTensor* stored = tensors_.find(orig.target);
      liftedTensors_[static_cast<size_t>(s)].push_back(stored);
      param.bytes = stored ? stored->logicalBytes() : 0;
      out.info.parameters.push_back(param);
      out.info.parameterBytes += param.bytes;
      if (state_.count(v)) out.info.state.push_back(stateEntry(*v, orig.target));
      else if (stored && stored->external) out.info.external.push_back(externalEntry(*stored, param.kind));
    }
    std::sort(out.info.external.begin(), out.info.external.end(),
              [](const ExternalTensor& x, const ExternalTensor& y) { return x.name < y.name; });
    for (const Value* v : d.inputs) {
      if (programs) {
        Value* nv = ir::cloneValueInto(*v, sp.graph, nullptr);
        map[v] = nv;
        ir::InputSpec spec;
        spec.kind = ir::InputKind::UserInput;
        spec.arg = ir::Argument::tensor(nv);
        sp.graph.inputs.push_back(spec.arg);
        sp.inputSpecs.push_back(std::move(spec));
      }

      StageInput in;
      in.name = v->name;
      in.tensor = tensorSpecOf(*v);
      if (size_t user = indexOf(userInput_, v); user != kNone) {
        in.source.kind = ValueSource::Kind::UserInput;
        in.source.userInput = static_cast<uint32_t>(user);
      } else {
        in.source.kind = ValueSource::Kind::StageOutput;
        in.source.stage = static_cast<uint32_t>(homeStage(v));
        in.source.output = outputIndex(homeStage(v), v);
      }
      out.info.inputs.push_back(in);
    }
    // Symbolic values from other stages come first: they are made from inputs only.
    if (programs) {
      for (const auto& r : d.rederived) map[r.value] = appendSymSize(sp.graph, map.at(r.tensor), r.dim, *r.value);
      for (const auto& [v, carrier] : d.carriedIn) map[v] = appendItem(sp.graph, map.at(carrier), *v);
      for (size_t i : d.nodes) ir::cloneNodeInto(*g_.nodes[i], sp.graph, map);
    }
    if (programs)
      for (const auto& [v, carrier] : d.carriedOut) map[carrier] = appendScalarTensor(sp.graph, map.at(v), *carrier);

    if (programs)
      for (const auto& [v, k] : d.mutations) {
        ir::OutputSpec spec = p_.outputSpecs[k];
        spec.arg = ir::Argument::tensor(map.at(v));
        sp.graph.outputs.push_back(spec.arg);
        sp.outputSpecs.push_back(std::move(spec));
      }
    for (const Value* v : d.outputs) {
      if (programs) {
        ir::OutputSpec spec;
        spec.kind = ir::OutputKind::UserOutput;
        spec.arg = ir::Argument::tensor(map.at(v));
        sp.graph.outputs.push_back(spec.arg);
        sp.outputSpecs.push_back(std::move(spec));
      }

      StageOutput o;
      o.name = v->name;
      o.tensor = tensorSpecOf(*v);
      bool toStage = false;
      for (size_t t = 0; t < stages_.size(); ++t) {
        const auto& ins = stages_[t].inputs;
        for (size_t k = 0; k < ins.size(); ++k)
          if (ins[k] == v) {
            Consumer c;
            c.kind = Consumer::Kind::StageInput;
            c.stage = static_cast<uint32_t>(t);
            c.input = static_cast<uint32_t>(k);
            o.consumers.push_back(c);
            toStage = true;
          }
      }
      for (size_t k = 0, user = 0; k < p_.outputSpecs.size(); ++k) {
        if (p_.outputSpecs[k].kind != ir::OutputKind::UserOutput) continue;
        if (p_.outputSpecs[k].arg.value() == v) {
          Consumer c;
          c.kind = Consumer::Kind::UserOutput;
          c.userOutput = static_cast<uint32_t>(user);
          o.consumers.push_back(c);
        }
        ++user;
      }
      if (toStage) out.info.boundaryBytesPerSample += perSampleBytes(*v);
      out.info.outputs.push_back(o);
    }

    if (programs) {
      std::vector<std::string> argNames;
      for (const Value* v : d.inputs) argNames.push_back(v->name);
      ir::Json sig{{"inputs", ir::Json::array()}, {"outputs", ir::Json::array()},
                   {"in_spec", flatSpec(d.inputs.size(), true)}, {"out_spec", flatSpec(d.outputs.size(), false)},
                   {"forward_arg_names", argNames}};
      sp.moduleCallGraph.push_back(ir::ModuleCallEntry{"", sig});
    }

    out.info.index = static_cast<uint32_t>(s);
    out.info.nodeCount = static_cast<uint32_t>(d.nodeCount);
    out.info.modules = std::move(modules);
    out.info.recomputed = d.recomputedValues;
    return out;
  }

  uint32_t outputIndex(int stage, const Value* v) const {
    const auto& outs = stages_[static_cast<size_t>(stage)].outputs;
    auto it = std::find(outs.begin(), outs.end(), v);
    if (it == outs.end()) internalError("carve", "value '" + v->name + "' is not an output of its stage");
    return static_cast<uint32_t>(it - outs.begin());
  }

  const pt2::Package& whole_;
  const pt2::TensorIndex& tensors_;  // every stage asks about each of its lifted tensors
  const ir::Program& p_;
  const ir::Graph& g_;
  const Assignment& a_;
  CarveOptions opt_;
  size_t pos(const ir::Node* n) const {
    auto p = ir::positionIn(g_, n);
    if (!p) internalError("carve", "a producer is not a node of the graph");
    return *p;
  }
  // By value number (index() numbers them), kNone where a value has none:
  // flat arrays where maps keyed by pointers cost a cache miss per lookup,
  // and ordering a stage's 10^4 lifted tensors looked up n log n times.
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> userInput_;   // value -> flat user input index
  std::vector<size_t> userInputs_;  // flat index -> input spec index
  std::vector<size_t> liftedSpec_;  // value -> input spec index
  std::unordered_set<const Value*> state_;  // lifted tensors updated in place (ir/state.h)
  std::optional<int64_t> batch_;            // the batch size, where the first user input says
  void setIndex(std::vector<size_t>& table, const Value* v, size_t index) const {
    if (!v) return;
    if (!g_.owns(v)) internalError("carve", "input '" + v->name + "' is not a value of the graph");
    table[v->number] = index;
  }
  size_t indexOf(const std::vector<size_t>& table, const Value* v) const {
    return g_.owns(v) ? table[v->number] : kNone;
  }
  size_t specOf(const Value* v) const {
    size_t spec = indexOf(liftedSpec_, v);
    if (spec == kNone) internalError("carve", "value '" + v->name + "' is not a lifted input");
    return spec;
  }
  void sortByIndex(std::vector<const Value*>& values, const std::vector<size_t>& table) const {
    std::vector<std::pair<size_t, const Value*>> keyed;
    keyed.reserve(values.size());
    for (const Value* v : values) keyed.emplace_back(indexOf(table, v), v);
    std::sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t i = 0; i < keyed.size(); ++i) values[i] = keyed[i].second;
  }
  std::vector<StageData> stages_;
  std::vector<std::vector<const pt2::StoredTensor*>> liftedTensors_;  // by stage, as `lifted` (tied groups)
  // External tensors' names by storage (pt2::Blob::storageKey's name), made
  // at the first external tensor a stage lifts.
  std::map<std::string, std::set<std::string>> aliases_;
  std::vector<std::unique_ptr<Value>> carriers_;              // 0-d tensors carrying symbolic values
  std::unordered_map<const Value*, const Value*> carrierOf_;  // symbolic value -> its carrier
  std::unordered_map<const Value*, const Value*> carried_;    // carrier -> the value it carries
};

}  // namespace

namespace {

// The range of every symbol the manifest's shapes name, from the program's
// range_constraints. Symbols without one (a size expression like "s72*s70")
// are checked for consistency only.
std::vector<SymbolRange> symbolRanges(const Manifest& m, const ir::Json& constraints) {
  std::set<std::string> named;
  auto collect = [&](const TensorSpec& t) {
    for (const auto& d : t.shape)
      if (!d.symbol.empty()) named.insert(d.symbol);
  };
  for (const auto& u : m.inputs) collect(u.tensor);
  for (const auto& u : m.outputs) collect(u.tensor);
  for (const auto& st : m.stages) {
    for (const auto& in : st.inputs) collect(in.tensor);
    for (const auto& out : st.outputs) collect(out.tensor);
  }
  auto bound = [](const ir::Json& r, const char* key) -> std::optional<int64_t> {
    if (!r.is_object() || !r.contains(key) || !r[key].is_number_integer()) return std::nullopt;
    if (r[key].is_number_unsigned() && r[key].get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return r[key].get<int64_t>();
  };
  std::vector<SymbolRange> out;
  for (const std::string& sym : named) {
    if (!constraints.is_object() || !constraints.contains(sym)) continue;
    const ir::Json& r = constraints[sym];
    out.push_back(SymbolRange{sym, bound(r, "min_val").value_or(0), bound(r, "max_val")});
  }
  return out;
}

}  // namespace

Carving carve(const pt2::Package& whole, const Assignment& a, const CarveOptions& o) {
  return carve(whole, pt2::TensorIndex(whole), a, o);
}

Carving carve(const pt2::Package& whole, const pt2::TensorIndex& index, const Assignment& a, const CarveOptions& o) {
  Carving c = Carver(whole, index, a, o).run();
  // Manifest outputs: where each flat user output comes from.
  const ir::Program& p = whole.program;
  std::unordered_map<const Value*, uint32_t> userInputIndex;
  for (uint32_t k = 0; k < c.manifest.inputs.size(); ++k) {
    const Value* v = p.graph.find(c.manifest.inputs[k].name);
    if (v) userInputIndex[v] = k;
  }
  for (const auto& spec : p.outputSpecs) {
    if (spec.kind != ir::OutputKind::UserOutput) continue;
    UserValue u;
    const Value* v = spec.arg.value();
    u.name = v ? v->name : spec.arg.literal.dump();
    if (v) u.tensor = tensorSpecOf(*v);
    if (v && !v->producer && userInputIndex.count(v)) {
      ValueSource src;
      src.kind = ValueSource::Kind::UserInput;
      src.userInput = userInputIndex.at(v);
      u.source = src;
    }
    c.manifest.outputs.push_back(u);
  }
  for (const auto& st : c.stages)
    for (uint32_t o = 0; o < st.info.outputs.size(); ++o)
      for (const auto& cons : st.info.outputs[o].consumers)
        if (cons.kind == Consumer::Kind::UserOutput) {
          ValueSource src;
          src.kind = ValueSource::Kind::StageOutput;
          src.stage = st.info.index;
          src.output = o;
          c.manifest.outputs[cons.userOutput].source = src;
        }
  c.manifest.symbols = symbolRanges(c.manifest, p.rangeConstraints);
  return c;
}

}  // namespace pipecut::partition
