#include "runtime/train/state.h"

#include <set>

#include "support/error.h"

namespace pipecut::runtime {

namespace {

void* keyOf(const at::Tensor& p) { return p.unsafeGetTensorImpl(); }

std::string stateKey(const std::string& fqn, const char* name) { return "optimizer/" + fqn + "/" + name; }

}  // namespace

TrainableStage trainableStage(const torch::jit::Module& module, const std::vector<std::string>& persistentBuffers,
                              const OptimizerOptions& o) {
  std::vector<std::string> paramNames, bufferNames;
  std::vector<at::Tensor> params, buffers;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    if (p.value.requires_grad()) {
      paramNames.push_back(p.name);
      params.push_back(p.value);
    }
  std::set<std::string> persistent(persistentBuffers.begin(), persistentBuffers.end());
  for (const auto& b : module.named_buffers(/*recurse=*/true))
    if (persistent.count(b.name)) {
      bufferNames.push_back(b.name);
      buffers.push_back(b.value);
    }
  return trainableStage(std::move(paramNames), std::move(params), std::move(bufferNames), std::move(buffers), o);
}

TrainableStage trainableStage(std::vector<std::string> paramNames, std::vector<at::Tensor> params,
                              std::vector<std::string> bufferNames, std::vector<at::Tensor> buffers,
                              const OptimizerOptions& o) {
  TrainableStage st;
  st.paramNames = std::move(paramNames);
  st.params = std::move(params);
  st.bufferNames = std::move(bufferNames);
  st.buffers = std::move(buffers);
  if (st.params.empty()) return st;
  if (o.name == "sgd") {
    st.optimizer = std::make_unique<torch::optim::SGD>(
        st.params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weightDecay));
  } else if (o.name == "adamw") {
    st.optimizer = std::make_unique<torch::optim::AdamW>(
        st.params, torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weightDecay));
  } else {
    invalidInput("--optimizer", "expected sgd or adamw, got '" + o.name + "'");
  }
  return st;
}

std::vector<std::pair<std::string, at::Tensor>> checkpointTensors(const TrainableStage& st, const OptimizerOptions& o) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < st.params.size(); ++i) out.emplace_back(st.paramNames[i], st.params[i].detach());
  for (size_t i = 0; i < st.buffers.size(); ++i) out.emplace_back(st.bufferNames[i], st.buffers[i].detach());
  if (!st.optimizer) return out;
  const auto& state = st.optimizer->state();
  for (size_t i = 0; i < st.params.size(); ++i) {
    auto it = state.find(keyOf(st.params[i]));
    if (it == state.end()) continue;  // no step taken yet, or SGD without momentum
    const std::string& fqn = st.paramNames[i];
    if (o.name == "sgd") {
      const auto& s = static_cast<const torch::optim::SGDParamState&>(*it->second);
      if (s.momentum_buffer().defined()) out.emplace_back(stateKey(fqn, "momentum_buffer"), s.momentum_buffer());
    } else {
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      out.emplace_back(stateKey(fqn, "step"), at::scalar_tensor(s.step(), at::kLong));
      out.emplace_back(stateKey(fqn, "exp_avg"), s.exp_avg());
      out.emplace_back(stateKey(fqn, "exp_avg_sq"), s.exp_avg_sq());
    }
  }
  return out;
}

void restoreCheckpoint(TrainableStage& st, const OptimizerOptions& o,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors, const std::string& file) {
  std::map<std::string, at::Tensor> byName(tensors.begin(), tensors.end());
  std::set<std::string> used;
  auto take = [&](const std::string& key, const at::Tensor& like) -> at::Tensor {
    auto it = byName.find(key);
    if (it == byName.end()) throw Error(ErrorKind::InvalidInput, file, key, "missing from the checkpoint");
    if (it->second.sizes() != like.sizes() || it->second.scalar_type() != like.scalar_type())
      throw Error(ErrorKind::InvalidInput, file, key,
                  "is " + std::string(c10::toString(it->second.scalar_type())) + c10::str(it->second.sizes()) +
                      ", the stage holds " + c10::toString(like.scalar_type()) + c10::str(like.sizes()));
    used.insert(key);
    return it->second;
  };
  {
    at::NoGradGuard noGrad;
    for (size_t i = 0; i < st.params.size(); ++i) st.params[i].copy_(take(st.paramNames[i], st.params[i]));
    for (size_t i = 0; i < st.buffers.size(); ++i) st.buffers[i].copy_(take(st.bufferNames[i], st.buffers[i]));
  }
  if (st.optimizer) {
    auto& state = st.optimizer->state();
    for (size_t i = 0; i < st.params.size(); ++i) {
      const std::string& fqn = st.paramNames[i];
      const at::Tensor& p = st.params[i];
      if (o.name == "sgd") {
        if (!byName.count(stateKey(fqn, "momentum_buffer"))) continue;
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(take(stateKey(fqn, "momentum_buffer"), p).to(p.device()).clone());
        state[keyOf(p)] = std::move(s);
      } else {
        if (!byName.count(stateKey(fqn, "step"))) continue;
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(take(stateKey(fqn, "step"), at::scalar_tensor(0, at::kLong)).item<int64_t>());
        s->exp_avg(take(stateKey(fqn, "exp_avg"), p).to(p.device()).clone());
        s->exp_avg_sq(take(stateKey(fqn, "exp_avg_sq"), p).to(p.device()).clone());
        state[keyOf(p)] = std::move(s);
      }
    }
  }
  for (const auto& [key, t] : byName)
    if (!used.count(key))
      throw Error(ErrorKind::InvalidInput, file, key,
                  "is not a tensor of this stage (or state of another optimizer than --optimizer " + o.name + ")");
}

}  // namespace pipecut::runtime
