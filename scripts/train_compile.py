"""What `pipecut compile` runs in the user's Python to compile one pipeline
stage for training: the stage's exported program (a `.pt2` written by
torch.export.save) becomes a forward program and backward programs, each
compiled by AOTInductor. Same conventions as aoti_compile.py: one JSON
request as sys.argv[1] (`PYTHON train_compile.py REQUEST`, or `PYTHON -
REQUEST` with this file on stdin), the last stdout line is the JSON answer,
a failure exits 1 with "error: Type: message" as the last line (the
traceback above it).

  {"mode": "probe"}
      prints {"torch": torch.__version__, "cuda": <a CUDA device is usable>}

  {"mode": "compile_train", "source": STAGE.pt2, "device": "cpu"|"cuda",
   "options": {Inductor config; "pipecut.*" keys are dropped},
   "inputs": [{"dtype": "float32", "shape": [4, 8]}, ...],   (static shapes)
   "grad_inputs": [k, ...],   (stage inputs that receive gradients)
   "recompute": "none" | "all" | PYTHON_REGEX,
   "outputs": {"F": F.pt2, "I": I.pt2, "W": W.pt2, "B": B.pt2}}
      prints {"seconds": ..., "programs": {"F": SIG, "I": SIG, "W": SIG, "B": SIG}
              (or "F" and "B"), "saved_bytes": ..., "tangents": [...],
              "program_seconds": {"F": ..., ...}, "seeded_random_ops": N}

Programs. The joint graph of the stage (its forward, then torch.autograd.grad
of the floating outputs that require grad, with their gradients, the
tangents, as inputs, w.r.t. the grad inputs and every parameter) is traced
with make_fx over torch.func.functional_call, so that parameters and buffers
are graph inputs; the stage's graph runs through torch.fx.Interpreter under
preserve_node_meta, which keeps each forward node's nn_module_stack. The
joint graph is then cut, by this file's own partition, into
  F: (params, buffers, inputs) -> (stage outputs..., saved...)
  I: (saved, primals, tangents) -> (input gradients in grad_inputs order...,
     live...)   only what the input gradients need;
  W: (live, saved, primals, tangents) -> parameter gradients   only the
     parameter branches: a value I computes that W needs is one of I's "live"
     outputs, never computed twice (torchtitan GraphPP's split_di_dw_graph);
  B (saved, primals, tangents) -> (input gradients..., parameter
     gradients): I and W as one program, for the schedules that run W right
     after I; written for a stage with grad inputs when the request names
     an output for it (it reads only what F saves for I and W: asserted), and
     for a stage without (the first), which then gets only F and B.
The loss stage is not special: its scalar output takes a tangent (1/M).

Recomputation ("recompute"): "none" saves every forward value a backward
program needs; "all" saves nothing but what is never recomputed (below): the
backward programs recompute the forward values they need from the primals
(stage inputs, parameters, buffers), which the runtime passes again; a
regex recomputes the forward nodes of which any nn_module_stack entry (a
module path such as "m.model.layers.1" or "m.model.layers.1.mlp") matches
it by re.fullmatch, and saves the others. Whatever the policy, views and
other aliases (t, view, expand, detach, ...) and factories without inputs
(arange, full, ...) are recomputed, never saved: a saved value is never a
view, and no program outputs an alias of its own inputs (an output that
would be is cloned).

Randomness. Dropout (dropout, native_dropout, feature_dropout, and SDPA's
dropout_p through its math kernel), bernoulli, rand, randn and their _like
forms are rewritten while tracing as pure functions of one seed (see
SeededRandom), the "rng:0" input the runtime passes F and the backward
programs alike: a backward program that recomputes a dropout rebuilds F's
mask from it instead of reading a saved mask, so every policy gives the
backward F's random values. Other random ops (tagged
nondeterministic_seeded: alpha_dropout, normal, multinomial, a call with a
generator, ...) are never recomputed: their outputs are saved, whatever the
policy (even "all"). "seeded_random_ops" in the answer counts the
rewritten ops.

Signatures (SIG, in the answer and in each package's metadata under
"pipecut.train"): {"program": "F"|"I"|"W"|"B", "inputs": [REF...],
"outputs": [REF...]}, the programs' flat input and output lists. REF:
"param:<fqn>", "buffer:<fqn>" (a buffer or lifted tensor constant of the
.pt2), "input:<k>", "tangent:<k>" (gradient of stage output k), "rng:0"
(the micro-batch's random seed, an int64 scalar), "output:<k>" (F),
"saved:<j>" (F's j-th saved value), "live:<j>" (I's j-th live value),
"grad_input:<k>" (I), "grad:<fqn>" (W or B). F's outputs are
output:0..n-1 then saved:0..; a parameter whose gradient is None (unused) has
no grad: output; an unreached grad input's gradient is zeros. "tangents" in
the answer lists the stage outputs that take a tangent (floating outputs
that require grad); the others take none.

Every tensor is an input: the packages hold no weights (checked: the loaded
package's get_constant_fqns() is empty). Each program is compiled for
contiguous inputs of the traced shapes and dtypes: the runtime must pass
contiguous tensors (AOTInductor reads inputs with the strides it compiled
for, unchecked). In-place ops of the traced graph (CPU dropout's bernoulli_,
div_) are rewritten as their functional forms; one that mutates a program
input (a buffer update, e.g. BatchNorm's running statistics) is refused.
The programs' aten.view calls become aten.reshape: a view that was valid on
a value's traced layout (an attention kernel's transposed output) may not be
on the contiguous copy a backward program is handed. A stage without
parameters still gets a W, with no inputs and no outputs. On "cuda" the
joint graph is traced on cuda:0 (the stage moved there first), so that the
kernels chosen (attention's) are the device's.

Compile time (2 cores, one compile thread, torch 2.11, the Llama fixture's
programs): 6-10 s a package, ~80% of it the C++ compiler; the first compile
in a process costs ~7 s more, so this file compiles a stage's programs in
one process. aot_inductor.compile_wrapper_opt_level O0 (default O1) and
aot_inductor.debug_compile (O0 everywhere) changed it by under 1 s;
aot_inductor.precompile_headers False made it ~3 s slower.
"""
import json
import re
import sys
import time
import traceback

PROGRAM_ORDER = ("F", "I", "W", "B")


def example_input(spec, device, generator):
    import torch

    dtype = getattr(torch, spec["dtype"])
    shape = spec["shape"]
    if dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(shape, generator=generator).to(dtype)
    else:
        # Zeros are a valid index, token id, position and mask everywhere.
        t = torch.zeros(shape, dtype=dtype)
    return t.to(device)


# ---------------------------------------------------------------- node kinds

def is_view_op(target):
    """An op whose output aliases an input (t, view, expand, detach, split...)."""
    import torch

    return isinstance(target, torch._ops.OpOverload) and bool(getattr(target, "is_view", False))


def is_alias(node):
    """A node whose value is a view of another node's value."""
    import operator

    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return is_alias(node.args[0])
    return is_view_op(node.target)


RANDOM_NAMES = re.compile(r"(rand|randn|rand_like|randn_like|randint|randint_like|randperm|bernoulli|bernoulli_|"
                          r"native_dropout|dropout|feature_dropout|alpha_dropout|normal|normal_|uniform_|"
                          r"exponential_|geometric_|cauchy_|log_normal_|multinomial|poisson|random_|"
                          r"rrelu_with_noise|_fused_dropout)")


def is_random(node):
    import operator
    import torch

    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return is_random(node.args[0])
    if isinstance(target, torch._ops.OpOverload):
        schema = target._schema
        names = [a.name for a in schema.arguments]
        if "dropout_p" in names:
            # Attention kernels: random only when asked for dropout.
            i = names.index("dropout_p")
            p = node.args[i] if len(node.args) > i else node.kwargs.get("dropout_p", schema.arguments[i].default_value)
            return not isinstance(p, (int, float)) or p > 0
        if torch.Tag.nondeterministic_seeded in target.tags:
            return True
        return bool(RANDOM_NAMES.fullmatch(schema.name.split("::")[-1]))
    return False


def is_factory(node):
    """A call without tensor inputs (arange, full, scalar_tensor, zeros...)."""
    return node.op == "call_function" and not node.all_input_nodes and not is_random(node)


def is_cheap(node):
    return is_alias(node) or is_factory(node)


def module_paths(node):
    stack = node.meta.get("nn_module_stack") or {}
    paths = []
    for value in stack.values():
        path = value[0] if isinstance(value, (tuple, list)) else value
        if isinstance(path, str):
            # Dynamo-style paths ("L['self'].m.model") as the FQNs they name.
            path = re.sub(r"^L\['self'\]\.?", "", path)
            path = re.sub(r"\._modules\['([^']*)'\]", r".\1", path)
            paths.append(path)
    return paths


# ---------------------------------------------------------- functionalizing

def functional_overload(target):
    """The out-of-place overload of an in-place aten op: same argument names."""
    import torch

    name = target._schema.name.split("::")[-1]
    if not name.endswith("_") or name.startswith("_") and name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    if packet is None:
        return None
    wanted = [a.name for a in target._schema.arguments]
    for ovl in packet.overloads():
        op = getattr(packet, ovl)
        if not op._schema.is_mutable and [a.name for a in op._schema.arguments] == wanted:
            return op
    return None


def remove_inplace(gm):
    """In-place ops become their functional forms where nothing reads the
    mutated tensor afterwards (make_fx hands later readers the in-place
    node's own result); anything else is refused."""
    import torch

    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    changed = False
    for node in list(gm.graph.nodes):
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or not target._schema.is_mutable:
            continue
        what = f"{target} ({', '.join(module_paths(node)[-1:]) or 'no module'})"
        written = [a for a in target._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        if len(written) != 1 or written[0].name != "self" or not node.args:
            raise NotImplementedError(f"the stage mutates a tensor with {what}, which a training program cannot do")
        base = node.args[0]
        if not isinstance(base, torch.fx.Node) or base.op == "placeholder" or is_alias(base):
            raise NotImplementedError(f"the stage updates an input, a parameter or a buffer (or a view) in place "
                                      f"with {what} (e.g. BatchNorm's running statistics), which a training program "
                                      "cannot do")
        if any(u is not node and (order[u] > order[node] or is_alias(u)) for u in base.users):
            raise NotImplementedError(f"the stage reads a tensor after {what} mutates it in place; not supported")
        op = functional_overload(target)
        if op is None:
            raise NotImplementedError(f"no functional form of the in-place {what}")
        # The in-place schema's defaults made explicit: the functional
        # overload may have none (bernoulli_.float's p=0.5, bernoulli.p's p).
        args, kwargs = list(node.args), dict(node.kwargs)
        full_args = []
        for i, a in enumerate(target._schema.arguments):
            if a.kwarg_only:
                if a.name not in kwargs and a.has_default_value():
                    kwargs[a.name] = a.default_value
            elif i < len(args):
                full_args.append(args[i])
            elif a.name in kwargs:
                full_args.append(kwargs.pop(a.name))
            elif a.has_default_value():
                full_args.append(a.default_value)
        node.target = op
        node.args, node.kwargs = tuple(full_args), kwargs
        changed = True
    if changed:
        gm.recompile()


# -------------------------------------------------------- seeded randomness

MASK32 = 0xFFFFFFFF


def _mul32(x, c):
    """(x * c) mod 2**32 for 0 <= x < 2**32 and a constant c < 2**32, in
    int64 without overflow: the partial products stay below 2**49."""
    return (x * (c & 0xFFFF) + ((x * (c >> 16)) & 0xFFFF) * 65536) & MASK32


def _mix32(x):
    """A bijection on 32 bits with good avalanche (the "lowbias32" integer
    hash); x is an int64 tensor or a Python int in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


class SeededRandom:
    """Rewrites the stage's random ops, while the joint graph is traced, as
    pure functions of (seed, stream, element index). The seed is a program
    input, "rng:0" (an int64 scalar; only its low 32 bits count): the
    runtime draws one per micro-batch and step from --seed and hands the
    same tensor to F and to the backward programs, as it hands them the
    stage inputs. Each rewritten op takes the next stream number. A backward
    program that recomputes a dropout (recompute "all" or a regex) rebuilds
    F's mask from the seed instead of reading a saved mask: the RNG state
    passes from F to I/B explicitly, and the draws depend on (seed, stream,
    index) alone: not on threads, ranks, schedules or a resumed run.

    The hash is plain int64 aten arithmetic, so CPU, CUDA and eager PyTorch
    compute the same bits. Inductor's seeded prims (inductor_random) were
    not used: outside Inductor they ignore their seed. Ops not listed in
    rewrite() (alpha_dropout, normal, multinomial, a call with a generator,
    ...) stay as they were: random, saved, never recomputed."""

    def __init__(self, seed=None):
        self.seed = seed  # the "rng:0" input (traced) or a tensor (eager)
        self.streams = 0
        self.rewritten = []

    def bits(self, shape, device):
        """32 random bits per element as int64, from a stream of their own."""
        import math

        import torch

        n = math.prod(shape)
        if n >= 2**32:
            raise NotImplementedError(f"a random op of {n} elements (the seeded hash counts 2**32)")
        stream = self.streams
        self.streams += 1
        seed = (self.seed & MASK32).to(device)
        key = _mix32(seed ^ _mix32((stream * 0x9E3779B9 + 1) & MASK32))
        index = torch.arange(n, dtype=torch.int64, device=device).reshape(shape)
        return _mix32((_mix32(index ^ key) + key) & MASK32)

    def uniform(self, shape, device, dtype):
        """[0, 1) with as many bits as dtype holds exactly (24 for float32)."""
        import math

        import torch

        width = min(32, 1 - int(math.log2(torch.finfo(dtype).eps)))  # float32: 24, bfloat16: 8
        compute = torch.float64 if width > 24 else torch.float32
        u = (self.bits(shape, device) >> (32 - width)).to(compute) * (2.0 ** -width)
        return u.to(dtype)

    def normal(self, shape, device, dtype):
        import math

        import torch

        u1 = self.uniform(shape, device, torch.float32)
        u2 = self.uniform(shape, device, torch.float32)
        z = torch.sqrt(-2.0 * torch.log1p(-u1)) * torch.cos((2.0 * math.pi) * u2)  # Box-Muller
        return z.to(dtype)

    def run(self, module, *args):
        """module (a GraphModule) on args, its random ops rewritten (eager
        too, with a seed tensor: a test's reference)."""
        import torch

        rng = self

        class Seeded(torch.fx.Interpreter):
            def call_function(self, target, args, kwargs):
                value = rng.rewrite(target, args, kwargs)
                return super().call_function(target, args, kwargs) if value is NotImplemented else value

        return Seeded(module).run(*args)

    def rewrite(self, target, args, kwargs):
        """The op's value computed from the seed, or NotImplemented (the op
        runs as it is)."""
        import torch

        aten = torch.ops.aten
        if not isinstance(target, torch._ops.OpOverload):
            return NotImplemented
        a = dict(zip((x.name for x in target._schema.arguments), args))
        a.update(kwargs)
        if a.get("generator") is not None:
            return NotImplemented
        if target in (aten.dropout.default, aten.feature_dropout.default, aten.native_dropout.default):
            x, p, train = a["input"], float(a["p"]), a.get("train")
            if train is False or not 0.0 < p < 1.0:
                return NotImplemented  # deterministic: identity, or zeros
            shape = tuple(x.shape)
            if target is aten.feature_dropout.default:
                shape = shape[:2] + (1,) * (x.dim() - 2)  # one draw per channel
            keep = self.uniform(shape, x.device, torch.float32) < 1.0 - p
            self.rewritten.append(str(target))
            if target is aten.native_dropout.default:
                return x * keep.to(x.dtype) * (1.0 / (1.0 - p)), keep
            return x * (keep.to(x.dtype) / (1.0 - p))  # aten's dropout: input * (mask / (1 - p))
        if target in (aten.bernoulli.p, aten.bernoulli.default):
            x = a["self"]
            p = a.get("p", 0.5) if target is aten.bernoulli.p else x
            self.rewritten.append(str(target))
            return (self.uniform(tuple(x.shape), x.device, torch.float32) < p).to(x.dtype)
        if target in (aten.rand_like.default, aten.randn_like.default):
            x = a["self"]
            dtype, device = a.get("dtype") or x.dtype, a.get("device") or x.device
            draw = self.uniform if target is aten.rand_like.default else self.normal
            self.rewritten.append(str(target))
            return draw(tuple(x.shape), device, dtype)
        if target in (aten.rand.default, aten.randn.default):
            dtype = a.get("dtype") or torch.get_default_dtype()
            device = a.get("device") or torch.device("cpu")
            draw = self.uniform if target is aten.rand.default else self.normal
            self.rewritten.append(str(target))
            return draw(tuple(int(d) for d in a["size"]), device, dtype)
        if target is aten.scaled_dot_product_attention.default and float(a.get("dropout_p", 0.0)) > 0.0:
            # The math kernel with the mask drawn here (the fused kernels draw
            # their own).
            q, k, p = a["query"], a["key"], float(a["dropout_p"])
            keep = self.uniform(tuple(q.shape[:-1]) + (k.shape[-2],), q.device, torch.float32) < 1.0 - p
            extra = {n: a[n] for n in ("scale", "enable_gqa") if n in a}
            self.rewritten.append(str(target))
            import warnings

            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Dropout mask should only be used")
                return aten._scaled_dot_product_attention_math(
                    q, k, a["value"], a.get("attn_mask"), p, bool(a.get("is_causal", False)), keep, **extra)[0]
        return NotImplemented


# ------------------------------------------------------------------ tracing

class Joint:
    """The traced joint graph and what its placeholders and outputs are."""


def trace_joint(ep, req, device):
    import torch
    import torch.fx.traceback as fx_traceback
    from torch.export.graph_signature import InputKind
    from torch.fx.experimental.proxy_tensor import make_fx

    sig = ep.graph_signature
    tensors = {**ep.state_dict, **ep.constants}

    def real(t):
        t = t.detach()
        if t.device.type == "meta":  # a weightless stage: zeros stand in (shapes are all tracing needs)
            t = torch.zeros(t.shape, dtype=t.dtype)
        return t.to(device)

    param_names = list(sig.parameters)
    buffer_names = [s.target for s in sig.input_specs
                    if s.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR)]
    n_user = sum(1 for s in sig.input_specs if s.kind == InputKind.USER_INPUT)
    if n_user != len(req["inputs"]):
        raise ValueError(f"the request gives {len(req['inputs'])} inputs, the stage takes {n_user}")
    generator = torch.Generator().manual_seed(0)
    inputs = [example_input(s, device, generator) for s in req["inputs"]]
    grad_inputs = list(req.get("grad_inputs") or [])
    for k in grad_inputs:
        if not (0 <= k < len(inputs)) or not inputs[k].is_floating_point():
            raise ValueError(f"grad input {k} is not a floating stage input")
    params = [real(tensors[n]).requires_grad_(True) for n in param_names]
    buffers = [real(tensors[n]) for n in buffer_names]
    for k in grad_inputs:
        inputs[k].requires_grad_(True)

    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    out_vals = [a.meta.get("val") if isinstance(a, torch.fx.Node) else None for a in out_node.args[0]]
    tangent_specs = [(k, v) for k, v in enumerate(out_vals)
                     if isinstance(v, torch.Tensor) and v.dtype.is_floating_point]
    tangents = [torch.zeros(v.shape, dtype=v.dtype, device=device) for _, v in tangent_specs]
    seed = torch.zeros((), dtype=torch.int64, device=device)

    inner = ep.module()

    rng = SeededRandom()

    class Stage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            # The stage graph node by node, each node's meta (nn_module_stack)
            # current while it runs, so that make_fx copies it.
            with fx_traceback.preserve_node_meta():
                return rng.run(self.inner, *args)

    stage = Stage()
    info = {"tangents": []}

    def joint(params, buffers, inputs, tangents, seed):
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        rng.seed = seed

        state = {"inner." + n: t for n, t in zip(param_names, params)}
        state.update({"inner." + n: t for n, t in zip(buffer_names, buffers)})
        outs = torch.func.functional_call(stage, state, tuple(inputs), strict=False, tie_weights=False)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        mode = get_proxy_mode()
        info["boundary"] = len(mode.tracer.graph.nodes) if mode is not None else None
        diff, grads_of = [], []
        for (k, _), t in zip(tangent_specs, tangents):
            if outs[k].requires_grad:
                diff.append(outs[k])
                grads_of.append(t)
                info["tangents"].append(k)
        wrt = [inputs[k] for k in grad_inputs] + list(params)
        if diff:
            grads = torch.autograd.grad(diff, wrt, grads_of, allow_unused=True)
        else:
            grads = [None] * len(wrt)
        gx = [g if g is not None else torch.zeros(inputs[k].shape, dtype=inputs[k].dtype, device=device)
              for k, g in zip(grad_inputs, grads)]
        gp = grads[len(grad_inputs):]
        info["params_with_grad"] = [n for n, g in zip(param_names, gp) if g is not None]
        info["n_outputs"] = len(outs)
        return list(outs) + gx + [g for g in gp if g is not None]

    gm = make_fx(joint, tracing_mode="fake")(params, buffers, inputs, tangents, seed)
    remove_inplace(gm)

    j = Joint()
    j.gm = gm
    j.nodes = list(gm.graph.nodes)
    j.pos = {n: i for i, n in enumerate(j.nodes)}
    placeholders = [n for n in j.nodes if n.op == "placeholder"]
    refs = ([f"param:{n}" for n in param_names] + [f"buffer:{n}" for n in buffer_names]
            + [f"input:{k}" for k in range(len(inputs))] + [f"tangent:{k}" for k, _ in tangent_specs] + ["rng:0"])
    assert len(refs) == len(placeholders), (len(refs), len(placeholders))
    j.ref = dict(zip(placeholders, refs))
    tangent_nodes = {n for n, r in j.ref.items() if r.startswith("tangent:")}
    outputs = list(next(n for n in j.nodes if n.op == "output").args[0])
    if any(isinstance(o, torch.fx.Node) is False for o in outputs):
        raise NotImplementedError("the stage has a non-tensor output")
    n_out = info["n_outputs"]
    j.stage_outputs = outputs[:n_out]
    j.grad_input_nodes = outputs[n_out:n_out + len(grad_inputs)]
    j.grad_param_nodes = list(zip(info["params_with_grad"], outputs[n_out + len(grad_inputs):]))
    j.grad_inputs = grad_inputs
    j.tangents = info["tangents"]
    j.seeded = list(rng.rewritten)
    # Forward nodes: those traced before autograd.grad ran.
    fwd = None
    if info["boundary"] is not None:
        fwd = {n for n in j.nodes[:info["boundary"]] if n.op == "call_function"}
        if not all(o.op == "placeholder" or o in fwd for o in j.stage_outputs):
            fwd = None
    if fwd is not None:
        j.fwd = fwd
    else:  # no proxy mode to ask: the forward is what the tangents do not reach
        reached = set(tangent_nodes)
        for n in j.nodes:
            if any(a in reached for a in n.all_input_nodes):
                reached.add(n)
        j.fwd = {n for n in j.nodes if n.op == "call_function" and n not in reached}
    for n in j.fwd:
        if any(a in tangent_nodes for a in n.all_input_nodes):
            raise AssertionError(f"forward node {n.name} reads a tangent")
    return j


# ---------------------------------------------------------------- partition

def recompute_rule(policy):
    if policy in (None, "", "none"):
        return lambda node: False
    if policy == "all":
        return lambda node: True
    pattern = re.compile(policy)
    return lambda node: any(pattern.fullmatch(p) for p in module_paths(node))


def partition(j, policy, fused_b=False):
    """{program: (inputs (nodes), outputs (nodes), computed (set))} and the
    REFs of the values that pass between them. fused_b: a stage with input
    gradients also gets B, I and W as one program, reading what F saves for
    them (no value of its own)."""
    import operator

    import torch

    wanted = recompute_rule(policy)

    def recomputable(node):
        if node.target is operator.getitem:
            return recomputable(node.args[0])
        return not is_random(node) and (is_cheap(node) or bool(wanted(node)))

    def plan(targets, given, saving=True):
        computed, needed, saves = set(), set(), set()
        stack = list(targets)
        while stack:
            n = stack.pop()
            if n in computed or n in needed:
                continue
            if n.op == "placeholder" or n in given:
                needed.add(n)
                continue
            if saving and n in j.fwd and not recomputable(n):
                needed.add(n)
                saves.add(n)
                continue
            computed.add(n)
            stack.extend(n.all_input_nodes)
        return computed, needed, saves

    by_pos = lambda nodes: sorted(nodes, key=j.pos.__getitem__)  # noqa: E731
    grad_nodes = [n for _, n in j.grad_param_nodes]
    programs = {}
    if j.grad_inputs:
        ci, ni, si = plan(j.grad_input_nodes, set())
        # A multi-output node I computes (attention's backward: dq, dk, dv)
        # hands W the parts W needs even where I reads only some.
        ci |= {u for n in ci for u in n.users if u.target is operator.getitem}
        live_candidates = {n for n in ci if not is_cheap(n) and isinstance(n.meta.get("val"), torch.Tensor)}
        cw, nw, sw = plan(grad_nodes, live_candidates)
        saved = by_pos(si | sw)
        live = by_pos(nw & live_candidates)
        twice = [n.name for n in ci & cw if not is_cheap(n)]
        assert not twice, f"I and W would both compute {twice[:5]}"
        backward = {"I": (ci, ni, list(j.grad_input_nodes) + live), "W": (cw, nw, grad_nodes)}
        if fused_b:
            cb, nb, sb = plan(list(j.grad_input_nodes) + grad_nodes, set())
            extra = [n.name for n in sb - set(saved)]
            assert not extra, f"B would read values F does not save for I and W: {extra[:5]}"
            backward["B"] = (cb, nb, list(j.grad_input_nodes) + grad_nodes)
    else:
        cb, nb, sb = plan(grad_nodes, set())
        saved, live = by_pos(sb), []
        backward = {"B": (cb, nb, grad_nodes)}

    ref = dict(j.ref)
    ref.update({n: f"saved:{i}" for i, n in enumerate(saved)})
    ref_live = {n: f"live:{i}" for i, n in enumerate(live)}

    cf, nf, _ = plan(list(j.stage_outputs) + saved, set(), saving=False)
    f_out_refs = [f"output:{k}" for k in range(len(j.stage_outputs))] + [f"saved:{i}" for i in range(len(saved))]
    programs["F"] = (order_inputs(j, nf, ref, {}), list(j.stage_outputs) + saved, f_out_refs, cf)
    for name, (computed, needed, outs) in backward.items():
        if name == "I":
            out_refs = [f"grad_input:{k}" for k in j.grad_inputs] + [ref_live[n] for n in live]
        elif name == "B" and j.grad_inputs:
            out_refs = [f"grad_input:{k}" for k in j.grad_inputs] + [f"grad:{fqn}" for fqn, _ in j.grad_param_nodes]
        else:
            out_refs = [f"grad:{fqn}" for fqn, _ in j.grad_param_nodes]
        refs_here = dict(ref)
        if name == "W":
            refs_here.update(ref_live)
        programs[name] = (order_inputs(j, needed, refs_here, ref_live if name == "W" else {}), outs, out_refs,
                          computed)
    return programs, saved, ref, ref_live


def order_inputs(j, needed, ref, live):
    """A program's inputs: live, saved, params, buffers, inputs, rng, tangents."""
    rank = {"live": 0, "saved": 1, "param": 2, "buffer": 3, "input": 4, "rng": 5, "tangent": 6}

    def key(n):
        r = live.get(n) or ref[n]
        kind, _, rest = r.partition(":")
        return (rank[kind], int(rest) if kind in ("live", "saved") else j.pos[n])

    out = sorted(needed, key=key)
    for n in out:
        if n not in ref and n not in live:
            raise AssertionError(f"program input {n.name} has no reference")
    return out


def build_program(j, inputs, outputs, computed):
    """The program as a GraphModule over flat inputs; an output that would
    alias an input, or repeat an earlier output, is cloned."""
    import torch

    graph = torch.fx.Graph()
    env = {}
    for i, n in enumerate(inputs):
        p = graph.placeholder(f"in{i}_{n.name}")
        p.meta = dict(n.meta)
        env[n] = p
    for n in j.nodes:
        if n in computed and n not in env:
            env[n] = graph.node_copy(n, lambda a: env[a])
            if env[n].target in (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default):
                # A view valid on a value's traced layout may not be on the
                # contiguous one a program is handed (a saved attention output
                # in its kernel's transposed layout): reshape is the view where
                # one exists. Inductor makes its own layouts either way.
                env[n].target = torch.ops.aten.reshape.default

    def aliases_input(node):
        while isinstance(node, torch.fx.Node) and node.op != "placeholder":
            if not is_alias(node):
                return False
            node = node.args[0]  # a view's base; a getitem's producer (itself a view op)
        return True  # a placeholder, or a base this does not follow: clone to be safe

    outs, seen = [], set()
    for o in outputs:
        v = env[o]
        if aliases_input(v) or v in seen:
            c = graph.call_function(torch.ops.aten.clone.default, (v,))
            c.meta = dict(v.meta)
            v = c
        seen.add(v)
        outs.append(v)
    graph.output(tuple(outs))
    graph.eliminate_dead_code()
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    return gm


def make_module(gm):
    import torch

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gm = gm

        def forward(self, *args):
            return tuple(self.gm(*args))

    return Module()


def example_for(node, device):
    import torch

    v = node.meta["val"]
    return torch.zeros(tuple(int(s) for s in v.shape), dtype=v.dtype, device=device)


# ------------------------------------------------------------------ compile

def compile_train(req):
    import torch

    start = time.monotonic()
    torch.manual_seed(0)
    ep = torch.export.load(req["source"])
    device = req["device"]
    if device == "cuda":
        from torch.export.passes import move_to_device_pass

        # An index, not "cuda": the graph's _assert_tensor_metadata nodes
        # compare their device kwarg with the example inputs' cuda:0 exactly.
        device = "cuda:0"
        ep = move_to_device_pass(ep, device)
    elif device != "cpu":
        raise ValueError(f"unknown device {device!r}")
    options = {k: v for k, v in (req.get("options") or {}).items() if not k.startswith("pipecut.")}
    outputs = req["outputs"]
    j = trace_joint(ep, req, device)
    programs, saved, ref, ref_live = partition(j, req.get("recompute", "none"), fused_b="B" in req["outputs"])

    # The stage inputs as the request describes them (the runtime passes
    # such: random floats, zero ids are as good as any for tracing).
    generator = torch.Generator().manual_seed(0)
    user_examples = {f"input:{k}": example_input(s, device, generator) for k, s in enumerate(req["inputs"])}

    sigs, seconds = {}, {}
    for name in PROGRAM_ORDER:
        if name not in programs:
            continue
        if name not in outputs:
            raise ValueError(f"the request names no output file for program {name}")
        inputs, outs, out_refs, computed = programs[name]
        in_refs = [(ref_live.get(n) if name == "W" else None) or ref[n] for n in inputs]
        sig = {"program": name, "inputs": in_refs, "outputs": out_refs}
        sigs[name] = sig
        gm = build_program(j, inputs, outs, computed)
        args = tuple(user_examples[r].clone() if r in user_examples else example_for(n, device)
                     for r, n in zip(in_refs, inputs))
        t0 = time.monotonic()
        program = torch.export.export(make_module(gm), args, strict=False)
        with torch.no_grad():
            opts = dict(options)
            opts["aot_inductor.metadata"] = {**opts.get("aot_inductor.metadata", {}),
                                             "pipecut.train": json.dumps(sig)}
            torch._inductor.aoti_compile_and_package(program, package_path=outputs[name], inductor_configs=opts)
        fqns = list(torch._inductor.aoti_load_package(outputs[name]).get_constant_fqns())
        if fqns:
            raise RuntimeError(f"program {name}'s package holds constants ({', '.join(fqns[:3])}): every tensor "
                               "should be one of its inputs")
        seconds[name] = round(time.monotonic() - t0, 3)
    saved_bytes = 0
    for n in saved:
        v = n.meta["val"]
        saved_bytes += v.numel() * v.element_size()
    return {"seconds": round(time.monotonic() - start, 3), "programs": sigs, "saved_bytes": int(saved_bytes),
            "tangents": list(j.tangents), "program_seconds": seconds, "seeded_random_ops": len(j.seeded)}


def main():
    req = json.loads(sys.argv[1])
    try:
        if req["mode"] == "probe":
            import torch

            answer = {"torch": torch.__version__, "cuda": bool(torch.cuda.is_available())}
        elif req["mode"] == "compile_train":
            answer = compile_train(req)
        else:
            raise ValueError(f"unknown mode {req['mode']!r}")
    except Exception as e:  # noqa: BLE001: every failure is reported the same way
        traceback.print_exc(file=sys.stdout)
        text = " ".join(str(e).split())
        print("error: " + type(e).__name__ + (": " + text[:2000] if text else ""), flush=True)
        sys.exit(1)
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
