"""safetensors_torch.py - the PyTorch side of tests/cli/test_safetensors.sh.

  python safetensors_torch.py check FILE INPUTS OUTPUTS
      FILE was written by drover's m:save. Checks it against the reference
      writer (the same header, tensor order and bytes), loads it into the
      same nn.Sequential with load_state_dict(load_file(FILE)) and compares
      the model's outputs on INPUTS with drover's OUTPUTS to 1e-5.
  python safetensors_torch.py make DIR
      Writes DIR/torch.safetensors (save_file of a seeded model's
      state_dict, no metadata), DIR/spec.safetensors (the same, with the
      drover spec in the metadata), DIR/inputs.txt and DIR/outputs.txt.

Numbers travel as text, one row per line, "%.9g" (exact for float32).
Exit status 0 on success; a failure prints why and exits 1.
"""
import json
import struct
import sys

import safetensors.torch
import torch

# The model of the test, as PyTorch and as a drover spec (drover's test
# script builds the same one in Lua).
SPEC = ("Sequential(Linear(5,8),ReLU,Sequential(Linear(8,6),Tanh),Dropout(0.25),"
        "Linear(6,4),Sigmoid,Linear(4,3),Softmax)")


def model():
    nn = torch.nn
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 6), nn.Tanh()),
                         nn.Dropout(0.25), nn.Linear(6, 4), nn.Sigmoid(), nn.Linear(4, 3),
                         nn.Softmax(dim=1))


def read_rows(path):
    with open(path) as f:
        return torch.tensor([[float(v) for v in line.split()] for line in f if line.strip()],
                            dtype=torch.float32)


def write_rows(path, t):
    with open(path, "w") as f:
        for row in t.tolist():
            f.write(" ".join("%.9g" % v for v in row) + "\n")


def split(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return n, blob[8:8 + n], blob[8 + n:]


def same_as_reference(path, state):
    """drover's file equals what the reference writer makes of the same
    tensors and metadata: its metadata keys come out in HashMap order, so
    headers are compared parsed, in order, and the data byte for byte."""
    blob = open(path, "rb").read()
    meta = safetensors.safe_open(path, "pt").metadata()
    if meta.get("format") != "pt" or meta.get("drover.spec") != SPEC:
        return "metadata %r lacks format=pt or the spec %s" % (meta, SPEC)
    ref = safetensors.torch.save(state, metadata=meta)
    n, header, data = split(blob)
    rn, rheader, rdata = split(ref)
    if n % 8 or n != rn or header[-1:] not in (b" ", b"}"):
        return "header length %d (reference %d) is not padded to 8 the same way" % (n, rn)
    ours = json.loads(header, object_pairs_hook=list)
    theirs = json.loads(rheader, object_pairs_hook=list)
    strip = lambda h: [kv for kv in h if kv[0] != "__metadata__"]
    if strip(ours) != strip(theirs):
        return "tensor entries differ:\n  drover    %s\n  reference %s" % (strip(ours), strip(theirs))
    if data != rdata:
        return "the data bytes differ from the reference writer's"
    return None


def check(path, inputs, outputs):
    state = safetensors.torch.load_file(path)
    m = model()
    m.load_state_dict(state)  # strict: every name and shape must match
    m.eval()
    why = same_as_reference(path, state)
    if why:
        print("FAIL: " + why)
        return 1
    with torch.no_grad():
        got = m(read_rows(inputs))
    want = read_rows(outputs)
    diff = (got - want).abs().max().item()
    if got.shape != want.shape or diff > 1e-5:
        print("FAIL: PyTorch's outputs differ from drover's by %g (shapes %s, %s)"
              % (diff, tuple(got.shape), tuple(want.shape)))
        return 1
    print("ok: %d tensors, outputs within %g" % (len(state), diff))
    return 0


def make(d):
    torch.manual_seed(7)
    m = model()
    m.eval()
    x = torch.randn(6, 5)
    with torch.no_grad():
        y = m(x)
    safetensors.torch.save_file(m.state_dict(), d + "/torch.safetensors")
    safetensors.torch.save_file(m.state_dict(), d + "/spec.safetensors",
                                metadata={"format": "pt", "drover.spec": SPEC})
    write_rows(d + "/inputs.txt", x)
    write_rows(d + "/outputs.txt", y)
    print("ok: wrote %d tensors" % len(m.state_dict()))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        sys.exit(make(sys.argv[2]))
    sys.exit(__doc__)
