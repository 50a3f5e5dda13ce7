// Manifest <-> protobuf (proto/manifest.proto), as JSON and as wire format.
// Only this file sees protobuf; manifest.h stays plain C++.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <set>
#include <vector>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "manifest.pb.h"
#include "ir/ir.h"
#include "manifest/manifest.h"
#include "support/dtypes.h"
#include "support/error.h"
#include "support/files.h"

namespace pipecut {
namespace {

namespace pb = ::pipecut::manifest;

std::string indexed(const std::string& path, const char* field, size_t i) {
  return path + (path.empty() ? "" : ".") + field + "[" + std::to_string(i) + "]";
}

// ---- structs -> proto -------------------------------------------------------

void toProto(const TensorSpec& t, pb::TensorSpec* out) {
  out->set_dtype(t.dtype);
  for (const DimSpec& d : t.shape) {
    pb::DimSpec* dim = out->add_shape();
    if (!d.symbol.empty())
      dim->set_symbol(d.symbol);
    else
      dim->set_size(d.size);
  }
}

void toProto(const ValueSource& s, pb::ValueSource* out) {
  switch (s.kind) {
    case ValueSource::Kind::UserInput:
      out->set_user_input(s.userInput);
      break;
    case ValueSource::Kind::StageOutput: {
      pb::StageOutputRef* ref = out->mutable_stage_output();
      ref->set_stage(s.stage);
      ref->set_output(s.output);
      break;
    }
  }
}

void toProto(const Consumer& c, pb::Consumer* out) {
  switch (c.kind) {
    case Consumer::Kind::StageInput: {
      pb::StageInputRef* ref = out->mutable_stage_input();
      ref->set_stage(c.stage);
      ref->set_input(c.input);
      break;
    }
    case Consumer::Kind::UserOutput:
      out->set_user_output(c.userOutput);
      break;
  }
}

void toProto(const UserValue& v, pb::UserValue* out) {
  out->set_name(v.name);
  toProto(v.tensor, out->mutable_tensor());
  if (v.source) toProto(*v.source, out->mutable_source());
}

void toProto(const Stage& s, pb::Stage* out) {
  out->set_index(s.index);
  for (const StageFile& f : s.files) {
    pb::StageFile* file = out->add_files();
    file->set_path(f.path);
    file->set_format(f.format);
    file->set_sha256(f.sha256);
    file->set_bytes(f.bytes);
    file->set_grad_regions_inlined(f.gradRegionsInlined);
    file->set_xxh3_128(f.xxh3_128);
    if (f.compiled) {
      pb::CompiledPackage* c = file->mutable_compiled();
      c->set_device(f.compiled->device);
      c->set_torch_version(f.compiled->torchVersion);
      c->set_source(f.compiled->source);
      c->set_source_xxh3_128(f.compiled->sourceXxh3_128);
      c->set_options(f.compiled->options);
      c->set_key(f.compiled->key);
      c->set_source_directory_sha256(f.compiled->sourceDirectorySha256);
      c->set_program(f.compiled->program);
      c->set_recompute(f.compiled->recompute);
    }
  }
  for (const StageInput& in : s.inputs) {
    pb::StageInput* input = out->add_inputs();
    input->set_name(in.name);
    toProto(in.tensor, input->mutable_tensor());
    toProto(in.source, input->mutable_source());
  }
  for (const StageOutput& o : s.outputs) {
    pb::StageOutput* output = out->add_outputs();
    output->set_name(o.name);
    toProto(o.tensor, output->mutable_tensor());
    for (const Consumer& c : o.consumers) toProto(c, output->add_consumers());
  }
  for (const StageParameter& p : s.parameters) {
    pb::StageParameter* param = out->add_parameters();
    param->set_name(p.name);
    param->set_kind(p.kind);
    param->set_bytes(p.bytes);
  }
  out->set_parameter_bytes(s.parameterBytes);
  out->set_node_count(s.nodeCount);
  out->set_boundary_bytes_per_sample(s.boundaryBytesPerSample);
  for (const std::string& m : s.modules) out->add_modules(m);
  for (const std::string& r : s.recomputed) out->add_recomputed(r);
  for (const MissingFile& mf : s.missing) {
    pb::MissingFile* pm = out->add_missing();
    pm->set_format(mf.format);
    pm->set_reason(mf.reason);
  }
  for (const StageState& st : s.state) {
    pb::StageState* ps = out->add_state();
    ps->set_name(st.name);
    toProto(st.tensor, ps->mutable_tensor());
    ps->set_batch_dim(st.batchDim);
    ps->set_initial(st.initial);
  }
  for (const ExternalTensor& e : s.external) {
    pb::ExternalTensor* pe = out->add_external();
    pe->set_name(e.name);
    toProto(e.tensor, pe->mutable_tensor());
    for (const std::string& a : e.aliases) pe->add_aliases(a);
    pe->set_kind(e.kind);
    pe->set_xxh3_128(e.xxh3_128);
  }
  if (s.supported) out->set_supported(*s.supported);
  out->set_unsupported_reason(s.unsupportedReason);
}

pb::Manifest toProto(const Manifest& m) {
  pb::Manifest out;
  out.set_format_version(m.formatVersion);
  out.set_source_model(m.sourceModel);
  out.set_source_sha256(m.sourceSha256);
  out.set_source_directory_sha256(m.sourceDirectorySha256);
  out.set_torch_version(m.torchVersion);
  out.set_schema_version(m.schemaVersion);
  out.set_pipecut_version(m.pipecutVersion);
  out.set_split_spec(m.splitSpec);
  for (const UserValue& v : m.inputs) toProto(v, out.add_inputs());
  for (const UserValue& v : m.outputs) toProto(v, out.add_outputs());
  out.set_in_spec(m.inSpec);
  out.set_out_spec(m.outSpec);
  for (const Stage& s : m.stages) toProto(s, out.add_stages());
  for (const TiedGroup& g : m.tiedGroups) {
    pb::TiedGroup* group = out.add_tied_groups();
    for (const std::string& n : g.names) group->add_names(n);
    for (uint32_t s : g.stages) group->add_stages(s);
  }
  for (const SymbolRange& r : m.symbols) {
    pb::SymbolRange* range = out.add_symbols();
    range->set_symbol(r.symbol);
    range->set_min(r.min);
    if (r.max) range->set_max(*r.max);
  }
  out.set_meta_export(m.metaExport);
  for (const WeightSourceFile& w : m.weightSources) {
    pb::WeightSourceFile* pw = out.add_weight_sources();
    pw->set_file(w.file);
    pw->set_bytes(w.bytes);
    pw->set_tensors(w.tensors);
    pw->set_xxh3_128(w.xxh3_128);
  }
  out.set_support_target(m.supportTarget);
  out.set_min_supported_nodes(m.minSupportedNodes);
  return out;
}

// proto3 strings must be UTF-8: protobuf would write anything, then refuse to
// parse it back (binary) or silently drop the bad bytes (JSON). Checked up front.
bool validUtf8(const std::string& s) {
  static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};  // rejects overlong forms
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// Walks every set string field of `msg` (by reflection, so new fields are covered).
void checkUtf8(const google::protobuf::Message& msg, const std::string& path) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* refl = msg.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  refl->ListFields(msg, &fields);
  for (const FieldDescriptor* f : fields) {
    std::string at = path + (path.empty() ? "" : ".") + f->name();
    bool isString = f->type() == FieldDescriptor::TYPE_STRING;
    bool isMessage = f->type() == FieldDescriptor::TYPE_MESSAGE;
    if (!isString && !isMessage) continue;
    if (f->is_repeated()) {
      for (int i = 0, n = refl->FieldSize(msg, f); i < n; ++i) {
        std::string item = at + "[" + std::to_string(i) + "]";
        if (isMessage)
          checkUtf8(refl->GetRepeatedMessage(msg, f, i), item);
        else if (!validUtf8(refl->GetRepeatedString(msg, f, i)))
          invalidInput(item, "not valid UTF-8");
      }
    } else if (isMessage) {
      checkUtf8(refl->GetMessage(msg, f), at);
    } else if (!validUtf8(refl->GetString(msg, f))) {
      invalidInput(at, "not valid UTF-8");
    }
  }
}

// ---- proto -> structs -------------------------------------------------------
// Errors are raised with an empty file name; the public entry points attach it.

TensorSpec fromProto(const pb::TensorSpec& t, const std::string& path) {
  TensorSpec out;
  out.dtype = t.dtype();
  for (int i = 0; i < t.shape_size(); ++i) {
    const pb::DimSpec& d = t.shape(i);
    DimSpec dim;
    switch (d.dim_case()) {
      case pb::DimSpec::kSize:
        dim.size = d.size();
        break;
      case pb::DimSpec::kSymbol:
        if (d.symbol().empty()) invalidInput(indexed(path, "shape", i) + ".symbol", "empty symbol");
        dim.symbol = d.symbol();
        break;
      case pb::DimSpec::DIM_NOT_SET:
        invalidInput(indexed(path, "shape", i), "neither size nor symbol is set");
    }
    out.shape.push_back(std::move(dim));
  }
  return out;
}

ValueSource fromProto(const pb::ValueSource& s, const std::string& path) {
  ValueSource out;
  switch (s.source_case()) {
    case pb::ValueSource::kUserInput:
      out.kind = ValueSource::Kind::UserInput;
      out.userInput = s.user_input();
      break;
    case pb::ValueSource::kStageOutput:
      out.kind = ValueSource::Kind::StageOutput;
      out.stage = s.stage_output().stage();
      out.output = s.stage_output().output();
      break;
    case pb::ValueSource::SOURCE_NOT_SET:
      invalidInput(path, "neither user_input nor stage_output is set");
  }
  return out;
}

Consumer fromProto(const pb::Consumer& c, const std::string& path) {
  Consumer out;
  switch (c.target_case()) {
    case pb::Consumer::kStageInput:
      out.kind = Consumer::Kind::StageInput;
      out.stage = c.stage_input().stage();
      out.input = c.stage_input().input();
      break;
    case pb::Consumer::kUserOutput:
      out.kind = Consumer::Kind::UserOutput;
      out.userOutput = c.user_output();
      break;
    case pb::Consumer::TARGET_NOT_SET:
      invalidInput(path, "neither stage_input nor user_output is set");
  }
  return out;
}

UserValue fromProto(const pb::UserValue& v, const std::string& path) {
  UserValue out;
  out.name = v.name();
  out.tensor = fromProto(v.tensor(), path + ".tensor");
  if (v.has_source()) out.source = fromProto(v.source(), path + ".source");
  return out;
}

Stage fromProto(const pb::Stage& s, const std::string& path) {
  Stage out;
  out.index = s.index();
  for (const pb::StageFile& f : s.files()) {
    out.files.push_back({f.path(), f.format(), f.sha256(), f.bytes(), f.grad_regions_inlined(), f.xxh3_128(), std::nullopt});
    if (f.has_compiled()) {
      const pb::CompiledPackage& c = f.compiled();
      out.files.back().compiled =
          CompiledPackage{c.device(),  c.torch_version(), c.source(), c.source_xxh3_128(),
                          c.options(), c.key(),           c.source_directory_sha256(), c.program(), c.recompute()};
    }
  }
  for (int i = 0; i < s.inputs_size(); ++i) {
    const pb::StageInput& in = s.inputs(i);
    std::string at = indexed(path, "inputs", i);
    StageInput input;
    input.name = in.name();
    input.tensor = fromProto(in.tensor(), at + ".tensor");
    input.source = fromProto(in.source(), at + ".source");  // unset reads as an empty oneof: an error
    out.inputs.push_back(std::move(input));
  }
  for (int o = 0; o < s.outputs_size(); ++o) {
    const pb::StageOutput& pbOut = s.outputs(o);
    std::string at = indexed(path, "outputs", o);
    StageOutput output;
    output.name = pbOut.name();
    output.tensor = fromProto(pbOut.tensor(), at + ".tensor");
    for (int c = 0; c < pbOut.consumers_size(); ++c)
      output.consumers.push_back(fromProto(pbOut.consumers(c), indexed(at, "consumers", c)));
    out.outputs.push_back(std::move(output));
  }
  for (const pb::StageParameter& p : s.parameters()) out.parameters.push_back({p.name(), p.kind(), p.bytes()});
  out.parameterBytes = s.parameter_bytes();
  out.nodeCount = s.node_count();
  out.boundaryBytesPerSample = s.boundary_bytes_per_sample();
  out.modules.assign(s.modules().begin(), s.modules().end());
  out.recomputed.assign(s.recomputed().begin(), s.recomputed().end());
  for (int k = 0; k < s.missing_size(); ++k) {
    const pb::MissingFile& pm = s.missing(k);
    if (pm.format() != "torchscript" && pm.format() != "pt2")
      invalidInput(indexed(path, "missing", static_cast<size_t>(k)) + ".format", "'" + pm.format() + "' is not a stage format (torchscript, pt2)");
    out.missing.push_back({pm.format(), pm.reason()});
  }
  for (int k = 0; k < s.state_size(); ++k) {
    const pb::StageState& ps = s.state(k);
    const std::string at = indexed(path, "state", static_cast<size_t>(k));
    StageState st;
    st.name = ps.name();
    if (st.name.empty()) invalidInput(at + ".name", "a state tensor needs its name");
    st.tensor = fromProto(ps.tensor(), at + ".tensor");
    st.batchDim = ps.batch_dim();
    if (st.batchDim < -1 || st.batchDim >= static_cast<int32_t>(st.tensor.shape.size()))
      invalidInput(at + ".batch_dim", std::to_string(st.batchDim) + " is not a dimension of the tensor (or -1)");
    st.initial = ps.initial();
    if (st.initial != "zeros" && st.initial != "stored")
      invalidInput(at + ".initial", "'" + st.initial + "' is neither \"zeros\" nor \"stored\"");
    out.state.push_back(std::move(st));
  }
  for (int k = 0; k < s.external_size(); ++k) {
    const pb::ExternalTensor& pe = s.external(k);
    const std::string at = indexed(path, "external", static_cast<size_t>(k));
    ExternalTensor e;
    e.name = pe.name();
    if (e.name.empty()) invalidInput(at + ".name", "an external tensor needs its name");
    if (k > 0 && !(s.external(k - 1).name() < e.name))
      invalidInput(at + ".name", "'" + e.name + "' is out of order or repeated (external tensors are sorted by name)");
    e.tensor = fromProto(pe.tensor(), at + ".tensor");
    for (const DimSpec& d : e.tensor.shape)
      if (!d.symbol.empty()) invalidInput(at + ".tensor.shape", "has a symbolic size; a weight's shape is static");
    e.aliases.assign(pe.aliases().begin(), pe.aliases().end());
    e.kind = pe.kind();
    e.xxh3_128 = pe.xxh3_128();
    if (!e.xxh3_128.empty() && (e.xxh3_128.size() != 32 || e.xxh3_128.find_first_not_of("0123456789abcdef") != std::string::npos))
      invalidInput(at + ".xxh3_128", "expected 32 lowercase hex digits");
    out.external.push_back(std::move(e));
  }
  if (s.has_supported()) out.supported = s.supported();
  out.unsupportedReason = s.unsupported_reason();
  if (!out.unsupportedReason.empty() && out.supported.value_or(true))
    invalidInput(path + ".unsupported_reason", "set on a stage that is not marked unsupported");
  return out;
}

void checkVersion(uint32_t version) {
  if (version == 0) invalidInput("format_version", "missing (0); this is not a pipecut manifest");
  if (version > kManifestFormatVersion)
    invalidInput("format_version", "version " + std::to_string(version) + " is newer than this pipecut reads (" +
                                       std::to_string(kManifestFormatVersion) + ")");
}

Manifest fromProto(const pb::Manifest& p) {
  checkVersion(p.format_version());
  Manifest m;
  m.formatVersion = p.format_version();
  m.sourceModel = p.source_model();
  m.sourceSha256 = p.source_sha256();
  m.sourceDirectorySha256 = p.source_directory_sha256();
  m.torchVersion = p.torch_version();
  m.schemaVersion = p.schema_version();
  m.pipecutVersion = p.pipecut_version();
  m.splitSpec = p.split_spec();
  for (int i = 0; i < p.inputs_size(); ++i) m.inputs.push_back(fromProto(p.inputs(i), indexed("", "inputs", i)));
  for (int i = 0; i < p.outputs_size(); ++i) m.outputs.push_back(fromProto(p.outputs(i), indexed("", "outputs", i)));
  m.inSpec = p.in_spec();
  m.outSpec = p.out_spec();
  for (int s = 0; s < p.stages_size(); ++s) m.stages.push_back(fromProto(p.stages(s), indexed("", "stages", s)));
  for (const pb::TiedGroup& g : p.tied_groups()) {
    TiedGroup group;
    group.names.assign(g.names().begin(), g.names().end());
    group.stages.assign(g.stages().begin(), g.stages().end());
    m.tiedGroups.push_back(std::move(group));
  }
  for (int i = 0; i < p.symbols_size(); ++i) {
    const pb::SymbolRange& r = p.symbols(i);
    std::string at = indexed("", "symbols", i);
    if (r.symbol().empty()) invalidInput(at + ".symbol", "empty symbol");
    if (i > 0 && !(p.symbols(i - 1).symbol() < r.symbol()))
      invalidInput(at + ".symbol", "'" + r.symbol() + "' is out of order or repeated (symbols are sorted by name)");
    if (r.has_max() && r.max() < r.min())
      invalidInput(at + ".max", std::to_string(r.max()) + " is below min " + std::to_string(r.min()));
    m.symbols.push_back(SymbolRange{r.symbol(), r.min(), r.has_max() ? std::optional<int64_t>(r.max()) : std::nullopt});
  }
  m.metaExport = p.meta_export();
  for (const pb::WeightSourceFile& w : p.weight_sources())
    m.weightSources.push_back({w.file(), w.bytes(), w.tensors(), w.xxh3_128()});
  m.supportTarget = p.support_target();
  m.minSupportedNodes = p.min_supported_nodes();
  for (int s = 0; s < p.stages_size(); ++s)
    if (p.stages(s).has_supported() == m.supportTarget.empty())
      invalidInput(indexed("", "stages", s) + ".supported",
                   m.supportTarget.empty() ? "set, but the manifest has no support_target"
                                           : "missing: the split was cut by support_target '" + m.supportTarget + "'");
  return m;
}

// ---- cross-reference checks ------------------------------------------------

void checkRange(uint64_t value, size_t count, const std::string& path, const std::string& what) {
  if (value >= count)
    invalidInput(path, std::to_string(value) + " is out of range: " + what + " has " + std::to_string(count));
}

void checkSource(const Manifest& m, const ValueSource& s, const std::string& path) {
  if (s.kind == ValueSource::Kind::UserInput) {
    checkRange(s.userInput, m.inputs.size(), path + ".user_input", "the manifest's inputs");
    return;
  }
  checkRange(s.stage, m.stages.size(), path + ".stage_output.stage", "the manifest's stages");
  checkRange(s.output, m.stages[s.stage].outputs.size(), path + ".stage_output.output",
             "the outputs of stage " + std::to_string(s.stage));
}

void checkConsumer(const Manifest& m, const Consumer& c, const std::string& path) {
  if (c.kind == Consumer::Kind::UserOutput) {
    checkRange(c.userOutput, m.outputs.size(), path + ".user_output", "the manifest's outputs");
    return;
  }
  checkRange(c.stage, m.stages.size(), path + ".stage_input.stage", "the manifest's stages");
  checkRange(c.input, m.stages[c.stage].inputs.size(), path + ".stage_input.input",
             "the inputs of stage " + std::to_string(c.stage));
}

bool sameTensor(const TensorSpec& a, const TensorSpec& b) {
  if (a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
  for (size_t d = 0; d < a.shape.size(); ++d)
    if (a.shape[d].symbol != b.shape[d].symbol || (a.shape[d].symbol.empty() && a.shape[d].size != b.shape[d].size))
      return false;
  return true;
}

void checkTensor(const TensorSpec& t, const std::string& path) {
  if (!t.dtype.empty() && !support::dtypeFromTorchName(t.dtype))
    invalidInput(path + ".dtype", "unknown dtype '" + t.dtype + "'");
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d].symbol.empty() && t.shape[d].size < 0)
      invalidInput(indexed(path, "shape", d) + ".size", "negative size " + std::to_string(t.shape[d].size));
}

void checkFile(const StageFile& f, const std::string& path) {
  // Stage files live beside the manifest: a bare file name, nothing that
  // climbs out of the directory or shadows the manifest itself.
  if (f.path.empty() || f.path == "." || f.path == ".." || f.path.find('/') != std::string::npos ||
      f.path.find('\0') != std::string::npos || f.path == "manifest.json" || f.path == "manifest.pb")
    invalidInput(path + ".path", "'" + f.path + "' is not a stage file name");
  if (f.format != "torchscript" && f.format != "pt2" && f.format != "aoti" && f.format != "aoti-train")
    invalidInput(path + ".format", "unknown format '" + f.format + "' (torchscript, pt2, aoti, aoti-train)");
  auto hex = [](const std::string& s, size_t digits) {
    bool ok = s.size() == digits;
    for (char c : s) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    return ok;
  };
  const bool train = f.format == "aoti-train";
  if ((f.format == "aoti" || train) != f.compiled.has_value())
    invalidInput(path + ".compiled", f.compiled ? "is for formats aoti and aoti-train only"
                                                : "missing: an " + f.format + " package records what it was compiled from");
  if (f.compiled && train && f.compiled->program != "F" && f.compiled->program != "I" && f.compiled->program != "W" &&
      f.compiled->program != "B")
    invalidInput(path + ".compiled.program", "'" + f.compiled->program + "': a training program is F, I, W or B");
  if (f.compiled && !train && !f.compiled->program.empty())
    invalidInput(path + ".compiled.program", "is for format aoti-train only");
  if (f.compiled) {
    const CompiledPackage& c = *f.compiled;
    if (c.device != "cpu" && c.device != "cuda") invalidInput(path + ".compiled.device", "unknown device '" + c.device + "' (cpu, cuda)");
    if (c.torchVersion.empty()) invalidInput(path + ".compiled.torch_version", "missing");
    if (!hex(c.key, 64)) invalidInput(path + ".compiled.key", "expected 64 lowercase hex digits");
    if (!hex(c.sourceXxh3_128, 32)) invalidInput(path + ".compiled.source_xxh3_128", "expected 32 lowercase hex digits");
    if (!c.sourceDirectorySha256.empty() && !hex(c.sourceDirectorySha256, 64))
      invalidInput(path + ".compiled.source_directory_sha256", "expected 64 lowercase hex digits");
  }
  // Either digest may be absent (sha256 unless split --sha256; xxh3_128 in
  // manifests from before it was recorded), not both.
  if (f.sha256.empty() && f.xxh3_128.empty()) invalidInput(path, "no digest: expected sha256 or xxh3_128");
  if (!f.sha256.empty() && !hex(f.sha256, 64)) invalidInput(path + ".sha256", "expected 64 lowercase hex digits");
  if (!f.xxh3_128.empty() && !hex(f.xxh3_128, 32)) invalidInput(path + ".xxh3_128", "expected 32 lowercase hex digits");
}

void checkRanges(const Manifest& m) {
  for (size_t i = 0; i < m.inputs.size(); ++i)
    if (m.inputs[i].source) checkSource(m, *m.inputs[i].source, indexed("", "inputs", i) + ".source");
  for (size_t i = 0; i < m.outputs.size(); ++i)
    if (m.outputs[i].source) checkSource(m, *m.outputs[i].source, indexed("", "outputs", i) + ".source");
  for (size_t s = 0; s < m.stages.size(); ++s) {
    const Stage& stage = m.stages[s];
    std::string at = indexed("", "stages", s);
    for (size_t i = 0; i < stage.inputs.size(); ++i)
      checkSource(m, stage.inputs[i].source, indexed(at, "inputs", i) + ".source");
    for (size_t o = 0; o < stage.outputs.size(); ++o)
      for (size_t c = 0; c < stage.outputs[o].consumers.size(); ++c)
        checkConsumer(m, stage.outputs[o].consumers[c], indexed(indexed(at, "outputs", o), "consumers", c));
  }
  for (size_t g = 0; g < m.tiedGroups.size(); ++g)
    for (size_t k = 0; k < m.tiedGroups[g].stages.size(); ++k)
      checkRange(m.tiedGroups[g].stages[k], m.stages.size(), indexed(indexed("", "tied_groups", g), "stages", k),
                 "the manifest's stages");
}

// Everything the runner relies on without checking again: indices in range,
// values flowing only forward (a cycle would deadlock the pipeline), every
// edge recorded at both ends, the same tensor spec at both ends.
void checkReferences(const Manifest& m) {
  checkRanges(m);  // first: the checks below index with these
  if (m.stages.empty()) invalidInput("stages", "no stages");
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    checkTensor(m.inputs[i].tensor, indexed("", "inputs", i) + ".tensor");
    if (m.inputs[i].source) invalidInput(indexed("", "inputs", i) + ".source", "a user input has no source");
  }
  for (size_t j = 0; j < m.outputs.size(); ++j) {
    std::string at = indexed("", "outputs", j);
    checkTensor(m.outputs[j].tensor, at + ".tensor");
    if (!m.outputs[j].source) invalidInput(at + ".source", "missing: every user output comes from somewhere");
    const ValueSource& src = *m.outputs[j].source;
    if (src.kind == ValueSource::Kind::StageOutput) {
      const StageOutput& o = m.stages[src.stage].outputs[src.output];
      size_t n = 0;
      for (const Consumer& c : o.consumers) n += c.kind == Consumer::Kind::UserOutput && c.userOutput == j;
      if (n != 1)
        invalidInput(at + ".source", "stage " + std::to_string(src.stage) + " output " + std::to_string(src.output) +
                                         " does not list user output " + std::to_string(j) + " as a consumer");
    }
  }
  std::set<std::string> files;
  for (size_t s = 0; s < m.stages.size(); ++s) {
    const Stage& stage = m.stages[s];
    std::string at = indexed("", "stages", s);
    if (stage.index != s) invalidInput(at + ".index", std::to_string(stage.index) + ", expected " + std::to_string(s));
    for (size_t k = 0; k < stage.files.size(); ++k) {
      checkFile(stage.files[k], indexed(at, "files", k));
      if (!files.insert(stage.files[k].path).second)
        invalidInput(indexed(at, "files", k) + ".path", "'" + stage.files[k].path + "' is listed twice");
      if (const auto& c = stage.files[k].compiled) {
        // Compiled from this stage's own .pt2, once per device kind.
        bool fromPt2 = false;
        for (const StageFile& f : stage.files) fromPt2 = fromPt2 || (f.path == c->source && f.format == "pt2");
        if (!fromPt2)
          invalidInput(indexed(at, "files", k) + ".compiled.source", "'" + c->source + "' is not a .pt2 file of this stage");
        for (size_t j = 0; j < k; ++j)
          if (stage.files[j].compiled && stage.files[j].compiled->device == c->device &&
              stage.files[j].compiled->program == c->program)
            invalidInput(indexed(at, "files", k) + ".compiled.device",
                         "a second package for " + c->device + (c->program.empty() ? "" : " (program " + c->program + ")"));
      }
    }
    for (size_t i = 0; i < stage.inputs.size(); ++i) {
      const StageInput& in = stage.inputs[i];
      std::string ai = indexed(at, "inputs", i);
      checkTensor(in.tensor, ai + ".tensor");
      const TensorSpec* from = nullptr;
      if (in.source.kind == ValueSource::Kind::UserInput) {
        from = &m.inputs[in.source.userInput].tensor;
      } else {
        if (in.source.stage >= s)
          invalidInput(ai + ".source.stage_output.stage",
                       "stage " + std::to_string(in.source.stage) + " does not run before stage " + std::to_string(s));
        const StageOutput& o = m.stages[in.source.stage].outputs[in.source.output];
        size_t n = 0;
        for (const Consumer& c : o.consumers) n += c.kind == Consumer::Kind::StageInput && c.stage == s && c.input == i;
        if (n != 1)
          invalidInput(ai + ".source", "stage " + std::to_string(in.source.stage) + " output " +
                                           std::to_string(in.source.output) + " does not list this input as a consumer");
        from = &o.tensor;
      }
      if (!sameTensor(*from, in.tensor)) invalidInput(ai + ".tensor", "differs from its source's tensor spec");
    }
    for (size_t o = 0; o < stage.outputs.size(); ++o) {
      std::string ao = indexed(at, "outputs", o);
      checkTensor(stage.outputs[o].tensor, ao + ".tensor");
      for (size_t c = 0; c < stage.outputs[o].consumers.size(); ++c) {
        const Consumer& con = stage.outputs[o].consumers[c];
        std::string ac = indexed(ao, "consumers", c);
        // The reverse direction: the consumer names this output as its source.
        const ValueSource* back = con.kind == Consumer::Kind::StageInput
                                      ? &m.stages[con.stage].inputs[con.input].source
                                      : (m.outputs[con.userOutput].source ? &*m.outputs[con.userOutput].source : nullptr);
        if (!back || back->kind != ValueSource::Kind::StageOutput || back->stage != s || back->output != o)
          invalidInput(ac, "its target does not name stage " + std::to_string(s) + " output " + std::to_string(o) +
                               " as its source");
      }
    }
  }
}

Manifest fromProtoChecked(const pb::Manifest& p, const std::string& file) {
  try {
    Manifest m = fromProto(p);
    checkReferences(m);
    return m;
  } catch (const Error& e) {
    e.rethrowWithFile(file);
  }
}

bool isRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string manifestToJson(const Manifest& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  pb::Manifest message = toProto(m);
  checkUtf8(message, "");
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) internalError("manifest", "cannot write JSON: " + std::string(status.message()));
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

std::string manifestToBinary(const Manifest& m) {
  pb::Manifest message = toProto(m);
  checkUtf8(message, "");
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded) || coded.HadError())
      internalError("manifest", "cannot serialize the manifest");
  }  // the coded stream trims `out` to the written size when it goes away
  return out;
}

Manifest manifestFromJson(const std::string& text, const std::string& file) {
  pb::Manifest message;
  google::protobuf::util::JsonParseOptions options;  // unknown fields are errors: they catch typos
  auto status = google::protobuf::util::JsonStringToMessage(text, &message, options);
  if (!status.ok()) {
    // A newer writer may have added fields: then the version is the better complaint.
    pb::Manifest lenient;
    options.ignore_unknown_fields = true;
    if (google::protobuf::util::JsonStringToMessage(text, &lenient, options).ok() &&
        lenient.format_version() > kManifestFormatVersion) {
      try {
        checkVersion(lenient.format_version());
      } catch (const Error& e) {
        e.rethrowWithFile(file);
      }
    }
    std::string why(status.message());
    if (why.rfind(": ", 0) == 0) why.erase(0, 2);  // protobuf's path prefix, empty at the root
    throw Error(ErrorKind::InvalidInput, file, "", "invalid manifest JSON: " + why);
  }
  return fromProtoChecked(message, file);
}

Manifest manifestFromBinary(const std::string& bytes, const std::string& file) {
  pb::Manifest message;
  if (!message.ParseFromString(bytes))
    throw Error(ErrorKind::InvalidInput, file, "", "not a valid binary manifest (protobuf wire format)");
  return fromProtoChecked(message, file);
}

Manifest readManifest(const std::string& dir) {
  std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  std::string binary = base + "manifest.pb";
  if (isRegularFile(binary)) return manifestFromBinary(support::readFile(binary), binary);
  std::string json = base + "manifest.json";
  if (isRegularFile(json)) return manifestFromJson(support::readFile(json), json);
  throw Error(ErrorKind::InvalidInput, dir, "", "no manifest.pb or manifest.json");
}

bool weightsLeftOut(const std::string& options) {
  const nlohmann::json o = nlohmann::json::parse(options, nullptr, false);
  if (!o.is_object()) return false;
  auto in = o.find("aot_inductor.package_constants_in_so");
  auto onDisk = o.find("aot_inductor.package_constants_on_disk_format");
  // Absent, null or "" (what the compile script's `not options.get(...)`
  // reads as unset, and Inductor too: it acts only on "binary_blob" and
  // "pickle_weights").
  const bool noDiskFormat = onDisk == o.end() || onDisk->is_null() || (onDisk->is_string() && onDisk->get<std::string>().empty());
  return in != o.end() && *in == false && noDiskFormat;
}

}  // namespace pipecut
