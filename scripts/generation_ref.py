#!/usr/bin/env python3
"""Reference generation for `pipecut-run --generate`: the unsplit exported
decode program (a `.pt2` from transformers' executorch export, KV cache
inside) run in a loop in PyTorch, and transformers' own `generate` with a
static cache.

    generation_ref.py MODEL.pt2 --prompts PROMPTS.jsonl --max-new-tokens N [--eos ID]
                      [--output OUT.jsonl]

Prompts: one JSON object per line, {"id": ..., "prompt": [token ids]}.
Output: {"id": ..., "tokens": [...], "finish": "eos"|"length"} per prompt,
in prompt order, greedy (argmax, the first of equal maxima, as torch.argmax).

Each prompt runs alone, in row 0 of the program's batch (every row carries
the prompt; rows are independent), from a fresh cache: prefill one token at
a time for a one-token program, in one call for a program exported with a
symbolic sequence length, then one token per call.
"""
import argparse
import json
import sys

import torch


def read_prompts(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def fresh_module(path):
    """The exported program as a module with a fresh KV cache: loaded anew
    (ExportedPrograms cannot be deep-copied; their module() shares the
    constants the program updates in place)."""
    return torch.export.load(path).module()


def program_shape(ep):
    """(batch, whether the sequence dimension is symbolic) of input_ids."""
    ph = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name == "input_ids"][0]
    b, t = ph.meta["val"].shape
    return int(b), not isinstance(t, int)


def generate_one(path, batch, chunked, prompt, max_new, eos):
    """Greedy tokens of one prompt through a fresh copy of the exported program."""
    mod = fresh_module(path)
    tokens = []
    with torch.no_grad():
        if chunked:
            ids = torch.tensor([prompt] * batch)
            logits = mod(input_ids=ids, cache_position=torch.arange(len(prompt)))
        else:
            for i, t in enumerate(prompt):
                logits = mod(input_ids=torch.tensor([[t]] * batch), cache_position=torch.tensor([i]))
        pos = len(prompt)
        while True:
            tok = int(logits[0, -1].argmax())
            tokens.append(tok)
            if eos is not None and tok == eos:
                return tokens, "eos"
            if len(tokens) == max_new:
                return tokens, "length"
            logits = mod(input_ids=torch.tensor([[tok]] * batch), cache_position=torch.tensor([pos]))
            pos += 1


def generate(path, prompts, max_new, eos):
    batch, chunked = program_shape(torch.export.load(path))
    out = []
    for p in prompts:
        tokens, finish = generate_one(path, batch, chunked, p["prompt"], max_new, eos)
        out.append({"id": p["id"], "tokens": tokens, "finish": finish})
    return out


def hf_generate(model, prompts, max_new, eos):
    """transformers' generate with a static cache, greedy, one prompt at a time."""
    out = []
    for p in prompts:
        ids = torch.tensor([p["prompt"]])
        kwargs = dict(max_new_tokens=max_new, do_sample=False, cache_implementation="static", pad_token_id=0)
        if eos is not None:
            kwargs["eos_token_id"] = eos
        with torch.no_grad():
            g = model.generate(ids, **kwargs)[0, len(p["prompt"]):].tolist()
        finish = "eos" if eos is not None and g and g[-1] == eos else "length"
        out.append({"id": p["id"], "tokens": g, "finish": finish})
    return out


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r, separators=(", ", ": ")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--max-new-tokens", type=int, required=True)
    ap.add_argument("--eos", type=int)
    ap.add_argument("--output")
    a = ap.parse_args()
    rows = generate(a.model, read_prompts(a.prompts), a.max_new_tokens, a.eos)
    if a.output:
        write_jsonl(a.output, rows)
    else:
        for r in rows:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
