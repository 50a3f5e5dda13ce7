#include "weights/binding.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_set>

#include "ir/state.h"
#include "support/digest.h"
#include "support/error.h"
#include "weights/cast.h"

namespace pipecut::weights {

namespace {

// A replacement as Python's re.sub reads it (\1, \g<1>, \\) in std::regex's
// format syntax ($1; a literal $ is $$). $1 is taken as written too.
std::string formatOf(const std::string& r) {
  std::string out;
  for (size_t i = 0; i < r.size(); ++i) {
    const char c = r[i];
    if (c == '\\' && i + 1 < r.size()) {
      const char n = r[i + 1];
      if (n >= '0' && n <= '9') {
        out += '$';
        out += n;
        ++i;
        continue;
      }
      if (n == 'g' && i + 2 < r.size() && r[i + 2] == '<') {
        size_t close = r.find('>', i + 3);
        if (close != std::string::npos) {
          out += "$" + r.substr(i + 3, close - i - 3);
          i = close;
          continue;
        }
      }
      if (n == '\\') {
        out += '\\';
        ++i;
        continue;
      }
    }
    if (c == '$' && !(i + 1 < r.size() && r[i + 1] >= '0' && r[i + 1] <= '9')) {
      out += "$$";
      continue;
    }
    out += c;
  }
  return out;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The static shape of a stored tensor; nullopt when it has no metadata or a
// symbolic size (nothing a checkpoint could hold).
std::optional<std::vector<int64_t>> staticShape(const pt2::StoredTensor& t) {
  if (!t.meta || t.usePickle) return std::nullopt;
  std::vector<int64_t> shape;
  for (const auto& s : t.meta->sizes) {
    if (s.isExpr) return std::nullopt;
    shape.push_back(s.value);
  }
  return shape;
}

}  // namespace

NameMapping::NameMapping(const std::vector<std::string>& renames, std::string prefix) : prefix_(std::move(prefix)) {
  for (const std::string& r : renames) {
    const size_t eq = r.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorKind::Usage, "", "--weights-rename", "expected REGEX=REPLACEMENT, got '" + r + "'");
    Rename rn;
    rn.text = r;
    try {
      rn.pattern = std::regex(r.substr(0, eq), std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw Error(ErrorKind::Usage, "", "--weights-rename", "'" + r.substr(0, eq) + "' is not a regular expression: " + e.what());
    }
    rn.replacement = formatOf(r.substr(eq + 1));
    renames_.push_back(std::move(rn));
  }
}

std::string NameMapping::programName(const std::string& name) const {
  for (const Rename& r : renames_)
    if (std::regex_search(name, r.pattern)) return prefix_ + std::regex_replace(name, r.pattern, r.replacement);
  return prefix_ + name;
}

WeightSource::WeightSource(const BindOptions& o) : cast_(o.cast) {
  const NameMapping mapping(o.renames, o.prefix);  // usage errors before any file is opened
  checkpoint_ = Checkpoint::open(o.sources);
  const auto& tensors = checkpoint_.tensors();
  programNames_.reserve(tensors.size());
  byProgram_.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    programNames_.push_back(mapping.programName(tensors[i].name));
    auto [it, fresh] = byProgram_.try_emplace(programNames_.back(), i);
    if (!fresh) {
      const CheckpointTensor& other = tensors[it->second];
      throw Error(ErrorKind::InvalidInput, checkpoint_.files()[tensors[i].file].path, tensors[i].name,
                  "binds to '" + programNames_.back() + "', as '" + other.name + "' of " +
                      checkpoint_.files()[other.file].path +
                      " does (after --weights-rename and --weights-prefix); each program tensor takes one");
    }
  }
}

const CheckpointTensor* WeightSource::find(std::string_view programName) const {
  auto it = byProgram_.find(std::string(programName));
  return it == byProgram_.end() ? nullptr : &checkpoint_.tensors()[it->second];
}

std::string WeightSource::describe(const CheckpointTensor& c) const {
  const size_t i = static_cast<size_t>(&c - checkpoint_.tensors().data());
  const std::string& program = programNames_.at(i);
  return program == c.name ? "'" + c.name + "'" : "'" + program + "' (the checkpoint's '" + c.name + "')";
}

pt2::Blob WeightSource::bytesFor(const CheckpointTensor& c, const std::string& fqn, const support::DType& dtype,
                                 const std::vector<int64_t>& shape) const {
  const CheckpointFile& file = checkpoint_.files()[c.file];
  const std::string theirs = "the program's '" + fqn + "' is ";
  if (c.shape != shape)
    throw Error(ErrorKind::InvalidInput, file.path, c.name,
                "is " + std::string(c.dtype->torchName) + " " + c.shapeStr() + " here; " + theirs + dtype.torchName +
                    " " + shapeText(shape) + " (--weights-cast converts dtypes, never shapes)");
  pt2::Blob b;
  b.record = c.name;
  if (c.dtype->code == dtype.code) {
    b.mapped = c.bytes;
    b.owner = file.mapping;
    return b;
  }
  if (!cast_ || !castable(*c.dtype, dtype))
    throw Error(ErrorKind::InvalidInput, file.path, c.name,
                "is " + std::string(c.dtype->torchName) + " " + c.shapeStr() + " here; " + theirs + dtype.torchName +
                    " " + shapeText(shape) +
                    (cast_ ? " (--weights-cast converts between float64, float32, float16 and bfloat16 only)"
                           : "; --weights-cast converts it"));
  b.inlineBytes = castTo(*c.dtype, dtype, c.bytes, c.numel());
  return b;
}

void rebind(pt2::StoredTensor& t, pt2::Blob data) {
  ir::Json e = t.entry();
  ir::Json& tm = e["tensor_meta"];
  tm["device"] = ir::Json{{"type", "cpu"}, {"index", nullptr}};
  ir::TensorMeta m = *t.meta;
  m.device = ir::Device{"cpu", std::nullopt};
  // Contiguous, from the start: the checkpoint's layout.
  int64_t stride = 1;
  std::vector<ir::SymInt> strides(m.sizes.size());
  ir::Json jstrides = ir::Json::array();
  for (size_t i = m.sizes.size(); i-- > 0;) {
    strides[i].value = stride;
    stride *= std::max<int64_t>(m.sizes[i].value, 1);
  }
  for (const auto& s : strides) jstrides.push_back(ir::Json{{"as_int", s.value}});
  m.strides = std::move(strides);
  m.storageOffset = ir::SymInt{};
  tm["strides"] = std::move(jstrides);
  tm["storage_offset"] = ir::Json{{"as_int", 0}};
  t.meta = std::move(m);
  t.entryJson = e.dump();
  t.external = false;
  t.data = std::move(data);
}

void unbind(pt2::StoredTensor& t, const std::string& storage) {
  ir::Json e = t.entry();
  e["tensor_meta"]["device"] = ir::Json{{"type", "meta"}, {"index", nullptr}};
  ir::TensorMeta m = *t.meta;
  m.device = ir::Device{"meta", std::nullopt};
  t.meta = std::move(m);
  t.entryJson = e.dump();
  t.external = true;
  t.data = pt2::Blob{};
  t.data.record = "external:" + storage;
}

pt2::Blob zeroBlob(uint64_t size, const std::string& record) {
  pt2::Blob b;
  b.record = record;
  if (size == 0) {
    b.owner = std::make_shared<int>(0);
    return b;
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) throw Error(ErrorKind::Environment, "", record, std::string("cannot map zeros: ") + std::strerror(errno));
  b.mapped = pt2::ByteView{static_cast<const uint8_t*>(m), static_cast<size_t>(size)};
  b.owner = std::shared_ptr<void>(m, [size](void* p) { ::munmap(p, static_cast<size_t>(size)); });
  return b;
}

void zeroExternalState(pt2::Package& pkg) {
  for (const auto& st : ir::findState(pkg.program)) {
    const std::string& fqn = pkg.program.inputSpecs[st.spec].target;
    for (auto* table : {&pkg.weights, &pkg.constants}) {
      auto it = table->find(fqn);
      if (it == table->end() || !it->second.external) continue;
      pt2::StoredTensor& t = it->second;
      rebind(t, zeroBlob(t.logicalBytes(), "zeros:" + fqn));
    }
  }
}

Binding bindPackage(pt2::Package& pkg, const WeightSource& source) {
  // Every stored tensor once, by FQN (a name in both tables: its weight, as
  // pt2::TensorIndex resolves it), and its twin in the other table.
  std::map<std::string, std::vector<pt2::StoredTensor*>> byName;
  for (auto* table : {&pkg.weights, &pkg.constants})
    for (auto& [fqn, t] : *table) byName[fqn].push_back(&t);
  // Tie groups: one storage, one dtype and shape.
  std::map<std::tuple<const void*, std::string, int, std::string>, std::vector<std::string>> groups;
  auto groupKey = [](const pt2::StoredTensor& t) {
    auto [holder, name] = t.data.storageKey(t.fqn);
    return std::make_tuple(holder, std::string(name), t.meta ? t.meta->dtype : -1, t.meta ? t.meta->shapeStr() : "");
  };
  for (const auto& [fqn, ts] : byName) groups[groupKey(*ts.front())].push_back(fqn);

  Binding out;
  std::vector<std::pair<std::string, const CheckpointTensor*>> plan;
  for (const auto& [fqn, ts] : byName) {
    const pt2::StoredTensor& t = *ts.front();
    if (!staticShape(t)) continue;  // custom objects, pickled subclasses: nothing a checkpoint holds
    const CheckpointTensor* c = source.find(fqn);
    if (!c)
      for (const std::string& other : groups[groupKey(t)])
        if (other != fqn && (c = source.find(other))) break;
    if (c) plan.emplace_back(fqn, c);
    else if (t.external) out.missing.push_back(fqn);
    else out.kept.push_back(fqn);
  }
  std::unordered_set<const CheckpointTensor*> used;
  for (const auto& [fqn, c] : plan) {
    for (pt2::StoredTensor* t : byName[fqn]) {
      const support::DType* dtype = support::dtypeFromCode(t->meta->dtype);
      if (!dtype) throw Error(ErrorKind::InvalidInput, pkg.path, fqn, "has a dtype pipecut does not know");
      rebind(*t, source.bytesFor(*c, fqn, *dtype, *staticShape(*t)));
    }
    out.bound.push_back({fqn, c});
    used.insert(c);
  }
  for (const auto& c : source.checkpoint().tensors())
    if (!used.count(&c)) out.unused.push_back(&c);
  return out;
}

void restrictToProgram(Binding& b, const pt2::Package& pkg, const WeightSource&) {
  std::unordered_set<std::string> lifted;
  for (const auto& s : pkg.program.inputSpecs) lifted.insert(s.target);
  std::vector<Binding::Bound> bound;
  for (auto& x : b.bound)
    if (lifted.count(x.fqn)) bound.push_back(std::move(x));
  b.bound = std::move(bound);
  std::vector<std::string> kept;
  for (auto& k : b.kept)
    if (lifted.count(k)) kept.push_back(std::move(k));
  b.kept = std::move(kept);
}

std::vector<std::string> externalTensors(const pt2::Package& pkg) {
  std::vector<std::string> out;
  const pt2::TensorIndex index(pkg);
  for (const auto& s : pkg.program.inputSpecs) {
    if (s.kind == ir::InputKind::UserInput || s.kind == ir::InputKind::ConstantInput || s.kind == ir::InputKind::Token)
      continue;
    const pt2::StoredTensor* t = index.find(s.target);
    if (t && t->external) out.push_back(s.target);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> missingTensors(const pt2::Package& pkg) {
  // State (a KV cache the program updates in place) starts at zeros, as
  // torch.export.load makes a tensor of no bytes: it needs no source.
  std::unordered_set<std::string> state;
  for (const auto& st : ir::findState(pkg.program)) state.insert(pkg.program.inputSpecs[st.spec].target);
  std::vector<std::string> missing;
  for (std::string& fqn : externalTensors(pkg))
    if (!state.count(fqn)) missing.push_back(std::move(fqn));
  return missing;
}

std::string prefixHint(const WeightSource& source, const std::string& fqn) {
  for (size_t dot = fqn.find('.'); dot != std::string::npos; dot = fqn.find('.', dot + 1))
    if (source.find(fqn.substr(dot + 1))) return fqn.substr(0, dot + 1);
  return "";
}

void requireBound(const pt2::Package& pkg, const std::string& model, const WeightSource* source) {
  const bool weightsGiven = source != nullptr;
  const std::vector<std::string> missing = missingTensors(pkg);
  if (missing.empty()) return;
  // A wrapper's attribute before every name: the checkpoint has them all without it.
  std::string hint;
  if (source) {
    const std::string prefix = prefixHint(*source, missing.front());
    size_t under = 0;
    for (const auto& m : missing) under += m.rfind(prefix, 0) == 0 && source->find(m.substr(prefix.size()));
    if (!prefix.empty() && under * 2 > missing.size())
      hint = ". The checkpoint holds " + std::to_string(under) + " of them without '" + prefix +
             "': the program holds the model under an attribute; give --weights-prefix " + prefix;
  }
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i) list += (i ? ", " : "") + missing[i];
  throw Error(ErrorKind::InvalidInput, model, "",
              std::to_string(missing.size()) + " tensor" + (missing.size() == 1 ? "" : "s") +
                  " the program needs " + (missing.size() == 1 ? "has" : "have") +
                  " no bytes (it was exported on the meta device) and " +
                  (weightsGiven ? "no --weights source holds " + std::string(missing.size() == 1 ? "it" : "them")
                                : "no --weights source was given") +
                  ": " + list +
                  hint +
                  ". Checkpoints lack non-persistent buffers and constants (rotary inv_freq, for one): give them in a "
                  "further --weights file (scripts/export_meta.py writes one beside the program)");
}

std::string tensorDigest(pt2::ByteView bytes) { return xxh3_128Bytes(bytes.data, bytes.size); }

}  // namespace pipecut::weights
