"""What `pipecut compile` runs in the user's Python: the one step of pipecut
that needs torch's Python side (AOTInductor compiles there, nowhere else).

pipecut embeds this file in its binary and runs `PYTHON - REQUEST` with the
file on stdin; REQUEST is one JSON object:

  {"mode": "probe"}
      prints {"torch": torch.__version__, "cuda": <a CUDA device is usable>}

  {"mode": "compile", "source": STAGE.pt2, "output": PACKAGE.pt2,
   "device": "cpu"|"cuda", "options": {Inductor config, and pipecut's "pipecut.*" keys},
   "inputs": [{"dtype": "float32", "shape": [4, 8], "dims": [SYMBOL or null, ...]}, ...],
   "symbols": {SYMBOL: [min, max or null]},
   "state": [{"name": FQN, "initial": "zeros"|"stored"}, ...]}
      compiles the stage's exported program with
      torch._inductor.aoti_compile_and_package and prints
      {"seconds": compile seconds}.

State (a stage's KV cache: tensors it updates in place, the manifest's
Stage.state) becomes trailing inputs that the package updates in place, the
way pipecut-run passes state to TorchScript stages, so that a runner keeps
one set per sequence group: the stage is exported again around its module
with the state swapped in for the buffers. A "stored" initial value travels
in the package's metadata ("pipecut.state.K": dtype, shape, hex bytes).

Linear layers: with "pipecut.cpu_matmul": "onednn" float32 linears become
oneDNN's (route_linears_to_onednn); with "blas" and
"pipecut.transpose_weights" (pipecut compile sets both where auto takes
MKL) they multiply by their weights transposed once, at the package's first
run (transpose_linear_weights): runtime constant folding, whose constants
(`_FOLDED_CONST_*`) pipecut-run leaves to the package when its metadata
says "pipecut.folded_constants": "runtime".

Weights: with "aot_inductor.package_constants_in_so" false (pipecut's
default on the CPU) the package holds none and its metadata says
"pipecut.weights": "stage"; pipecut-run takes each constant by its FQN from
the stage .pt2 (under "inner." for a stage with state: the metadata's
"pipecut.weights_prefix"); lifted tensor constants are compiled as the
buffers they are, so that they keep their FQNs. A program whose compiled
constants are not all in the .pt2 is compiled again with its weights inside
("pipecut.weights": "package"); the answer's "weights" says which. A
weightless stage (the request's "external": tensors its .pt2 holds no bytes
of) is compiled around zeros standing in for them and always takes its
weights at load; one that would need them inside is refused.

The last line of stdout is the answer. A failure exits 1 with the
exception's type and message as the last line ("error: ..."), which pipecut
shows naming the stage; the traceback above it is kept for --verbose.

Example inputs: a stage .pt2 holds none, and AOTInductor wants some to trace
with. pipecut derives them from the manifest (each symbolic size at one value
inside its exported range); the symbolic sizes themselves and their ranges
come from the program, so the package accepts every size the stage does.
"""
import json
import sys
import time
import traceback


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


def attribute(module, fqn):
    for part in fqn.split("."):
        module = getattr(module, part)
    return module


def with_state_as_inputs(ep, req, args):
    """The stage re-exported with its state as trailing inputs it updates in
    place; returns (program, metadata with the stored initial values)."""
    import torch

    names = [s["name"] for s in req["state"]]
    module = ep.module()

    class WithState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *flat):
            n = len(flat) - len(names)
            return torch.func.functional_call(self.inner, dict(zip(names, flat[n:])), flat[:n], strict=False,
                                              tie_weights=False)

    initial = [attribute(module, n).detach().clone() for n in names]
    # Traced from contiguous inputs, as with_contiguous_inputs is.
    shapes = dynamic_shapes(req, len(names))
    program = torch.export.export(WithState(module), args + tuple(t.clone() for t in initial),
                                  dynamic_shapes=(shapes,) if shapes else None, strict=False)
    # Functional form: the updates become outputs that the package writes
    # back to the state inputs (the signature's user_inputs_to_mutate).
    program = program.run_decompositions({})
    metadata = {}
    for k, (spec, value) in enumerate(zip(req["state"], initial)):
        if spec.get("initial") == "stored":
            data = value.contiguous().cpu()
            if data.numel() * data.element_size() > (1 << 20):
                raise ValueError(f"state '{spec['name']}' has a stored initial value over 1 MiB; "
                                 "pipecut compile carries stored state in the package's metadata")
            raw = data.reshape(-1).view(torch.uint8).numpy().tobytes() if data.numel() else b""
            metadata[f"pipecut.state.{k}"] = json.dumps({"dtype": str(data.dtype).replace("torch.", ""),
                                                         "shape": list(data.shape), "hex": raw.hex()})
    return program, metadata


def constants_as_buffers(ep):
    """Lifted tensor constants relabelled as the non-persistent buffers they
    act as (both are read-only lifted inputs held in ep.constants): Inductor
    keeps a buffer's FQN but renames a constant (`offset` becomes
    `_tensor_constant0`), and pipecut-run finds each weight in the stage's
    .pt2 by FQN."""
    from torch.export.graph_signature import InputKind, InputSpec

    specs = ep.graph_signature.input_specs
    for i, s in enumerate(specs):
        if s.kind == InputKind.CONSTANT_TENSOR:
            specs[i] = InputSpec(kind=InputKind.BUFFER, arg=s.arg, target=s.target, persistent=False)


def linear_layers(ep):
    """The float32 linear layers whose weight (and bias) the program holds, as
    (node, x, W, bias or None), by runtime/linear_kernels.h's rule:
    aten.linear(x, W, b), or core ATen's aten.mm(x, W^T) and aten.addmm(b, x,
    W^T) with beta and alpha 1, W^T by aten.t, permute or transpose; W a
    parameter or buffer, float32, 2-D, contiguous, on the CPU, no empty
    dimension; a bias absent or such a 1-D one, one value per output. A list,
    so that the caller may rewrite the graph."""
    import torch
    from torch.export.graph_signature import InputKind

    aten = torch.ops.aten
    held = {s.arg.name: s.target for s in ep.graph_signature.input_specs
            if s.kind in (InputKind.PARAMETER, InputKind.BUFFER)}
    tensors = {**ep.state_dict, **ep.constants}

    def tensor(node):
        if not isinstance(node, torch.fx.Node) or node.op != "placeholder" or node.name not in held:
            return None
        return tensors.get(held[node.name])

    def eligible(t, dim):
        return (isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.dim() == dim and t.is_contiguous()
                and t.device.type == "cpu" and t.layout == torch.strided and all(n > 0 for n in t.shape))

    def transposed_from(node):
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            return None
        if node.target is aten.t.default:
            return node.args[0]
        if node.target is aten.permute.default and list(node.args[1]) == [1, 0]:
            return node.args[0]
        if node.target is aten.transpose.int and sorted(node.args[1:3]) in ([0, 1], [-2, -1]):
            return node.args[0]
        return None

    def operands(node):
        """(x, W, bias or None) of a linear layer `node` computes, else None."""
        if node.op != "call_function":
            return None
        if node.target is aten.linear.default and not node.kwargs:
            x, w, b = (list(node.args) + [None])[:3]
            return x, w, b
        if node.target is aten.mm.default and (w := transposed_from(node.args[1])) is not None:
            return node.args[0], w, None
        if (node.target is aten.addmm.default and node.kwargs.get("beta", 1) == 1 and node.kwargs.get("alpha", 1) == 1
                and (w := transposed_from(node.args[2])) is not None):
            return node.args[1], w, node.args[0]
        return None

    found_all = []
    for node in list(ep.graph.nodes):
        found = operands(node)
        if found is None:
            continue
        x, weight, bias = found
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        w = tensor(weight)
        if val is None or val.dtype != torch.float32 or not eligible(w, 2):
            continue
        if bias is not None and not (eligible(tensor(bias), 1) and tensor(bias).shape[0] == w.shape[0]):
            continue
        found_all.append((node, x, weight, bias))
    return found_all


def route_linears_to_onednn(ep):
    """Float32 linear layers whose weight (and bias) the program holds
    (linear_layers) become mkldnn._linear_pointwise, oneDNN's linear: the
    kernels pipecut-run runs a TorchScript stage's linears with on the CPU
    where oneDNN is faster (runtime/linear_kernels.h). Left to itself
    Inductor calls ATen's mm/addmm for them, i.e. MKL, whose code path
    follows the CPU's vendor (AVX2 on AMD CPUs with AVX-512); it keeps this
    call as one extern kernel (aoti_torch_cpu__linear_pointwise) and fuses a
    SiLU or residual add after it into it. The weights stay the program's, by
    FQN. Returns how many."""
    import torch

    layers = linear_layers(ep)
    for node, x, weight, bias in layers:
        with ep.graph.inserting_before(node):
            call = ep.graph.call_function(torch.ops.mkldnn._linear_pointwise.default,
                                          (x, weight, bias, "none", [], None))
        call.meta = dict(node.meta)
        node.replace_all_uses_with(call)
        ep.graph.erase_node(node)
    if layers:
        ep.graph.eliminate_dead_code()  # the transposes nothing reads now
        ep.graph_module.recompile()
    return len(layers)


def symbolic_sizes(ep):
    """Whether any of the program's values has a symbolic size (a stage whose
    inputs are static may still hold one its export made, dynamic_flatten's)."""
    import torch

    for node in ep.graph.nodes:
        vals = node.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else [vals]:
            if isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in v.shape):
                return True
    return False


def transpose_linear_weights(ep):
    """Float32 linear layers whose weight the program holds (linear_layers)
    multiply by W^T made contiguous ([in, out]) in place of W read
    transposed. At tens to hundreds of rows MKL's sgemm copies a transposed
    weight into its kernel's layout at every call (perf, a 4-stage split of
    the bench Llama at 32 rows on an Intel Xeon: a third of a stage in
    mkl_blas_avx512_sgemm_scopy_right48_ea) and reads an [in, out] one far
    more as it lies: the same products -18% to +44% by shape at 32-128
    rows, most faster, and no steady direction at 1-8 (2026-12-02, one
    thread, 48 weights in turn so that none stays in cache); the bench's
    packages 1.32x TorchScript stages where they ran 1.17-1.26x.
    W^T is computed from W: with runtime constant folding it is made once,
    when the package first runs, from the weights pipecut-run hands it, so
    the package stays kernels only; the cost is W^T's bytes in memory, as
    a TorchScript stage holds its weights. Returns how many."""
    import torch

    aten = torch.ops.aten
    layers = linear_layers(ep)
    for node, x, weight, bias in layers:
        wv = weight.meta["val"]
        with ep.graph.inserting_before(node):
            t = ep.graph.call_function(aten.permute.default, (weight, [1, 0]))
            t.meta["val"] = aten.permute.default(wv, [1, 0])
            kn = ep.graph.call_function(aten.clone.default, (t,), {"memory_format": torch.contiguous_format})
            kn.meta["val"] = aten.clone.default(t.meta["val"], memory_format=torch.contiguous_format)
            out = ep.graph.call_function(aten.matmul.default, (x, kn))
            out.meta["val"] = aten.matmul.default(x.meta["val"], kn.meta["val"])
            if bias is not None:
                summed = ep.graph.call_function(aten.add.Tensor, (out, bias))
                summed.meta["val"] = aten.add.Tensor(out.meta["val"], bias.meta["val"])
                out = summed
        node.replace_all_uses_with(out)
        ep.graph.erase_node(node)
    if layers:
        ep.graph.eliminate_dead_code()
        ep.graph_module.recompile()
    return len(layers)


def widen_masked_grouped_attention(ep):
    """On CUDA, an attention call with a mask and enable_gqa (pipecut's
    grouped-query-attention pass gives the narrow key and value) gets them
    widened again by repeat_interleave(x, Hq / Hkv, -3), enable_gqa's own
    definition: flash attention takes no mask and the memory-efficient
    kernel may refuse unequal heads, which would leave the unfused math
    kernel where the exported call ran fused (runtime/attention_kernels.h
    does the same for TorchScript stages). Returns how many it widened."""
    import torch

    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    count = 0
    for node in list(ep.graph.nodes):
        if node.op != "call_function" or node.target is not sdpa or not node.kwargs.get("enable_gqa"):
            continue
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        if mask is None:
            continue
        query = node.args[0].meta["val"]
        args = list(node.args)
        with ep.graph.inserting_before(node):
            for i in (1, 2):
                x = args[i]
                groups = query.shape[-3] // x.meta["val"].shape[-3]
                wide = ep.graph.call_function(torch.ops.aten.repeat_interleave.self_int, (x, groups), {"dim": -3})
                with x.meta["val"].fake_mode:
                    wide.meta["val"] = torch.ops.aten.repeat_interleave.self_int(x.meta["val"], groups, dim=-3)
                args[i] = wide
        node.args = tuple(args)
        node.kwargs = {**node.kwargs, "enable_gqa": False}
        count += 1
    if count:
        ep.graph_module.recompile()
    return count


def strided_user_inputs(ep):
    """The user inputs whose recorded layout is not known to be contiguous.
    Asked without guards: is_contiguous() on a symbolic tensor specializes
    its sizes to the example's."""
    import torch
    from torch.export.graph_signature import InputKind
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    def contiguous(t):
        expected = 1
        for size, stride in reversed(list(zip(t.shape, t.stride()))):
            if not statically_known_true(size == 1) and not statically_known_true(stride == expected):
                return False
            expected = expected * size
        return True

    user = {s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT}
    return [n.name for n in ep.graph.nodes if n.op == "placeholder" and n.name in user
            and isinstance(n.meta.get("val"), torch.Tensor) and not contiguous(n.meta["val"])]


def dynamic_shapes(req, extra=0):
    """The stage inputs' symbolic dimensions as torch.export.Dim, from the
    manifest's symbols, one entry per input (`extra` more without any); None
    when no input has one."""
    import torch

    dims = {}
    for name, (lo, hi) in req.get("symbols", {}).items():
        dims[name] = torch.export.Dim(name, min=lo, max=hi) if hi is not None else torch.export.Dim(name, min=lo)
    shapes = [{d: dims[sym] for d, sym in enumerate(s.get("dims", [])) if sym} or None for s in req["inputs"]]
    shapes += [None] * extra
    return tuple(shapes) if any(shapes) else None


def with_contiguous_inputs(ep, req, args):
    """The stage re-exported from contiguous example inputs. pipecut-run
    hands a package contiguous inputs (runtime/stage_program.cpp makes every
    input so; one from another process arrives so), and AOTInductor compiles
    for the strides the program's placeholders record, reading its inputs
    with them unchecked: a stage whose input is a transposed view (a cut
    inside attention sends the query after its transpose) computed wrong
    values. Tracing again from contiguous inputs derives every layout from
    them (the ops are the same; a view on a contiguous tensor is always
    legal)."""
    import torch

    program = torch.export.export(ep.module(), args, dynamic_shapes=dynamic_shapes(req), strict=False,
                                  prefer_deferred_runtime_asserts_over_guards=True)
    return program.run_decompositions({})


def materialize_meta(ep):
    """A weightless stage's tensors (no bytes in its .pt2: torch.export.load
    makes them meta tensors) as CPU zeros of their dtype and shape, so that
    the program traces and compiles: the external tensors, which the package
    never holds (pipecut compiles a weightless split with its constants left
    out, and pipecut-run hands it the bound checkpoint tensors by FQN), and
    a KV cache's state, passed in as inputs. Zeros, not empty: calloc'd
    pages cost no memory until read. Returns whether there were any."""
    import torch

    found = False
    for table in (ep.state_dict, ep.constants):
        for name, t in list(table.items()):
            if not isinstance(t, torch.Tensor) or t.device.type != "meta":
                continue
            z = torch.zeros(t.shape, dtype=t.dtype)
            table[name] = torch.nn.Parameter(z, requires_grad=t.requires_grad) if isinstance(t, torch.nn.Parameter) else z
            found = True
    return found


def compile_stage(req):
    import torch

    torch.manual_seed(0)
    ep = torch.export.load(req["source"])
    external = req.get("external") or []
    stand_ins = materialize_meta(ep)
    options = dict(req.get("options") or {})
    if stand_ins:
        # Nothing may depend on the stand-ins' values: Inductor inlines a
        # constant of at most 8 elements into the kernels (inv_freq of a small
        # head), and folds constant-only expressions whose value is uniform
        # (every stand-in is) into a `full` at compile time.
        options["always_keep_tensor_constants"] = True
        options["joint_graph_constant_folding"] = False
    # Before the state wrapper: the module it wraps then holds them as
    # buffers too, under "inner.".
    constants_as_buffers(ep)
    device = req["device"]
    if device == "cuda":
        from torch.export.passes import move_to_device_pass

        # An index, not "cuda": the graph's _assert_tensor_metadata nodes
        # compare their device kwarg with the example inputs' cuda:0 exactly.
        device = "cuda:0"
        ep = move_to_device_pass(ep, device)
        widen_masked_grouped_attention(ep)
    generator = torch.Generator().manual_seed(0)
    args = tuple(example_input(s, device, generator) for s in req["inputs"])
    # pipecut's own settings ride with Inductor's, under "pipecut.".
    ours = {k: options.pop(k) for k in list(options) if k.startswith("pipecut.")}
    if device == "cpu" and ours.get("pipecut.cpu_matmul") == "onednn" and not options.get("freezing"):
        # Before the state wrapper and the re-export, which trace the call as
        # it is. Freezing makes oneDNN linears of its own, weights prepacked
        # (in AOT mode Inductor packs float32 weights for oneDNN, not MKL),
        # from the mm/addmm it would otherwise call.
        route_linears_to_onednn(ep)
    # Static sizes only: with symbolic ones (llama_dynamic) the packages so
    # rewritten computed wrong sizes under torch 2.11 (an output's batch of
    # 2 where the input's was 3, then an index out of range); whether the
    # rewrite or runtime folding is at fault is not known yet.
    folded_at_run = False
    if (device == "cpu" and ours.get("pipecut.transpose_weights") and not options.get("freezing")
            and not symbolic_sizes(ep) and transpose_linear_weights(ep)):
        options["aot_inductor.use_runtime_constant_folding"] = True
        folded_at_run = True
    stage_names = set(ep.state_dict) | set(ep.constants)
    metadata, prefix = {}, ""
    if req.get("state"):
        ep, metadata = with_state_as_inputs(ep, req, args)
        # The wrapper's parameters are the stage's under "inner.".
        prefix = metadata["pipecut.weights_prefix"] = "inner."
    else:
        if strided_user_inputs(ep):
            ep = with_contiguous_inputs(ep, req, args)
        ep.example_inputs = (args, {})
    if folded_at_run:
        metadata["pipecut.folded_constants"] = "runtime"
    weightless = (options.get("aot_inductor.package_constants_in_so", True) is False
                  and not options.get("aot_inductor.package_constants_on_disk_format"))

    def compile_with(weights):
        meta = {**metadata, "pipecut.weights": weights} if weightless else metadata
        opts = dict(options)
        if meta:
            opts["aot_inductor.metadata"] = {**opts.get("aot_inductor.metadata", {}), **meta}
        if weights == "package":
            opts["aot_inductor.package_constants_in_so"] = True
        # Inference packages, compiled as such: Inductor freezes (folds and
        # prepacks the weights it was told to, "freezing") only without grad.
        with torch.no_grad():
            torch._inductor.aoti_compile_and_package(ep, package_path=req["output"], inductor_configs=opts)

    start = time.monotonic()
    weights = "stage" if weightless else "package"
    compile_with(weights)
    if weightless:
        # pipecut-run takes each constant by its FQN from the stage .pt2.
        # A constant Inductor made itself is in no .pt2: then the package
        # keeps its weights; unless it is one that runtime constant folding
        # computes from the others when the package first runs
        # (`_FOLDED_CONST_*`), folding pipecut asked for itself.
        fqns = torch._inductor.aoti_load_package(req["output"]).get_constant_fqns()
        if folded_at_run:
            fqns = [f for f in fqns if not f.startswith("_FOLDED_CONST_")]
        own = [f for f in fqns if (f[len(prefix):] if f.startswith(prefix) else f) not in stage_names]
        if own and external:
            raise RuntimeError("the stage is weightless (a split without its weights) and Inductor made constants "
                               "of its own from them (" + ", ".join(own[:3]) + "), which would hold stand-ins: "
                               "split with --weights to compile this stage")
        if own:
            weights = "package"
            compile_with(weights)
    return {"seconds": round(time.monotonic() - start, 3), "weights": weights}


def main():
    req = json.loads(sys.argv[1])
    try:
        if req["mode"] == "probe":
            import torch

            answer = {"torch": torch.__version__, "cuda": bool(torch.cuda.is_available())}
        else:
            answer = compile_stage(req)
    except Exception as e:  # noqa: BLE001: every failure is reported the same way
        traceback.print_exc(file=sys.stdout)
        text = " ".join(str(e).split())
        print("error: " + type(e).__name__ + (": " + text[:2000] if text else ""), flush=True)
        sys.exit(1)
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
