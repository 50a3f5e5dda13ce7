"""Deep programs without a deep export: torch.export of a 1400-layer Llama
takes minutes, so the benchmarks export a 2-layer tiny Llama once and
replicate its second decoder layer in the program JSON, as many times as
wanted. Each copy gets its own values, its own parameter placeholders and
FQNs (model.layers.<k>...) and its own module-call entries, and takes the
previous copy's hidden state; the shared rotary tables and mask feed every
copy, as in the real model. Each copy's weights are copies of the original
layer's records (a tiny layer's are ~9 KB), so the program has the node and
weight count of a deep model and no weight is tied to another layer's.

    python bench/deep_program.py SRC.pt2 LAYERS OUT.pt2
"""
import copy
import json
import re
import sys
import zipfile

# Bumped whenever the output changes, so that cached copies are rebuilt
# (bench/scale.py names its files with it). 2: tensor_values in definition
# order, copies' placeholders in first-use order. 3: each copy's weights in
# records of their own.
VERSION = 3


def _names_in(obj, out):
    """Collects every value name an Argument (or a list/dict of them) refers to."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "as_tensor" and isinstance(v, dict) and "name" in v:
                out.append(v["name"])
            elif k == "as_tensors" and isinstance(v, list):  # e.g. aten.cat's inputs
                out.extend(t["name"] for t in v if isinstance(t, dict) and "name" in t)
            elif k == "as_name" and isinstance(v, str):
                out.append(v)
            else:
                _names_in(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _names_in(v, out)
    return out


def _rename(obj, mapping):
    if isinstance(obj, dict):
        res = {}
        for k, v in obj.items():
            if k == "as_tensor" and isinstance(v, dict) and v.get("name") in mapping:
                v = dict(v, name=mapping[v["name"]])
                res[k] = v
            elif k == "as_tensors" and isinstance(v, list):
                res[k] = [dict(t, name=mapping[t["name"]]) if isinstance(t, dict) and t.get("name") in mapping else t
                          for t in v]
            elif k == "as_name" and isinstance(v, str) and v in mapping:
                res[k] = mapping[v]
            else:
                res[k] = _rename(v, mapping)
        return res
    if isinstance(obj, list):
        return [_rename(v, mapping) for v in obj]
    return obj


def replicate(src, layers, dst):
    with zipfile.ZipFile(src) as z:
        infos = z.infolist()
        model_rec = next(i.filename for i in infos if i.filename.endswith("models/model.json"))
        weights_rec = next(i.filename for i in infos if i.filename.endswith("_weights_config.json"))
        prog = json.loads(z.read(model_rec))
        wcfg = json.loads(z.read(weights_rec))
        records = {i.filename: z.read(i.filename) for i in infos}

    gm = prog["graph_module"]
    g = gm["graph"]
    nodes = g["nodes"]
    layer = re.compile(r"(^|,|;)L__self__model\.layers\.1(\.|,)")
    in_layer = [bool(layer.search(n.get("metadata", {}).get("nn_module_stack", ""))) for n in nodes]
    first = in_layer.index(True)
    last = len(in_layer) - 1 - in_layer[::-1].index(True)
    body = nodes[first:last + 1]
    assert all(in_layer[first:last + 1]), "layer 1's nodes are not contiguous"

    defined = set()
    for n in body:
        defined.update(_names_in(n["outputs"], []))
    used_after = set()
    for n in nodes[last + 1:]:
        used_after.update(_names_in(n["inputs"], []))
    used_after.update(_names_in(g["outputs"], []))
    outs = [v for v in defined if v in used_after]
    assert len(outs) == 1, f"layer 1 should hand one value on, found {outs}"
    layer_out = outs[0]
    # The hidden state layer 1 reads: a value made by layer 0 (the residual add).
    produced_before = {}
    for n in nodes[:first]:
        for v in _names_in(n["outputs"], []):
            produced_before[v] = n
    layer0 = re.compile(r"(^|,|;)L__self__model\.layers\.0(\.|,)")
    ext = {}  # first-use order, so that the copies' placeholders come out the same on every run
    for n in body:
        ext.update((v, None) for v in _names_in(n["inputs"], []) if v not in defined)
    hidden = [v for v in ext if v in produced_before and layer0.search(
        produced_before[v].get("metadata", {}).get("nn_module_stack", ""))]
    assert len(hidden) == 1, f"layer 1 should read one hidden state from layer 0, found {hidden}"
    hidden_in = hidden[0]
    params = {s["parameter"]["arg"]["name"]: s["parameter"]["parameter_name"]
              for s in gm["signature"]["input_specs"] if "parameter" in s}
    layer_params = [p for p in ext if p in params and params[p].startswith("model.layers.1.")]

    new_nodes, new_specs, new_inputs, new_recs = [], [], [], []
    weights_dir = weights_rec.rsplit("/", 1)[0]
    infos_by_name = {i.filename: i for i in infos}
    prev_out = layer_out
    tv = g["tensor_values"]
    for k in range(2, layers):
        mapping = {v: f"{v}_L{k}" for v in defined}
        mapping[hidden_in] = prev_out
        for p in layer_params:
            np_name = p.replace("_layers_1_", f"_layers_{k}_")
            mapping[p] = np_name
            fqn = params[p].replace("model.layers.1.", f"model.layers.{k}.")
            new_specs.append({"parameter": {"arg": {"name": np_name}, "parameter_name": fqn}})
            new_inputs.append({"as_tensor": {"name": np_name}})
            tv[np_name] = tv[p]
            # A record of its own, as in a real deep model: shared records
            # would tie every layer's weights together.
            entry = dict(wcfg["config"][params[p]])
            entry["path_name"] = f"{entry['path_name']}_L{k}"
            src_rec = f"{weights_dir}/{wcfg['config'][params[p]]['path_name']}"
            new_recs.append((zipfile.ZipInfo(f"{weights_dir}/{entry['path_name']}", date_time=infos_by_name[src_rec].date_time),
                             records[src_rec]))
            wcfg["config"][fqn] = entry
        for n in body:
            c = _rename(copy.deepcopy(n), mapping)
            md = c.get("metadata", {})
            if "nn_module_stack" in md:
                md["nn_module_stack"] = md["nn_module_stack"].replace("model.layers.1", f"model.layers.{k}")
            if c.get("name") in mapping:
                c["name"] = mapping[c["name"]]
            new_nodes.append(c)
        for v in defined:
            if v in tv:
                tv[mapping[v]] = tv[v]
        prev_out = mapping[layer_out]

    tail = _rename(nodes[last + 1:], {layer_out: prev_out})
    g["nodes"] = nodes[:last + 1] + new_nodes + tail
    g["outputs"] = _rename(g["outputs"], {layer_out: prev_out})
    gm["signature"]["output_specs"] = _rename(gm["signature"]["output_specs"], {layer_out: prev_out})
    # Parameter placeholders come first, in signature order.
    n_params = sum(1 for s in gm["signature"]["input_specs"] if "parameter" in s)
    g["inputs"] = g["inputs"][:n_params] + new_inputs + g["inputs"][n_params:]
    specs = gm["signature"]["input_specs"]
    gm["signature"]["input_specs"] = specs[:n_params] + new_specs + specs[n_params:]
    mcg = gm.get("module_call_graph") or []
    extra = []
    for k in range(2, layers):
        for e in mcg:
            if e["fqn"] == "model.layers.1" or e["fqn"].startswith("model.layers.1."):
                extra.append(dict(e, fqn=e["fqn"].replace("model.layers.1", f"model.layers.{k}", 1)))
    gm["module_call_graph"] = mcg + extra

    # tensor_values in definition order (graph inputs, then each node's
    # outputs), as torch.export writes it: readers that attach metadata walk
    # this table, and a scrambled order would measure cache misses no real
    # export causes.
    order = _names_in(g["inputs"], [])
    for n in g["nodes"]:
        _names_in(n["outputs"], order)
    g["tensor_values"] = {**{v: tv[v] for v in order if v in tv}, **tv}
    records[model_rec] = json.dumps(prog).encode()
    records[weights_rec] = json.dumps(wcfg).encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
        for i in infos:
            z.writestr(i, records[i.filename])
        for info, data in new_recs:
            z.writestr(info, data)
    return len(g["nodes"])


if __name__ == "__main__":
    print(replicate(sys.argv[1], int(sys.argv[2]), sys.argv[3]), "nodes")
