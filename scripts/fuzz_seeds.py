#!/usr/bin/env python3
"""Seed inputs for the fuzz targets (test/fuzz/targets.h), taken from the fixtures.

    fuzz_seeds.py OUTDIR [--pipecut BUILT_PIPECUT] [--root REPO]

Writes OUTDIR/<target>/<name> for each target, in the targets' input formats:
  program_json    models/*.json of every testdata/models/*.pt2
  payload_config  every *_config.json of those archives, prefixed by 8 bytes
                  (little endian): the largest of its records' sizes, rounded up
                  to 8, so every entry's record is big enough
  split_spec      testdata/specs/*.json
  safetensors     testdata/models/*.ref.safetensors (the small ones)
  pickle          the data.pkl of every torch.save payload in those archives
                  (the older layouts' state dicts and constants, sample inputs)
  archive         testdata/models/*.pt2 themselves (the small ones)
  manifest        with --pipecut: manifest.json ('j' + text) and manifest.pb
                  ('b' + bytes) of `pipecut split` over a few fixtures and their specs
  run_options     pipecut-run command lines (NUL-separated) as the tests and README give them
  control_messages one of each rendezvous message (runtime/control_messages.h), unsealed
Python standard library only.
"""
import argparse
import io
import struct
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MANIFEST_FIXTURES = ["mlp.2", "skip.4", "nograd_seed.2", "multi_io.2", "gpt2_tied.2", "dynamic_batch.2"]
MAX_SAFETENSORS = 1 << 20
MAX_ARCHIVE = 64 << 10


def write(out: Path, target: str, name: str, data: bytes) -> None:
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


RUN_COMMAND_LINES = [
    ["DIR", "--inputs", "in.safetensors", "--check", "ref.safetensors", "-m", "4", "--schedule", "1f1b", "-q"],
    ["DIR", "--random-inputs", "--seed", "3", "--batch-size", "2", "--int-high", "50", "--iterations", "3", "--warmup", "1"],
    ["DIR", "--random-inputs", "--devices", "cpu,cuda:0", "--stage-ranks", "0,0,1,1", "--backend", "gloo-strict",
     "--timeout", "30", "--queue-depth", "4", "--threads", "2", "--atol", "1e-5", "--rtol", "0"],
    ["DIR", "--random-inputs", "--stage-format", "pt2", "--output", "o.safetensors", "--trace", "t.json", "--json"],
    ["DIR", "--train", "--data", "d.safetensors", "--steps", "2", "-m", "4", "--schedule", "zb1p", "--optimizer",
     "adamw", "--lr", "0.001", "--betas", "0.9,0.999", "--eps", "1e-8", "--weight-decay", "0.01"],
    ["DIR", "--train", "--data", "d.safetensors", "--momentum", "0.9", "--save-checkpoint", "C", "--load-checkpoint", "C"],
    ["DIR", "--profile", "p.json", "--random-inputs", "--iterations", "5", "--warmup", "0", "--threads", "1"],
    ["DIR", "--random-inputs", "--expect-manifest", "0" * 64, "--force"],
]


def control_messages():
    """One of each message kind, as the ranks write them (no seal: selector bit 7 clear)."""
    u64 = lambda v: struct.pack("<Q", v & (2**64 - 1))
    hello = b"H" + u64(2) + u64(4242) + bytes(range(16))
    identity = b"I" + u64(2) + b"a" * 64 + b"0123456789abcdef" * 4
    abort_failed = b"A" + bytes([1]) + u64(1) + u64(-1) + bytes([2])
    abort_silent = b"A" + bytes([3]) + u64(0) + u64(3) + bytes([0])
    counter = b"C" + u64(17)
    numbers = b"N" + u64(3) + b"".join(struct.pack("<d", x) for x in (0.5, 12.0, 3e9))
    return [("hello", 0, hello), ("identity", 1, identity), ("abort_failed", 2, abort_failed),
            ("abort_silent", 2, abort_silent), ("counter", 3, counter), ("numbers_strict", 4, numbers),
            ("numbers_any", 5, numbers)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--pipecut", help="the built pipecut, for manifest seeds")
    ap.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    a = ap.parse_args()
    root, out = Path(a.root), Path(a.out)
    models = root / "testdata" / "models"
    counts = {}

    def add(target, name, data):
        write(out, target, name, data)
        counts[target] = counts.get(target, 0) + 1

    for pt2 in sorted(models.glob("*.pt2")):
        stem = pt2.stem
        with zipfile.ZipFile(pt2) as z:
            infos = {i.filename: i for i in z.infolist()}
            for name, info in sorted(infos.items()):
                parts = name.split("/")
                if (len(parts) == 3 and parts[1] == "models" and name.endswith(".json")) or \
                        name == "serialized_exported_program.json":
                    add("program_json", f"{stem}.{parts[-1]}", z.read(name))
                elif name.endswith(".pt"):
                    try:
                        saved = zipfile.ZipFile(io.BytesIO(z.read(name)))
                    except zipfile.BadZipFile:
                        continue
                    with saved:
                        for inner in saved.namelist():
                            if inner.endswith("/data.pkl"):
                                add("pickle", f"{stem}.{parts[-1]}.pkl", saved.read(inner))
                elif name.endswith("_config.json") and "/data/" in name:
                    prefix = name[: name.rindex("/") + 1]
                    sizes = [i.file_size for n, i in infos.items() if n.startswith(prefix) and n != name]
                    size = max(sizes, default=8)
                    size = (size + 7) // 8 * 8
                    add("payload_config", f"{stem}.{parts[-1]}", size.to_bytes(8, "little") + z.read(name))

    for pt2 in sorted(models.glob("*.pt2")):
        if pt2.stat().st_size <= MAX_ARCHIVE:
            add("archive", pt2.name, pt2.read_bytes())

    for spec in sorted((root / "testdata" / "specs").glob("*.json")):
        add("split_spec", spec.name, spec.read_bytes())

    for st in sorted(models.glob("*.safetensors")):
        if st.stat().st_size <= MAX_SAFETENSORS:
            add("safetensors", st.name, st.read_bytes())

    for i, line in enumerate(RUN_COMMAND_LINES):
        add("run_options", f"line{i}", b"\0".join(x.encode() for x in line))
    for name, selector, message in control_messages():
        add("control_messages", name, bytes([selector]) + message)

    if a.pipecut:
        tmp = Path(tempfile.mkdtemp(prefix="pipecut-fuzz-seeds-"))
        try:
            for case in MANIFEST_FIXTURES:
                model, spec = models / (case.split(".")[0] + ".pt2"), root / "testdata" / "specs" / (case + ".json")
                if not model.exists() or not spec.exists():
                    continue
                outdir = tmp / case
                r = subprocess.run([a.pipecut, "split", str(model), "--spec", str(spec), "-o", str(outdir),
                                    "--format", "pt2"], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"fuzz_seeds: pipecut split {case} failed ({r.returncode}):\n{r.stdout}{r.stderr}",
                          file=sys.stderr)
                    return 1
                add("manifest", f"{case}.json", b"j" + (outdir / "manifest.json").read_bytes())
                add("manifest", f"{case}.pb", b"b" + (outdir / "manifest.pb").read_bytes())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    print("fuzz_seeds: " + ", ".join(f"{t} {n}" for t, n in sorted(counts.items())) + f" in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
