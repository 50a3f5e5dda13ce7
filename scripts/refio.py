"""Reference tensor files for pipecut.

Layout (the safetensors file layout, written and read by hand so that the C++
side can parse it without Python):

    u64 little-endian N | N bytes UTF-8 JSON header (space padded to 8) | data

Header: {"__metadata__": {str: str}, "<key>": {"dtype", "shape", "data_offsets"}}
with offsets relative to the start of the data section.  Tensors are stored
contiguously, little-endian, without gaps, in the order their keys appear in
the (sorted-key) header, i.e. lexicographic: input.0, input.1, input.10, input.2,
..., output.0, ...  Readers should rely on data_offsets only.  The JSON is emitted with sorted keys and no
spaces so that files are byte-deterministic.
"""

import json
import struct
import sys

import torch

FORMAT = "pipecut-ref-1"

_DTYPE_TO_CODE = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}
_CODE_TO_DTYPE = {v: k for k, v in _DTYPE_TO_CODE.items()}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    if t.dtype not in _DTYPE_TO_CODE:
        raise TypeError(f"refio: unsupported dtype {t.dtype}")
    if t.numel() == 0:
        return b""
    # Reinterpret as raw bytes (view as uint8 works for every supported dtype).
    raw = t.reshape(-1).view(torch.uint8).numpy().tobytes()
    if sys.byteorder != "little" and t.element_size() > 1:
        raise RuntimeError("refio: big-endian hosts are not supported")
    return raw


def write_ref(path, inputs, outputs, metadata):
    """Write flat lists of input and output tensors plus string metadata."""
    tensors = {f"input.{i}": t for i, t in enumerate(inputs)}
    tensors.update({f"output.{j}": t for j, t in enumerate(outputs)})
    write_tensors(path, tensors, metadata)


def _sort_key(key):
    kind, _, idx = key.partition(".")
    return (kind, int(idx))


def read_ref(path):
    """Return (inputs, outputs, metadata) from a file written by write_ref."""
    tensors, metadata = read_tensors(path)
    inputs, outputs = {}, {}
    for key, t in tensors.items():
        kind, _, idx = key.partition(".")
        if kind not in ("input", "output") or not idx.isdigit():
            raise ValueError(f"refio: {path}: unexpected key {key!r}")
        (inputs if kind == "input" else outputs)[int(idx)] = t

    def as_list(d, what):
        if sorted(d) != list(range(len(d))):
            raise ValueError(f"refio: {path}: {what} indices are not 0..{len(d) - 1}")
        return [d[i] for i in range(len(d))]

    return as_list(inputs, "input"), as_list(outputs, "output"), metadata


def write_tensors(path, tensors, metadata):
    """Write a {key: tensor} dict (any keys) plus string metadata. The header is
    emitted with sorted keys; the data follows in that same (lexicographic) order."""
    entries = sorted(tensors.items(), key=lambda e: e[0])
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs = []
    offset = 0
    for key, t in entries:
        if key == "__metadata__":
            raise ValueError("refio: '__metadata__' is not a tensor key")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"refio: {key} is not a tensor ({type(t).__name__})")
        raw = _tensor_bytes(t)
        header[key] = {
            "dtype": _DTYPE_TO_CODE[t.dtype],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    hdr = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for raw in blobs:
            f.write(raw)


def read_tensors(path):
    """Return ({key: tensor}, metadata) from any safetensors file (keys not restricted)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"refio: {path}: file too short")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"refio: {path}: header length {n} exceeds file size")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    body = memoryview(data)[8 + n :]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for key, info in header.items():
        if info["dtype"] not in _CODE_TO_DTYPE:
            raise ValueError(f"refio: {path}: {key}: unsupported dtype {info['dtype']}")
        dtype = _CODE_TO_DTYPE[info["dtype"]]
        shape = info["shape"]
        begin, end = info["data_offsets"]
        if end > len(body) or begin > end:
            raise ValueError(f"refio: {path}: bad data_offsets for {key}")
        chunk = bytes(body[begin:end])
        if len(chunk) == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(bytearray(chunk), dtype=torch.uint8).view(dtype).reshape(shape).clone()
        tensors[key] = t
    return tensors, metadata

if __name__ == "__main__":
    # Tiny self-test / dumper: refio.py FILE prints the header.
    for p in sys.argv[1:]:
        ins, outs, meta = read_ref(p)
        print(p)
        for k, v in sorted(meta.items()):
            print(f"  meta {k} = {v}")
        for i, t in enumerate(ins):
            print(f"  input.{i}: {t.dtype} {list(t.shape)}")
        for j, t in enumerate(outs):
            print(f"  output.{j}: {t.dtype} {list(t.shape)}")
