#!/usr/bin/env python3
"""A stand-in for backends/peer/train.py, for tests/test_peers.sh (selected
with LENET_BENCH_PYTORCH_SCRIPT). It answers --probe as train.py does,
without torch (its version PEER_STANDIN_VERSION, default 0.0-standin); in
--serve mode it behaves as PEER_STANDIN says:
  exit     says it is ready, reads the first command, writes a traceback
           line to stderr and exits with status 3
  garbage  writes a line that is not the protocol instead of "ready", then
           waits (./bench must kill it)
  hang     says it is ready, reads the first command and never answers
  serve    speaks the whole protocol without training anything: every loss
           is PEER_STANDIN_LOSS (default 2.3), every test image is called
           class 0, and it holds PEER_STANDIN_BYTES_PER_IMAGE (default 0)
           bytes per image of its batch size while configured, so that its
           peak resident memory follows the batch size. Its description
           says which OpenBLAS core and OpenMP waiting it was started with.
"""
import os
import sys
import time

PARAMS = {"lenet": 431080, "mlp": 79510}

if "--probe" in sys.argv:
    print(f"pytorch {os.environ.get('PEER_STANDIN_VERSION', '0.0-standin')} cuda 0")
    sys.exit(0)
mode = os.environ.get("PEER_STANDIN", "exit")
if mode == "garbage":
    print("hello, this is not the protocol", flush=True)
    time.sleep(3600)


def option(args, name, default):
    return args[args.index(name) + 1] if name in args else default


def environment():
    names = ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    return " ".join(f"{n}={os.environ.get(n, '(unset)')}" for n in names)


def ready(args):
    """Answers ready for the options args; returns (param count, memory held)."""
    batch = int(option(args, "--batch-size", "64"))
    held = b"\x01" * (batch * int(os.environ.get("PEER_STANDIN_BYTES_PER_IMAGE", "0")))
    print(f"ready\tstandin\ta stand-in started with {environment()}", flush=True)
    return PARAMS[option(args, "--workload", "lenet")], held


def read_exact(n):
    data = sys.stdin.buffer.read(n)
    if len(data) != n:
        sys.exit(0)
    return data


def serve():
    count, held = ready(sys.argv[1:])
    params = b"\0" * (4 * count)
    loss = float(os.environ.get("PEER_STANDIN_LOSS", "2.3"))
    test = 0
    out = sys.stdout.buffer
    while True:
        words = sys.stdin.buffer.readline().decode().split()
        if not words or words[0] == "quit":
            return
        cmd, rest = words[0], words[1:]
        if cmd == "park":
            held = None
        elif cmd == "config":
            held = None
            count, held = ready(rest)
            # its peak from here on, as train.py does
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        elif cmd == "memory":
            with open("/proc/self/status") as f:
                kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
            print(f"ok {kib * 1024}", flush=True)
        elif cmd == "params":
            params = read_exact(4 * count)
            print("ok", flush=True)
        elif cmd == "get":
            out.write(b"ok\n" + params)
            out.flush()
        elif cmd == "data":
            n, m, rows, cols = (int(w) for w in rest)
            read_exact((n + m) * (rows * cols + 1))
            test = m
            print("ok", flush=True)
        elif cmd == "train":
            batch, steps = int(rest[0]), int(rest[1])
            read_exact(4 * batch * steps)
            out.write(b"ok\n" + __import__("struct").pack(f"<{steps}f", *[loss] * steps))
            out.flush()
        elif cmd == "eval":
            n = test if int(rest[0]) <= 0 else min(int(rest[0]), test)
            counts = [0] * 100
            counts[0] = n
            print(f"ok {n} {2.3 * n!r} 10 {' '.join(map(str, counts))}", flush=True)
        else:
            print(f"error unknown command '{cmd}'", flush=True)


if mode == "serve":
    serve()
    sys.exit(0)
print("ready\tstandin\ta stand-in that fails on purpose", flush=True)
sys.stdin.buffer.readline()
if mode == "exit":
    print("RuntimeError: the stand-in fails on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(3600)
