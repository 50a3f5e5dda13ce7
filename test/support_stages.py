#!/usr/bin/env python3
"""The stages of a split made with `pipecut split --support` against their
marks, read back with torch.export.load (test/run_support.sh):

    support_stages.py DIR TARGET [EXPECTED_MARKS]

TARGET is "aoti" or a dictionary JSON file. A stage marked supported holds
only nodes the target takes (recursively through higher-order ops' bodies);
a stage marked unsupported holds at least one it refuses. EXPECTED_MARKS,
e.g. "101", is the marks in stage order. Exit 1 with what differs.
"""
import json
import os
import sys
import warnings

import torch


def op_name(node):
    t = node.target
    if isinstance(t, torch._ops.HigherOrderOperator):
        return "higher_order." + t.name()
    if isinstance(t, torch._ops.OpOverload):
        return t.name().replace("::", ".") + ("" if "." in t.name().split("::")[1] else ".default")
    return None  # Python-level symbolic arithmetic (operator.mul, ...)


def sizes_only(node):
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else [val]
    return bool(vals) and all(isinstance(v, (torch.SymInt, torch.SymBool, torch.SymFloat, int, bool, float)) for v in vals)


def bodies(gm, node):
    for a in node.args:
        if isinstance(a, torch.fx.Node) and a.op == "get_attr":
            sub = getattr(gm, a.target)
            if isinstance(sub, torch.fx.GraphModule):
                yield sub


def walk(gm, enclosing=None):
    """(node, op name, innermost enclosing higher-order op name) for every call."""
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = op_name(node)
        if name is None:
            continue
        yield node, name, enclosing
        for sub in bodies(gm, node):
            yield from walk(sub, name)


# export's own assertions, which every target takes (ir/op_traits.h isExportGuard)
GUARDS = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default"}


def refuses_dictionary(table):
    def refuses(node, name, enclosing):
        if sizes_only(node) or name in GUARDS:
            return None
        if name not in table:
            return f"{name} is not in the dictionary"
        entry = table[name]
        if entry is None:
            return None
        for i, allowed in enumerate(entry):
            if allowed is None or i >= len(node.args) or not isinstance(node.args[i], torch.fx.Node):
                continue
            dtype = str(node.args[i].meta["val"].dtype).replace("torch.", "")
            if dtype not in allowed:
                return f"{name} argument {i} is {dtype}"
        return None
    return refuses


def refuses_aoti(node, name, enclosing):
    if name == "higher_order.map_impl" and enclosing is not None:
        return f"a map inside {enclosing}"
    return None


def main():
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    directory, target = sys.argv[1], sys.argv[2]
    expected = sys.argv[3] if len(sys.argv) > 3 else None
    refuses = refuses_aoti if target == "aoti" else refuses_dictionary(json.load(open(target)))
    manifest = json.load(open(os.path.join(directory, "manifest.json")))
    failures, marks = [], ""
    for st in manifest["stages"]:
        supported = st.get("supported")
        if supported is None:
            failures.append(f"stage {st['index']} has no mark")
            continue
        marks += "1" if supported else "0"
        pt2 = [f["path"] for f in st["files"] if f["format"] == "pt2"][0]
        gm = torch.export.load(os.path.join(directory, pt2)).graph_module
        refused = [r for r in (refuses(n, name, enc) for n, name, enc in walk(gm)) if r]
        if supported and refused:
            failures.append(f"stage {st['index']} is marked supported but holds {refused[0]}")
        if not supported and not refused:
            failures.append(f"stage {st['index']} is marked unsupported but the target takes all of it")
    if expected is not None and marks != expected:
        failures.append(f"marks {marks}, expected {expected}")
    for f in failures:
        print(f"support_stages: {directory}: {f}")
    if failures:
        sys.exit(1)
    print(f"support_stages: {directory}: {len(manifest['stages'])} stages agree with their marks ({marks})")


if __name__ == "__main__":
    main()
