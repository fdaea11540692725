# torch_ctr.py - the PyTorch reference for the wide & deep benchmark
# (tests/bench/ctr.sh): the same model, data, batch and optimizer as
# tests/bench/ctr.lua, one thread, timed the same way (20 warm-up steps,
# then the best of two windows).
#
#   python3 torch_ctr.py FILE.tsv BUCKETS SECONDS
#
# FILE is Criteo-format (label, 13 integer columns, 26 categorical columns,
# tab-separated, any field may be empty). Categorical fields are hashed with
# drover's documented hash (docs/data.md): fmix64(fnv1a64(column number as 4
# little-endian bytes, 1-based, then the field's bytes)) mod BUCKETS; an empty
# numeric field is 0. Hashing happens before timing, as drover's reader does it
# before its fit.
#
# Model (both sides): wide = EmbeddingBag(BUCKETS, 1, sum over the 26 ids) +
# bias; deep = [13 numeric, EmbeddingBag(BUCKETS, 16) per field] -> Linear(429,
# 64) -> ReLU -> Linear(64, 1); logit = wide + deep; BCEWithLogits; batch 256;
# Adam lr 1e-3 on dense parameters and SparseAdam (the lazy Adam drover's
# tables use) on the embeddings.
import os
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import struct
import sys
import time

import torch

M64 = (1 << 64) - 1


def fmix64(k):
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & M64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & M64
    k ^= k >> 33
    return k


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & M64
    return h


def hashed(column, field, buckets):
    return fmix64(fnv1a64(struct.pack("<I", column) + field)) % buckets


def read(path, buckets):
    labels, dense, ids = [], [], []
    with open(path, "rb") as f:
        for line in f:
            cols = line.rstrip(b"\n").split(b"\t")
            labels.append(float(cols[0]))
            dense.append([float(c) if c else 0.0 for c in cols[1:14]])
            ids.append([hashed(j + 1, cols[j], buckets) for j in range(14, 40)])
    return (torch.tensor(labels), torch.tensor(dense, dtype=torch.float32),
            torch.tensor(ids, dtype=torch.int64))


class WideDeep(torch.nn.Module):
    def __init__(self, buckets, fields=26, dim=16, dense=13, hidden=64):
        super().__init__()
        self.fields, self.dim = fields, dim
        self.wide = torch.nn.EmbeddingBag(buckets, 1, mode="sum", sparse=True)
        self.bias = torch.nn.Parameter(torch.zeros(1))
        self.emb = torch.nn.EmbeddingBag(buckets, dim, mode="sum", sparse=True)
        torch.nn.init.normal_(self.wide.weight, std=0.01)
        torch.nn.init.normal_(self.emb.weight, std=0.01)
        self.l1 = torch.nn.Linear(dense + fields * dim, hidden)
        self.l2 = torch.nn.Linear(hidden, 1)

    def forward(self, x, ids):
        n = ids.shape[0]
        flat = ids.reshape(-1)
        wide = self.wide(ids) + self.bias  # ids [N, F]: one bag per row
        per_field = self.emb(flat, torch.arange(n * self.fields))  # a bag per id
        deep = torch.cat([x, per_field.reshape(n, self.fields * self.dim)], 1)
        return (wide + self.l2(torch.relu(self.l1(deep)))).squeeze(1)


def main():
    path, buckets, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    torch.set_num_threads(1)
    torch.manual_seed(1)
    y_all, x_all, ids_all = read(path, buckets)
    n, B = y_all.shape[0], 256
    model = WideDeep(buckets)
    sparse = [model.wide.weight, model.emb.weight]
    dense = [p for p in model.parameters() if all(p is not s for s in sparse)]
    opts = [torch.optim.SparseAdam(sparse, lr=1e-3), torch.optim.Adam(dense, lr=1e-3)]
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def window(sec):
        steps, t0, i = 0, 0.0, 0
        perm = torch.randperm(n)
        while True:
            if i + B > n:
                perm, i = torch.randperm(n), 0
            idx = perm[i:i + B]
            i += B
            for o in opts:
                o.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_all[idx], ids_all[idx]), y_all[idx])
            loss.backward()
            for o in opts:
                o.step()
            steps += 1
            if steps == 20:
                t0 = time.perf_counter()
            if steps > 20 and time.perf_counter() - t0 >= sec:
                return (steps - 20) * B / (time.perf_counter() - t0)

    rate = max(window(seconds / 2), window(seconds / 2))
    print("torch_samples_per_sec %.0f" % rate)


if __name__ == "__main__":
    main()
