"""Rewrites the pipecut.train signature in a training package's metadata, as
a damaged or forged package would carry it (run_train_compiled.sh's
refusals; pipecut-run --no-verify then reads it).

Usage: python test/tamper_train_package.py PACKAGE.pt2 HOW
HOW: garbled (the JSON cut short), missing (no pipecut.train), program
(another program's name), param (a parameter the stage does not train),
kind (a reference of no kind pipecut knows), outputs (one output fewer than
the program returns).
"""
import json
import os
import sys
import zipfile


def tamper(meta, how):
    if how == "garbled":
        meta["pipecut.train"] = meta["pipecut.train"][:-7]
        return
    if how == "missing":
        del meta["pipecut.train"]
        return
    sig = json.loads(meta["pipecut.train"])
    if how == "program":
        sig["program"] = "I" if sig["program"] != "I" else "W"
    elif how == "param":
        i = next(i for i, r in enumerate(sig["inputs"]) if r.startswith("param:"))
        sig["inputs"][i] = "param:m.not_trained"
    elif how == "kind":
        sig["inputs"][0] = "weight:0"
    elif how == "outputs":
        sig["outputs"] = sig["outputs"][:-1]
    else:
        raise SystemExit(f"unknown HOW {how!r}")
    meta["pipecut.train"] = json.dumps(sig)


def main():
    path, how = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(path) as z:
        entries = [(info, z.read(info.filename)) for info in z.infolist()]
    staged = path + ".tampering"
    with zipfile.ZipFile(staged, "w", zipfile.ZIP_STORED) as out:
        for info, data in entries:
            if info.filename.endswith("_metadata.json"):  # the wrapper's and the kernel's: the same map
                meta = json.loads(data)
                tamper(meta, how)
                data = json.dumps(meta).encode()
            out.writestr(info, data)
    os.replace(staged, path)


if __name__ == "__main__":
    main()
