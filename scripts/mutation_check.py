#!/usr/bin/env python3
"""Structure-aware mutation of everything pipecut and pipecut-run read, run
through the real binaries: every run must end in exit 0 or exit 2 with a
message that names the file, never a crash, a hang, exit 3 or litter.

Mutated: the JSON records of .pt2 fixtures (the program, the weights and
constants configs) through `pipecut inspect` and `pipecut split`; split specs
through `pipecut split --preview`; manifests (JSON) through `pipecut verify`
and `pipecut-run`; safetensors headers through `pipecut-run --inputs/--check`.

A mutation edits the parsed JSON tree: it deletes a member or element,
replaces a value with one of another type or an edge value (-1, 2^63-1, "",
null, ...), nudges a number, swaps in another string of the same document (a
value name where another was meant), or duplicates or swaps list elements.
Failing cases are kept under OUT/failures with the command that failed.

Standard library only. Usage:
  mutation_check.py --bin BUILD/tools --out DIR [--runs N] [--seed S] [--kinds pt2,spec,manifest,safetensors]
"""
import argparse
import copy
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "testdata", "models")
SPECS = os.path.join(ROOT, "testdata", "specs")
# Small fixtures keep a run fast; together they cover HOPs, tied weights,
# buffers, lifted constants, several inputs and outputs, and symbolic shapes.
PT2_FIXTURES = ["mlp", "multi_io", "nograd_seed", "gpt2_tied", "cnn_bn", "dynamic_batch", "skip", "autocast_off",
                "control_flow", "dynamic_flatten", "gpt2_tied_torch27", "cnn_bn_torch28"]
TIMEOUT_S = 60

EDGE_VALUES = [0, -1, 1, 2, 7, 255, 2**31, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, -0.0, 1e308,
               "", "x", "as_tensor", "Infinity", True, False, None, [], {}, [0], {"as_int": 1}]


def walk(node, path=()):
    """Yields (path, value) for every node of a JSON tree."""
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


def strings_of(tree):
    out = []
    for _, v in walk(tree):
        if isinstance(v, str) and len(v) < 200:
            out.append(v)
    return out or ["x"]


def get(tree, path):
    for p in path:
        tree = tree[p]
    return tree


def mutate_root(tree, rng, ops):
    """Like mutate_json, but the root itself may be replaced or deleted: returns (new tree, description)."""
    box = {"root": tree}
    done = mutate_json(box, rng, ops)
    return box.get("root"), done


def mutate_json(tree, rng, ops):
    """Applies `ops` random edits in place; returns a description of each."""
    done = []
    for _ in range(ops):
        nodes = list(walk(tree))
        path, value = rng.choice(nodes[1:] if len(nodes) > 1 else nodes)
        if not path:
            continue
        parent = get(tree, path[:-1])
        key = path[-1]
        choice = rng.random()
        if choice < 0.2:
            del parent[key]
            done.append(f"delete {list(path)}")
        elif choice < 0.5:
            new = copy.deepcopy(rng.choice(EDGE_VALUES))
            parent[key] = new
            done.append(f"set {list(path)} = {json.dumps(new)}")
        elif choice < 0.65 and isinstance(value, (int, float)) and not isinstance(value, bool):
            new = rng.choice([value + 1, value - 1, -value, value * 2, value * 1000003])
            parent[key] = new
            done.append(f"nudge {list(path)} to {new}")
        elif choice < 0.8 and isinstance(value, str):
            new = rng.choice(strings_of(tree))
            parent[key] = new
            done.append(f"rename {list(path)} to {new!r}")
        elif isinstance(value, list) and value:
            if rng.random() < 0.5:
                i = rng.randrange(len(value))
                value.insert(i, copy.deepcopy(value[i]))
                done.append(f"duplicate {list(path)}[{i}]")
            else:
                i, j = rng.randrange(len(value)), rng.randrange(len(value))
                value[i], value[j] = value[j], value[i]
                done.append(f"swap {list(path)}[{i}] and [{j}]")
        else:
            parent[key] = copy.deepcopy(rng.choice(EDGE_VALUES))
            done.append(f"set {list(path)}")
    return done


class Runner:
    def __init__(self, bin_dir, out):
        self.pipecut = os.path.join(bin_dir, "pipecut")
        self.run = os.path.join(bin_dir, "pipecut-run")
        self.out = out
        self.failures = 0
        self.counts = {}

    def check(self, kind, cmd, case_files, description, must_name, outputs=()):
        """Runs cmd; a failure is anything but exit 0, or exit 2 naming `must_name`."""
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                               env=dict(os.environ, OMP_NUM_THREADS="1"))
            rc, text = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            rc, text = "timeout", ""
        self.counts.setdefault(kind, {}).setdefault(str(rc), 0)
        self.counts[kind][str(rc)] += 1
        problem = None
        if rc == 2:
            if must_name not in text:
                problem = f"exit 2 without naming {must_name}"
        elif rc != 0:
            problem = f"exit {rc}"
        for o in outputs:
            parent, base = os.path.split(o)
            litter = [n for n in os.listdir(parent) if n.startswith(base + ".tmp.") or n.startswith(base + ".old.")]
            if litter:
                problem = (problem + "; " if problem else "") + f"left {litter}"
            if rc == 2 and os.path.exists(o):
                problem = (problem + "; " if problem else "") + f"exit 2 but {o} was written"
        if problem:
            self.failures += 1
            keep = os.path.join(self.out, "failures", f"{kind}_{self.failures:04d}")
            os.makedirs(keep, exist_ok=True)
            for f in case_files:
                if os.path.isdir(f):
                    shutil.copytree(f, os.path.join(keep, os.path.basename(f)), dirs_exist_ok=True)
                elif os.path.exists(f):
                    shutil.copy(f, keep)
            with open(os.path.join(keep, "README.txt"), "w") as fh:
                fh.write(" ".join(cmd) + "\n" + "\n".join(description) + "\n---\n" + text[-4000:])
            print(f"FAIL {kind}: {problem}\n  {' '.join(cmd)}\n  " + "\n  ".join(description) +
                  "\n  " + text.strip()[-600:].replace("\n", "\n  "), flush=True)
        return rc, time.time() - t0


def rewrite_pt2(src, dst, record_suffix, rng, ops):
    with zipfile.ZipFile(src) as z:
        infos = z.infolist()
        targets = [i.filename for i in infos if i.filename.endswith(record_suffix)]
        target = rng.choice(targets)
        tree = json.loads(z.read(target))
        description = [f"{target}: " + d for d in mutate_json(tree, rng, ops)]
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as w:
            for i in infos:
                data = z.read(i.filename)
                if i.filename == target:
                    data = json.dumps(tree).encode()
                w.writestr(i.filename, data)
    return description


def spec_for(name):
    for n in (2, 4):
        p = os.path.join(SPECS, f"{name}.{n}.json")
        if os.path.exists(p):
            return p
    return None


def case_pt2(r, rng, work, i):
    name = rng.choice(PT2_FIXTURES)
    suffix = rng.choice(["models/model.json", "models/model.json", "_weights_config.json", "_constants_config.json"])
    src = os.path.join(MODELS, name + ".pt2")
    with zipfile.ZipFile(src) as z:
        if not any(n.endswith(suffix) for n in z.namelist()):
            suffix = "models/model.json"
        if not any(n.endswith(suffix) for n in z.namelist()):  # the torch <= 2.7 layout
            suffix = "serialized_exported_program.json"
    path = os.path.join(work, f"m{i}.pt2")
    description = [f"fixture {name}"] + rewrite_pt2(src, path, suffix, rng, rng.randint(1, 3))
    r.check("pt2-inspect", [r.pipecut, "inspect", path], [path], description, path)
    out = os.path.join(work, f"m{i}_split")
    rc, _ = r.check("pt2-split", [r.pipecut, "split", path, "--spec", spec_for(name), "-o", out], [path],
                    description, path, outputs=[out])
    shutil.rmtree(out, ignore_errors=True)
    os.remove(path)


def case_spec(r, rng, work, i):
    name = rng.choice(PT2_FIXTURES)
    spec = spec_for(name)
    with open(spec) as f:
        tree = json.load(f)
    tree, done = mutate_root(tree, rng, rng.randint(1, 2))
    description = [f"spec {os.path.basename(spec)}"] + done
    path = os.path.join(work, f"s{i}.json")
    with open(path, "w") as f:
        json.dump(tree, f)
    model = os.path.join(MODELS, name + ".pt2")
    r.check("spec", [r.pipecut, "split", model, "--spec", path, "--preview"], [path], description, path)
    os.remove(path)


def prepare_split(r, work, name):
    out = os.path.join(work, "base_" + name)
    if not os.path.isdir(out):
        subprocess.run([r.pipecut, "split", os.path.join(MODELS, name + ".pt2"), "--spec", spec_for(name), "-o", out],
                       check=True, capture_output=True)
    return out


def case_manifest(r, rng, work, i):
    name = rng.choice(["mlp", "multi_io", "skip", "gpt2_tied"])
    base = prepare_split(r, work, name)
    d = os.path.join(work, f"d{i}")
    shutil.copytree(base, d)
    mpath = os.path.join(d, "manifest.json")
    with open(mpath) as f:
        tree = json.load(f)
    tree, done = mutate_root(tree, rng, rng.randint(1, 2))
    description = [f"split of {name}"] + done
    with open(mpath, "w") as f:
        json.dump(tree, f)
    # A directory holds both manifests, in agreement: manifest.pb follows the
    # mutated JSON when the reader takes it (else the JSON alone disagrees).
    if r.manifest_sync:
        subprocess.run([r.manifest_sync, d], capture_output=True)
    r.check("manifest-verify", [r.pipecut, "verify", d], [d], description, d)
    if rng.random() < 0.5:
        ref = os.path.join(MODELS, name + ".ref.safetensors")
        r.check("manifest-run", [r.run, d, "--inputs", ref, "--check", ref, "--quiet", "--threads", "1"],
                [d], description, d)
    shutil.rmtree(d)


def case_safetensors(r, rng, work, i):
    name = rng.choice(["mlp", "multi_io", "skip"])
    base = prepare_split(r, work, name)
    with open(os.path.join(MODELS, name + ".ref.safetensors"), "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    description = [f"{name}.ref.safetensors"]
    if rng.random() < 0.8:
        header, done = mutate_root(header, rng, rng.randint(1, 2))
        description += done
        blob = json.dumps(header).encode()
        raw = struct.pack("<Q", len(blob)) + blob + data
    else:  # the container itself: a wrong length, or a cut
        if rng.random() < 0.5:
            raw = struct.pack("<Q", rng.choice([0, 7, n + 1, len(raw), 2**40, 2**64 - 1])) + raw[8:]
        else:
            raw = raw[:rng.randrange(len(raw))]
        description.append(f"container edit, {len(raw)} bytes")
    path = os.path.join(work, f"t{i}.safetensors")
    with open(path, "wb") as f:
        f.write(raw)
    flag = rng.choice(["--inputs", "--check"])
    ref = os.path.join(MODELS, name + ".ref.safetensors")
    cmd = [r.run, base, "--quiet", "--threads", "1"]
    cmd += ["--inputs", path, "--check", ref] if flag == "--inputs" else ["--inputs", ref, "--check", path]
    rc, _ = r.check("safetensors", cmd, [path], description, path)
    os.remove(path)


CASES = {"pt2": case_pt2, "spec": case_spec, "manifest": case_manifest, "safetensors": case_safetensors}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="directory holding pipecut and pipecut-run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=400, help="mutants in all, spread over the kinds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kinds", default="pt2,spec,manifest,safetensors")
    ap.add_argument("--manifest-sync", help="tests' pipecut_manifest_sync: rewrites manifest.pb from a mutated manifest.json")
    a = ap.parse_args()
    shutil.rmtree(a.out, ignore_errors=True)
    work = os.path.join(a.out, "work")
    os.makedirs(work)
    r = Runner(a.bin, a.out)
    r.manifest_sync = a.manifest_sync
    rng = random.Random(a.seed)
    kinds = a.kinds.split(",")
    # pt2 mutants are the class: half of all runs.
    weights = {"pt2": 4, "spec": 1, "manifest": 2, "safetensors": 1}
    pool = [k for k in kinds for _ in range(weights[k])]
    t0 = time.time()
    for i in range(a.runs):
        CASES[rng.choice(pool)](r, rng, work, i)
    shutil.rmtree(work, ignore_errors=True)
    total = sum(sum(c.values()) for c in r.counts.values())
    print(f"{a.runs} mutants, {total} runs in {time.time() - t0:.0f} s (seed {a.seed}); exit codes per command:")
    for kind, c in sorted(r.counts.items()):
        print(f"  {kind:<16} " + ", ".join(f"{k}: {v}" for k, v in sorted(c.items())))
    if r.failures:
        print(f"{r.failures} failures; cases kept under {os.path.join(a.out, 'failures')}")
        return 1
    print("every run ended in exit 0 or exit 2 naming the file, with nothing left behind")
    return 0


if __name__ == "__main__":
    sys.exit(main())
