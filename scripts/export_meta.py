#!/usr/bin/env python3
"""Export a transformers causal LM's graph on the meta device, for pipecut to
bind the checkpoint's weights: no weight is read, made or written.

    export_meta.py --config CONFIG -o OUTDIR [--dtype float32|bfloat16|float16]
                   [--batch B] [--seq T] [--cache C] [--no-decode] [--chunked]

CONFIG is a config.json, or a directory holding one (the checkpoint directory
itself, typically). Nothing is downloaded. Writes into OUTDIR:
  model.pt2            the forward program: input_ids [B, T] int64 -> logits
                       [B, T, vocab], every name the checkpoint's (the model
                       class is AutoModelForCausalLM's for the config, its
                       forward returning the logits alone)
  decode.pt2           the decode step `pipecut-run --generate` runs (unless
                       --no-decode): transformers' executorch recipe, a static
                       cache of C positions, batch B, one token per call
                       (--chunked: the sequence length symbolic, 1..C-1)
  buffers.safetensors  what checkpoints lack: non-persistent buffers (rotary
                       inv_freq, Gemma's embed_scale) and the values of lifted
                       constants, under the model's own names
and prints the pipecut commands that bind the checkpoint to both programs.

Parameters are made on the meta device as they are registered (as
accelerate's init_empty_weights(include_buffers=False)), so buffers computed
in __init__ keep their real values; they are read, then moved to meta too,
and the program is traced with inputs on meta. Tied parameters (one tensor
under two names: GPT-2's lm_head.weight and transformer.wte.weight) are
declared in the extra record pipecut_tied_weights.json, since
torch.export.save puts every meta tensor of a dtype into one record. The KV
cache of decode.pt2 is state, which pipecut starts at zeros.

--dtype defaults to the config's dtype (as AutoModelForCausalLM.from_config),
else float32. Attention is "sdpa" where the class supports it, else "eager".

Exit status: 0 ok; 1 usage; 2 bad input (a missing or unreadable config, a
model transformers cannot build or export as a causal LM, a constant whose
value is unknown, an OUTDIR holding other files), the message naming the
file and field.
"""
import argparse
import contextlib
import json
import os
import shlex
import shutil
import struct
import sys
import zipfile

# Offline before transformers is imported: a config names no files to fetch,
# and nothing may be downloaded.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.export.graph_signature import InputKind  # noqa: E402

OUTPUTS = ("model.pt2", "decode.pt2", "buffers.safetensors")
TIES_EXTRA = "pipecut_tied_weights.json"
WRITER = "scripts/export_meta.py"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SAFETENSORS_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}


class BadInput(Exception):
    """Exit 2: the message names the file and field."""


# ---------------------------------------------------------------- config


def config_path(arg):
    path = os.path.join(arg, "config.json") if os.path.isdir(arg) else arg
    if not os.path.isfile(path):
        raise BadInput(f"{path}: no such file")
    return path


def load_config(path):
    """The transformers config of a config.json, read locally."""
    from transformers import CONFIG_MAPPING

    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: {e}")
    if not isinstance(d, dict) or not isinstance(d.get("model_type"), str):
        raise BadInput(f"{path}: model_type: missing; transformers needs it to pick the model class")
    if d.get("auto_map"):
        raise BadInput(f"{path}: auto_map: the model's code lives in its repository (trust_remote_code); "
                       "only classes transformers ships are exported")
    if d["model_type"] not in CONFIG_MAPPING:
        raise BadInput(f"{path}: model_type: '{d['model_type']}' is no model this transformers knows")
    try:
        return CONFIG_MAPPING[d["model_type"]].from_dict(d)
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds
        raise BadInput(f"{path}: transformers refuses the config: {type(e).__name__}: {e}")


def causal_lm_class(config, path):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    try:
        return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]
    except KeyError:
        raise BadInput(f"{path}: model_type: '{config.model_type}' has no causal LM class in transformers")


def program_dtype(arg, config):
    if arg:
        return DTYPES[arg]
    d = getattr(config, "dtype", None)
    if isinstance(d, str):
        d = getattr(torch, d, None)
    return d if d in SAFETENSORS_DTYPES else torch.float32


# ---------------------------------------------------------------- the model


def logits_class(base):
    """`base` whose forward takes input_ids and returns the logits alone: a
    ModelOutput in the output spec would make torch.export.load need
    transformers. A subclass keeps every FQN the checkpoint's."""

    class Logits(base):
        def forward(self, input_ids):
            return super().forward(input_ids=input_ids, use_cache=False).logits

    Logits.__qualname__ = Logits.__name__ = base.__name__ + "Logits"  # reads cleanly in nn_module_stack
    return Logits


@contextlib.contextmanager
def parameters_on_meta():
    """Every parameter registered inside goes to the meta device at once;
    buffers stay real. A parameter already on meta is kept as it is, so a
    tie (the same Parameter set on two modules) stays one tensor."""
    register = nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, param)
        p = module._parameters.get(name)
        if p is not None and p.device.type != "meta":
            module._parameters[name] = type(p)(p.to("meta"), requires_grad=p.requires_grad)

    nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register


def build(config, base, dtype, path):
    """The Logits model with parameters on meta, buffers computed on the CPU."""
    config.use_cache = True  # the decode recipe refuses a model without a cache
    attn = "sdpa" if base._supports_sdpa else "eager"
    if attn != "sdpa":
        print(f"note: {base.__name__} does not support sdpa; attention is eager", file=sys.stderr)
    try:
        with parameters_on_meta():
            return logits_class(base)._from_config(config, dtype=dtype, attn_implementation=attn).eval()
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"{path}: transformers cannot build {base.__name__} from it: {type(e).__name__}: "
                       f"{first_line(e)}")


def non_persistent_buffers(model):
    """name -> CPU value of every buffer the checkpoint does not hold."""
    saved = set(model.state_dict())
    out = {}
    for name, b in model.named_buffers(remove_duplicate=False):
        if name in saved:
            continue
        if b.device.type == "meta":
            raise BadInput(f"buffer '{name}': computed from parameters in __init__, so its value is unknown "
                           "without the weights")
        out[name] = b.detach().clone().contiguous()  # safetensors stores no shared or strided tensors
    return out


def buffers_to_meta(model):
    moved = {}
    for module in model.modules():
        for k, b in module._buffers.items():
            if b is not None:
                module._buffers[k] = moved.setdefault(id(b), b.to("meta"))


def tie_groups(module, lifted):
    """Groups of names of one tensor, among the names the program lifts."""
    by_id = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + list(
            module.named_buffers(remove_duplicate=False)):
        by_id.setdefault(id(t), []).append(name)
    groups = [sorted(n for n in names if n in lifted) for names in by_id.values()]
    return sorted(g for g in groups if len(g) >= 2)


def module_prefix(root, model):
    """The path under which `root` holds `model`, with its dot."""
    for name, m in root.named_modules():
        if m is model:
            return name + "." if name else ""
    raise AssertionError("the model is not inside the exported module")


# ---------------------------------------------------------------- export


def export_forward(model, batch, seq, path):
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    try:
        return torch.export.export(model, (ids,), strict=False)
    except Exception as e:  # noqa: BLE001 - whatever the model's code does under export
        raise BadInput(f"{path}: torch.export cannot trace {type(model).__name__}: {type(e).__name__}: "
                       f"{first_line(e)}")


def first_line(e):
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def decode_wrapper(model, batch, cache):
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": batch, "max_cache_len": cache}
    return TorchExportableModuleForDecoderOnlyLM(model, batch_size=batch, max_cache_len=cache)


def export_decode(wrapper, batch, cache, chunked, device="meta"):
    """As scripts/fixtures/generation.py: the wrapper's .export with inputs on `device`."""
    if not chunked:
        return wrapper.export(input_ids=torch.zeros(batch, 1, dtype=torch.long, device=device),
                              cache_position=torch.tensor([0], device=device), strict=False)
    seq = torch.export.Dim("seq", min=1, max=cache - 1)
    return wrapper.export(input_ids=torch.zeros(batch, 4, dtype=torch.long, device=device),
                          cache_position=torch.arange(4, device=device),
                          dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}}, strict=False)


def lifted_names(ep):
    return {s.target for s in ep.graph_signature.input_specs
            if s.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}


def state_names(ep):
    """Lifted buffers and constants the program writes in place (a KV cache, its
    counters): state, which pipecut starts at zeros. As pipecut's ir::findState."""
    root = {s.arg.name: s.target for s in ep.graph_signature.input_specs
            if s.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}
    written = set()
    for n in ep.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload) or not n.args:
            continue
        first = n.target._schema.arguments[0] if n.target._schema.arguments else None
        writes = first is not None and first.alias_info is not None and first.alias_info.is_write
        if writes and isinstance(n.args[0], torch.fx.Node) and n.args[0].name in root:
            written.add(root[n.args[0].name])
            root[n.name] = root[n.args[0].name]
    return written


def unknown_constants(ep):
    """Lifted constants that are not state: their values were made on meta."""
    state = state_names(ep)
    return sorted(s.target for s in ep.graph_signature.input_specs
                  if s.kind == InputKind.CONSTANT_TENSOR and s.target not in state)


def fake_parameters(model):
    """Replaces the model's parameters by FakeTensors on the CPU (no memory),
    its buffers real: tracing it gives the constants the CPU program would
    lift, with values, as a program exported with its weights has them.
    Returns the fake mode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = {}
    for module in model.modules():
        for k, p in module._parameters.items():
            if p is not None and id(p) not in fakes:
                with mode:
                    fakes[id(p)] = nn.Parameter(torch.empty(p.shape, dtype=p.dtype), requires_grad=False)
            if p is not None:
                module._parameters[k] = fakes[id(p)]
    return mode


def constant_values(ep, names, trace, what):
    """The values of `names` from a second trace on fake CPU tensors; the two
    programs must lift the same constants."""
    try:
        shadow = trace()
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"{what}: lifts constants {', '.join(names)}, whose values a meta export does not have, "
                       f"and tracing on the CPU to compute them failed: {type(e).__name__}: {first_line(e)}")
    out = {}
    for name in names:
        c, meta = shadow.constants.get(name), ep.constants[name]
        ok = (isinstance(c, torch.Tensor) and type(c) is torch.Tensor and c.dtype == meta.dtype
              and c.shape == meta.shape)
        if not ok:
            raise BadInput(f"{what}: constant '{name}' has no value a meta export can know "
                           "(it depends on the weights, or tracing on the CPU lifts other constants)")
        out[name] = c.detach().clone().contiguous()
    return out


def shadow_forward(build_fresh, batch, seq):
    """The forward program traced on the CPU, from a model no trace has run:
    some keep what their first call computed (Phi-3's long_inv_freq)."""
    model = build_fresh()
    fake_parameters(model)
    return torch.export.export(model, (torch.zeros(batch, seq, dtype=torch.long),), strict=False)


def unfake_cache(wrapper):
    """The static cache made under the fake mode, as real CPU tensors never
    written (untouched pages: no memory). The program lifts the tensors the
    cache layers hold as constants, and export takes no fakes of another mode."""
    real = {}

    def swap(t):
        if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
            return real.setdefault(id(t), torch.empty(t.shape, dtype=t.dtype))
        return t

    for obj in vars(wrapper.model).values():
        for layer in getattr(obj, "layers", None) or []:
            for k, v in list(vars(layer).items()):
                setattr(layer, k, swap(v))
    for k, b in list(wrapper.model._buffers.items()):
        wrapper.model._buffers[k] = swap(b)


def shadow_decode(build_fresh, base, batch, cache, chunked):
    model = build_fresh()
    mode = fake_parameters(model)
    model.__class__ = base
    with mode:
        w = decode_wrapper(model, batch, cache)
    unfake_cache(w)
    return export_decode(w, batch, cache, chunked, device="cpu")


# ---------------------------------------------------------------- output


def is_meta_export(path):
    """A .pt2 whose tensors all have no bytes: what this script writes."""
    try:
        with zipfile.ZipFile(path) as z:
            configs = [n for n in z.namelist() if n.endswith("_config.json") and "/data/" in n]
            metas = [json.loads(z.read(n)).get("config", {}) for n in configs]
    except (OSError, zipfile.BadZipFile, ValueError):
        return False
    devices = {e.get("tensor_meta", {}).get("device", {}).get("type") for c in metas for e in c.values()}
    return bool(configs) and devices <= {"meta"}


def is_ours(path):
    if path.endswith(".pt2"):
        return is_meta_export(path)
    try:
        return read_safetensors_header(path).get("__metadata__", {}).get("written_by") == WRITER
    except (OSError, ValueError):
        return False


def stale_temporary(path):
    """A directory replace() made in a run whose process is gone."""
    name = os.path.basename(path)
    prefix = ".export_meta.tmp."
    if not name.startswith(prefix) or not name[len(prefix):].isdigit() or not os.path.isdir(path):
        return False
    try:
        os.kill(int(name[len(prefix):]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False


def check_outdir(out):
    """OUTDIR may be new, empty, or hold only what this script wrote."""
    if not os.path.exists(out):
        return
    if not os.path.isdir(out) or os.path.islink(out):
        raise BadInput(f"{out}: not a directory")
    for name in sorted(os.listdir(out)):
        p = os.path.join(out, name)
        if stale_temporary(p):
            shutil.rmtree(p)  # left by a run that was killed
            continue
        if name not in OUTPUTS or not os.path.isfile(p) or os.path.islink(p) or not is_ours(p):
            raise BadInput(f"{out}: holds '{name}', which {WRITER} did not write; give an empty or new directory")


def replace(path, write):
    """Write beside `path` and rename into place: never half a file. The
    temporary keeps the file's name, which torch.export.save puts in every
    record's path."""
    tmpdir = os.path.join(os.path.dirname(path), f".export_meta.tmp.{os.getpid()}")
    os.makedirs(tmpdir, exist_ok=True)
    tmp = os.path.join(tmpdir, os.path.basename(path))
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        os.rmdir(tmpdir)


def save_program(ep, path, ties):
    extra = {TIES_EXTRA: json.dumps({"tied": ties})} if ties else None
    replace(path, lambda tmp: torch.export.save(ep, tmp, extra_files=extra))


def save_buffers(tensors, path):
    from safetensors.torch import save_file

    replace(path, lambda tmp: save_file(dict(sorted(tensors.items())), tmp, metadata={"written_by": WRITER}))


def read_safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 << 20:
            raise ValueError("header too large")
        return json.loads(f.read(n))


def checkpoint_dtypes(directory):
    """The floating dtypes of the checkpoint beside config.json (headers only), or None."""
    files = [f for f in os.listdir(directory) if f.endswith(".safetensors")]
    if not files:
        return None
    out = set()
    for f in files:
        try:
            header = read_safetensors_header(os.path.join(directory, f))
        except (OSError, ValueError, struct.error):
            return None
        out |= {v["dtype"] for k, v in header.items() if k != "__metadata__" and v["dtype"][0] in "FB"}
    return out


def commands(out, ckpt, cast, prefix, decode):
    q = shlex.quote
    w = f"--weights {q(ckpt)} --weights {q(os.path.join(out, 'buffers.safetensors'))}"
    w += " --weights-cast" if cast else ""
    lines = [f"pipecut split {q(os.path.join(out, 'model.pt2'))} {w} --stages 4 --balance params "
             f"-o {q(os.path.join(out, 'split'))}"]
    if decode:
        lines.append(f"pipecut split {q(os.path.join(out, 'decode.pt2'))} {w} --weights-prefix {q(prefix)} "
                     f"--stages 4 --balance params -o {q(os.path.join(out, 'split_decode'))}")
        lines.append(f"pipecut-run {q(os.path.join(out, 'split_decode'))} --generate --prompts PROMPTS.jsonl "
                     "--max-new-tokens 32")
    return lines


# ---------------------------------------------------------------- main


def position_limit(config):
    """(config.json's field, positions the model has), or (None, None)."""
    limit = getattr(config, "max_position_embeddings", None)
    if not isinstance(limit, int):
        return None, None
    return config.attribute_map.get("max_position_embeddings", "max_position_embeddings"), limit  # GPT-2: n_positions


def shapes(a, config, path):
    """(seq, cache): the defaults filled in, both within the model's positions."""
    field, limit = position_limit(config)
    seq = a.seq or min(limit or 128, 128)
    cache = a.cache or min(limit or 2048, 2048)
    for flag, n in (("--seq", seq), ("--cache", cache)):
        if limit and n > limit:
            raise BadInput(f"{path}: {field}: {flag} {n} is more than the model's {limit} positions")
    if a.chunked and cache < 5:
        raise BadInput(f"--cache {cache}: a chunked decode program is traced with a 4-token chunk; it needs "
                       "at least 5 positions")
    return seq, cache


def forward_program(fresh, batch, seq, path):
    """(program, its ties, the non-persistent buffers' values, the constants' values)."""
    model = fresh()
    buffers = non_persistent_buffers(model)
    buffers_to_meta(model)
    ep = export_forward(model, batch, seq, path)
    names = unknown_constants(ep)
    consts = constant_values(ep, names, lambda: shadow_forward(fresh, batch, seq), "model.pt2") if names else {}
    return ep, tie_groups(model, lifted_names(ep)), buffers, consts


def decode_program(fresh, base, batch, cache, chunked, path):
    """(program, its ties, the prefix of the model's names, the constants' values under the model's names)."""
    model = fresh()
    buffers_to_meta(model)
    model.__class__ = base  # the recipe calls forward with the cache
    try:
        w = decode_wrapper(model, batch, cache)
        ep = export_decode(w, batch, cache, chunked)
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"{path}: transformers' decode recipe fails for {base.__name__}: "
                       f"{type(e).__name__}: {first_line(e)} (--no-decode writes model.pt2 alone)")
    prefix = module_prefix(w.model, model)
    names = unknown_constants(ep)
    consts = {}
    if names:
        values = constant_values(ep, names, lambda: shadow_decode(fresh, base, batch, cache, chunked), "decode.pt2")
        # Keyed as the checkpoint is, so that one --weights-prefix serves both.
        consts = {n[len(prefix):] if n.startswith(prefix) else n: v for n, v in values.items()}
    return ep, tie_groups(w.model, lifted_names(ep)), prefix, consts


def merge_constants(into, more):
    for key, v in more.items():
        if key in into and not torch.equal(into[key], v):
            raise BadInput(f"decode.pt2: constant '{key}' differs from model.pt2's of that name; "
                           "one buffers file cannot hold both (--no-decode)")
        into[key] = v


def write(out, programs, tensors, no_decode):
    os.makedirs(out, exist_ok=True)
    for name, ep, ties in programs:
        save_program(ep, os.path.join(out, name), ties)
    save_buffers(tensors, os.path.join(out, "buffers.safetensors"))
    if no_decode and os.path.exists(os.path.join(out, "decode.pt2")):
        os.unlink(os.path.join(out, "decode.pt2"))  # an earlier run's, for another program


def run(a):
    path = config_path(a.config)
    config = load_config(path)
    base = causal_lm_class(config, path)
    dtype = program_dtype(a.dtype, config)
    check_outdir(a.out)
    seq, cache = shapes(a, config, path)

    # Each program from a model no trace has run: some keep what their first
    # call computed (Phi-3's longrope keeps long_inv_freq).
    fresh = lambda: build(config, base, dtype, path)  # noqa: E731
    fwd, ties, buffers, consts = forward_program(fresh, a.batch, seq, path)
    programs = [("model.pt2", fwd, ties)]
    prefix = ""
    if not a.no_decode:
        dec, ties, prefix, more = decode_program(fresh, base, a.batch, cache, a.chunked, path)
        merge_constants(consts, more)
        programs.append(("decode.pt2", dec, ties))

    lifted = set().union(*(lifted_names(ep) for _, ep, _ in programs))
    tensors = {k: v for k, v in buffers.items() if k in lifted or prefix + k in lifted}
    tensors.update(consts)
    write(a.out, programs, tensors, a.no_decode)

    directory = os.path.dirname(os.path.abspath(path))
    found = checkpoint_dtypes(directory)
    ckpt = directory if found is not None else "CHECKPOINT_DIR"
    cast = bool(found) and found != {SAFETENSORS_DTYPES[dtype]}
    decode = "" if a.no_decode else (f"; decode.pt2 batch {a.batch}, cache {cache}, "
                                     + ("prompt chunks" if a.chunked else "one token")
                                     + f" per call, names under '{prefix}'")
    print(f"{base.__name__}, {str(dtype).replace('torch.', '')}: model.pt2 input_ids [{a.batch}, {seq}]{decode}"
          f"; buffers.safetensors: {len(tensors)} tensors" + (f" ({len(consts)} constants)" if consts else ""))
    for name, _, ties in programs:
        for group in ties:
            print(f"{name}: tied: " + ", ".join(group))
    print("next:")
    for line in commands(a.out, ckpt, cast, prefix, not a.no_decode):
        print("  " + line)
    return 0


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return v


class Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {message}\n")  # 1 is usage; argparse's 2 is bad input here


def main():
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="config.json, or the directory holding it")
    ap.add_argument("-o", "--out", required=True, help="output directory")
    ap.add_argument("--dtype", choices=sorted(DTYPES), help="the programs' floating dtype (default: the config's)")
    ap.add_argument("--batch", type=positive, default=1, help="batch of both programs (default 1)")
    ap.add_argument("--seq", type=positive, help="model.pt2's sequence length (default: 128, or the model's positions)")
    ap.add_argument("--cache", type=positive, help="decode.pt2's cache positions (default: the model's, at most 2048)")
    ap.add_argument("--no-decode", action="store_true", help="write no decode.pt2")
    ap.add_argument("--chunked", action="store_true", help="decode.pt2 takes prompt chunks (sequence length symbolic)")
    a = ap.parse_args()
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    try:
        return run(a)
    except BadInput as e:
        print(f"export_meta.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
