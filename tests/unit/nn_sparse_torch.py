"""nn_sparse_torch.py - prints the PyTorch values test_nn_sparse.c pastes.

  python tests/unit/nn_sparse_torch.py > /tmp/ref.h   (build/venv: Debian's torch)

The weights, batches and output gradients are the same closed formulas as
in test_nn_sparse.c (W, C below), so nothing but the results travels.
Cases: nn.EmbeddingBag sum with per_sample_weights and mean (an empty bag
included): outputs and weight gradients; nn.Embedding(sparse=True) under
torch.optim.SparseAdam and torch.optim.Adagrad over three steps: the
weights after them.
"""
import torch

torch.set_default_dtype(torch.float32)
N, D = 10, 3


def W():
    return torch.tensor([[0.1 * ((i * 13 + j * 7) % 17 - 8) for j in range(D)] for i in range(N)])


def C(rows, s):
    return torch.tensor([[0.1 * ((i * 5 + j * 3 + s) % 7 - 3) for j in range(D)] for i in range(rows)])


def arr(name, t):
    vals = ", ".join("%.9g" % v for v in t.flatten().tolist())
    print("static const float %s[%d] = {%s};" % (name, t.numel(), vals))


IDS = torch.tensor([1, 3, 3, 7, 9, 2])
OFFS = torch.tensor([0, 2, 5, 5])  # bags {1,3} {3,7,9} {} {2}
PSW = torch.tensor([0.5, -1.0, 2.0, 1.5, 0.25, 3.0])

for mode, psw in (("sum", PSW), ("mean", None)):
    bag = torch.nn.EmbeddingBag(N, D, mode=mode)
    with torch.no_grad():
        bag.weight.copy_(W())
    y = bag(IDS, OFFS, per_sample_weights=psw)
    (y * C(4, 0)).sum().backward()
    arr("torch_bag_%s_y" % mode, y.detach())
    arr("torch_bag_%s_dw" % mode, bag.weight.grad)

STEPS = [[1, 3, 3], [3, 1, 1, 3], [1, 3]]  # the same rows every step (SparseAdam's t is global)
STEPS_ANY = [[1, 3, 3], [3, 5], [0, 1, 9, 9]]
for name, make, steps in (
        ("adam", lambda p: torch.optim.SparseAdam(p, lr=0.1), STEPS),
        ("adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1, initial_accumulator_value=0.1), STEPS_ANY)):
    emb = torch.nn.Embedding(N, D, sparse=True)
    with torch.no_grad():
        emb.weight.copy_(W())
    opt = make(list(emb.parameters()))
    for s, ids in enumerate(steps):
        opt.zero_grad()
        (emb(torch.tensor(ids)) * C(len(ids), s + 1)).sum().backward()
        opt.step()
    arr("torch_%s_w" % name, emb.weight.detach())
