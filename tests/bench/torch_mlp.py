# torch_mlp.py - the reference for bench_mlp.c: the same MLP 784-256-256-10,
# batch 128, SGD with momentum, float32, one thread, synthetic MNIST-shaped
# data, timed the same way (20 warm-up steps, then best of two windows).
# Run with Debian's /usr/bin/python3 (python3-torch).
import os
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import sys, time
import torch

torch.set_num_threads(1)
torch.manual_seed(1)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
B = 128
x_all = torch.rand(60000, 784)
teacher = torch.randn(10, 784)
y_all = ((x_all - 0.5) @ teacher.t()).argmax(1)

model = torch.nn.Sequential(
    torch.nn.Linear(784, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 256), torch.nn.ReLU(),
    torch.nn.Linear(256, 10))
loss_fn = torch.nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def window(sec):
    steps, t0, i = 0, 0.0, 0
    perm = torch.randperm(60000)
    while True:
        if i + B > 60000:
            perm, i = torch.randperm(60000), 0
        idx = perm[i:i + B]
        i += B
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        steps += 1
        if steps == 20:
            t0 = time.perf_counter()
        if steps > 20 and time.perf_counter() - t0 >= sec:
            return (steps - 20) * B / (time.perf_counter() - t0)


rate = max(window(seconds / 2), window(seconds / 2))
print("torch_samples_per_sec %.0f" % rate)
