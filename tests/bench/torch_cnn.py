# torch_cnn.py - the reference for bench_cnn.c: the same CNN (conv 5x5x32,
# ReLU, max pool 2, conv 5x5x64, ReLU, max pool 2, linear 1024 -> 10),
# batch 64, SGD with momentum, float32, one thread (oneDNN convolutions),
# synthetic MNIST-shaped data, timed the same way (10 warm-up steps, then
# best of two windows), in wall-clock and in CPU time of the process (on a
# shared machine the CPU-time figure is the one time-slicing does not
# move). Run with Debian's python3-torch.
import os
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import sys, time
import torch

torch.set_num_threads(1)
torch.manual_seed(1)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
B = 64
x_all = torch.rand(60000, 784)
teacher = torch.randn(10, 784)
y_all = ((x_all - 0.5) @ teacher.t()).argmax(1)

model = torch.nn.Sequential(
    torch.nn.Unflatten(1, (1, 28, 28)),
    torch.nn.Conv2d(1, 32, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Flatten(), torch.nn.Linear(1024, 10))
loss_fn = torch.nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def window(sec):
    steps, t0, c0, i = 0, 0.0, 0.0, 0
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
        if steps == 10:
            t0, c0 = time.perf_counter(), time.process_time()
        if steps > 10 and time.perf_counter() - t0 >= sec:
            n = (steps - 10) * B
            return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


w1, w2 = window(seconds / 2), window(seconds / 2)
print("torch_samples_per_sec %.0f" % max(w1[0], w2[0]))
print("torch_samples_per_cpu_sec %.0f" % max(w1[1], w2[1]))
