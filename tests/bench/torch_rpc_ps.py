# torch_rpc_ps.py - the reference for drover's cluster benchmark:
# parameter-server training with torch.distributed.rpc (TensorPipe over
# loopback), 1 ps + 2 trainers, each its own process with one thread; the
# MLP 784-256-256-10, batch 128, SGD with momentum, synthetic MNIST-shaped
# data. Trainers pull the parameters, compute a gradient, and push it; the
# ps applies each push on arrival (async), as drover's ps does.
# Usage: /usr/bin/python3 torch_rpc_ps.py SECONDS  ->  "torch_rpc_samples_per_sec N"
import os
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"
import socket, sys, time
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

B, WORKERS = 128, 2


def make_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))


class PS:
    model = None
    opt = None


def ps_get():
    return [p.detach() for p in PS.model.parameters()]


def ps_push(grads):
    for p, g in zip(PS.model.parameters(), grads):
        p.grad = g
    PS.opt.step()
    return True


def trainer(rank, seconds, out):
    torch.manual_seed(rank)
    x_all = torch.rand(30000, 784)
    y_all = ((x_all - 0.5) @ torch.randn(10, 784).t()).argmax(1)
    model = make_model()
    loss_fn = torch.nn.CrossEntropyLoss()
    steps, t0, i = 0, 0.0, 0
    while True:
        if i + B > 30000:
            i = 0
        x, y = x_all[i:i + B], y_all[i:i + B]
        i += B
        with torch.no_grad():
            for p, v in zip(model.parameters(), rpc.rpc_sync("ps", ps_get)):
                p.copy_(v)
        model.zero_grad()
        loss_fn(model(x), y).backward()
        rpc.rpc_sync("ps", ps_push, args=([p.grad for p in model.parameters()],))
        steps += 1
        if steps == 10:
            t0 = time.perf_counter()
        if steps > 10 and time.perf_counter() - t0 >= seconds:
            out.put((steps - 10) * B / (time.perf_counter() - t0))
            return


def run(rank, port, seconds, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=120)
    name = "ps" if rank == 0 else "trainer%d" % rank
    rpc.init_rpc(name, rank=rank, world_size=WORKERS + 1, rpc_backend_options=opts)
    if rank == 0:
        PS.model = make_model()
        PS.opt = torch.optim.SGD(PS.model.parameters(), lr=0.01, momentum=0.9)
    else:
        trainer(rank, seconds, out)
    rpc.shutdown()


if __name__ == "__main__":
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, port, seconds, out)) for r in range(WORKERS + 1)]
    for p in procs:
        p.start()
    rates = [out.get(timeout=300) for _ in range(WORKERS)]
    for p in procs:
        p.join(timeout=60)
        if p.is_alive():
            p.kill()
    print("torch_rpc_samples_per_sec %.0f" % sum(rates))
