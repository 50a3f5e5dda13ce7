"""What `pipecut compile` runs in the user's Python: the one step of pipecut
that needs torch's Python side (AOTInductor compiles there, nowhere else).

pipecut embeds this file in its binary and runs `PYTHON - REQUEST` with the
file on stdin; REQUEST is one JSON object:

  {"mode": "probe"}
      prints {"torch": torch.__version__, "cuda": <a CUDA device is usable>}

  {"mode": "compile", "source": STAGE.pt2, "output": PACKAGE.pt2,
   "device": "cpu"|"cuda", "options": {Inductor config},
   "inputs": [{"dtype": "float32", "shape": [4, 8]}, ...]}
      compiles the stage's exported program with
      torch._inductor.aoti_compile_and_package and prints
      {"seconds": compile seconds}.

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


def compile_stage(req):
    import torch

    torch.manual_seed(0)
    ep = torch.export.load(req["source"])
    device = req["device"]
    if device == "cuda":
        from torch.export.passes import move_to_device_pass

        ep = move_to_device_pass(ep, "cuda")
    generator = torch.Generator().manual_seed(0)
    args = tuple(example_input(s, device, generator) for s in req["inputs"])
    ep.example_inputs = (args, {})
    start = time.monotonic()
    torch._inductor.aoti_compile_and_package(ep, package_path=req["output"], inductor_configs=req.get("options") or {})
    return {"seconds": round(time.monotonic() - start, 3)}


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


main()
