"""torch_layers.py - the PyTorch side of tests/cli/test_torch_layers.sh.

  python torch_layers.py DIR CASE...
      For each CASE, DIR/CASE.safetensors is a model drover saved (its
      spec in the metadata); DIR/CASE.x, .dy, .y, .dx and .grads are
      drover's input, output gradient, output, input gradient and
      parameter gradients (one parameter a line, flattened, in drover's
      order, which is PyTorch's named_parameters order). The same model is
      built here from the spec, loaded with load_state_dict and run on x;
      outputs and gradients must agree to 1e-4 (relative to the largest
      value, with an absolute floor).
  python torch_layers.py DIR --losses
      DIR/loss.txt: lines "NAME DELTA LOSS" with DIR/loss_NAME.pred,
      .target and .grad; checked against torch.nn.functional.

Numbers travel as text, "%.9g" (exact for float32). Exit status 0 on
success; a failure prints why and exits 1.
"""
import re
import sys

import safetensors
import safetensors.torch
import torch

nn = torch.nn
F = torch.nn.functional


class Residual(nn.Module):
    """drover's nn.Residual(m): x + m(x), m registered as child "0"."""

    def __init__(self, m):
        super().__init__()
        self.add_module("0", m)

    def forward(self, x):
        return x + self._modules["0"](x)


class Concat(nn.Module):
    """drover's nn.Concat (Torch7's nn.Concat(2)): children "0", "1", ...
    on the same input, outputs joined along dimension 1."""

    def __init__(self, *ms):
        super().__init__()
        for i, m in enumerate(ms):
            self.add_module(str(i), m)

    def forward(self, x):
        return torch.cat([m(x) for m in self._modules.values()], 1)


def tokens(spec):
    return re.findall(r"[A-Za-z0-9_.eE+:-]+|[(),]", spec)


def build(toks, i=0):
    """The torch module for the spec layer starting at toks[i]; returns
    (module, next index)."""
    name = toks[i]
    i += 1
    args = []
    children = []
    if i < len(toks) and toks[i] == "(":
        i += 1
        while toks[i] != ")":
            if name in ("Sequential", "Residual", "Concat"):
                child, i = build(toks, i)
                children.append(child)
            else:
                args.append(toks[i])
                i += 1
            if toks[i] == ",":
                i += 1
        i += 1
    floats = ("LeakyReLU", "Dropout", "LayerNorm", "BatchNorm1d", "BatchNorm2d")
    # Conv2d's pairs are "h:w" in the spec, tuples in PyTorch.
    ints = [tuple(int(v) for v in a.split(":")) if ":" in a else int(a) for a in args] \
        if name not in floats else []
    make = {
        "Sequential": lambda: nn.Sequential(*children),
        "Residual": lambda: Residual(children[0]),
        "Concat": lambda: Concat(*children),
        "Linear": lambda: nn.Linear(*ints),
        "Conv2d": lambda: nn.Conv2d(ints[0], ints[1], ints[2], stride=ints[3], padding=ints[4],
                                    dilation=ints[5], bias=bool(ints[6])),
        "MaxPool2d": lambda: nn.MaxPool2d(ints[0], ints[1], ints[2]),
        "AvgPool2d": lambda: nn.AvgPool2d(ints[0], ints[1], ints[2]),
        "Unflatten": lambda: nn.Unflatten(1, tuple(ints)),
        "Flatten": nn.Flatten,
        "Identity": nn.Identity,
        "GELU": nn.GELU,
        "LeakyReLU": lambda: nn.LeakyReLU(float(args[0])),
        "ReLU": nn.ReLU,
        "Tanh": nn.Tanh,
        "Sigmoid": nn.Sigmoid,
        "Softmax": lambda: nn.Softmax(dim=1),
        "Dropout": lambda: nn.Dropout(float(args[0])),
        "Embedding": lambda: nn.Embedding(int(args[0]), int(args[1])),
        "LayerNorm": lambda: nn.LayerNorm(int(args[0]), eps=float(args[1])),
        "BatchNorm1d": lambda: nn.BatchNorm1d(int(args[0]), eps=float(args[1]),
                                              momentum=float(args[2])),
        "BatchNorm2d": lambda: nn.BatchNorm2d(int(args[0]), eps=float(args[1]),
                                              momentum=float(args[2])),
    }[name]
    return make(), i


def rows(path):
    with open(path) as f:
        return [[float(v) for v in line.split()] for line in f if line.strip()]


def close(what, got, want, tol=1e-4):
    got = torch.as_tensor(got, dtype=torch.float32).flatten()
    want = torch.as_tensor(want, dtype=torch.float32).flatten()
    if got.shape != want.shape:
        return "%s: %d values from drover, %d from PyTorch" % (what, got.numel(), want.numel())
    scale = max(1.0, float(want.abs().max())) if want.numel() else 1.0
    diff = float((got - want).abs().max()) if want.numel() else 0.0
    print("%s: max diff %.3g (scale %.3g)" % (what, diff, scale))
    return None if diff <= tol * scale else "%s differs by %g" % (what, diff)


def check_case(d, case):
    path = "%s/%s.safetensors" % (d, case)
    spec = safetensors.safe_open(path, "pt").metadata()["drover.spec"]
    model, _ = build(tokens(spec))
    model.load_state_dict(safetensors.torch.load_file(path))
    model.train(case.endswith("_train"))
    ids = spec.startswith("Sequential(Embedding")
    x = torch.tensor(rows("%s/%s.x" % (d, case)), requires_grad=not ids)
    y = model(x.long() if ids else x)
    y.backward(torch.tensor(rows("%s/%s.dy" % (d, case))))
    errs = [close(case + " output", rows("%s/%s.y" % (d, case)), y.detach()),
            close(case + " input gradient", rows("%s/%s.dx" % (d, case)),
                  torch.zeros_like(x) if ids else x.grad)]
    after = safetensors.torch.load_file("%s/%s.after.safetensors" % (d, case))
    for name, b in model.named_buffers():
        errs.append(close("%s %s" % (case, name), after[name], b.float()))
    grads = rows("%s/%s.grads" % (d, case))
    params = list(model.named_parameters())
    if len(grads) != len(params):
        errs.append("%s: %d gradients from drover, %d parameters in PyTorch" %
                    (case, len(grads), len(params)))
    for g, (name, p) in zip(grads, params):
        errs.append(close("%s %s.grad" % (case, name), g, p.grad))
    return [e for e in errs if e]


def check_losses(d):
    errs = []
    for line in open(d + "/loss.txt"):
        name, delta, value = line.split()
        pred = torch.tensor(rows("%s/loss_%s.pred" % (d, name)), requires_grad=True)
        target = torch.tensor(rows("%s/loss_%s.target" % (d, name))).flatten()
        if name == "NLL":
            loss = F.nll_loss(pred, target.long())
        elif name == "L1":
            loss = F.l1_loss(pred, target.view_as(pred))
        else:
            loss = F.huber_loss(pred, target.view_as(pred), delta=float(delta))
        loss.backward()
        errs.append(close(name + " loss", [float(value)], [loss.item()]))
        errs.append(close(name + " gradient", rows("%s/loss_%s.grad" % (d, name)), pred.grad))
    return [e for e in errs if e]


def main():
    d = sys.argv[1]
    errs = check_losses(d) if sys.argv[2:] == ["--losses"] else \
        [e for case in sys.argv[2:] for e in check_case(d, case)]
    for e in errs:
        print("FAIL:", e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
