#!/usr/bin/python3
"""The same training as ./bench, in PyTorch: an outside reference for speed
and accuracy.

Same model (the workload's layers: LeNet as conv20-pool-conv50-pool-fc500-
relu-fc10, no activation after the convolutions; or the MLP), same initial
parameters (Xavier normal, or --init-params FILE in the suite's parameter
file format), same optimiser rules (Nesterov, SGD or Adam, L2 weight decay
on weights only), same data (the IDX files, pixels / 255) and, by default,
the same batch order as the harness (its SplitMix64 Fisher-Yates shuffle,
seeded from --order-seed, which defaults to --seed). Each epoch is appended
to --out as a row of the harness's epochs.csv columns, backend pytorch-cpu
(or pytorch-cuda).

Threads: --threads N calls torch.set_num_threads(N). PyTorch here calls the
system BLAS for its dense layers; an OpenBLAS with its own thread pool next
to PyTorch's OpenMP pool oversubscribes the cores (about twice as slow), so
OPENBLAS_NUM_THREADS=1 is set before torch is imported unless the
environment already sets it.

Needs python3 with torch and numpy (Debian: python3-torch). Nothing in the
C suite depends on it.
"""
import argparse
import contextlib
import math
import os
import re
import sys
import time

# Serve mode answers on a duplicate of stdout; stdout itself goes to stderr
# before anything is imported, so that nothing printed on the way can garble
# an answer (see serve()).
ANSWERS = None
if __name__ == "__main__" and "--serve" in sys.argv[1:]:
    ANSWERS = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)

# Before torch loads the system BLAS (see the module comment).
OPENBLAS_NUM_THREADS_PRESET = "OPENBLAS_NUM_THREADS" in os.environ
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as err:  # pragma: no cover - depends on the machine
    sys.exit(f"train.py: {err}; install python3-torch and python3-numpy "
             "(Debian) or run with the python3 that has them")

# (beside this script: the model, data and batch order both modes share)
from lenet_torch import (Net, cpu_autocast_bf16, cpu_autocast_to, epoch_order, evaluate,
                         forward_context, load_params, load_split, logits_of,
                         make_optimizer, save_params, set_math, xavier_init)

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
EPOCHS_HEADER = ("backend,workload,precision,threads,devices,replicas,ranks,batch_size,"
                 "optimizer,repeat,epoch,images,epoch_seconds,images_per_second,"
                 "gflops_per_second,train_loss,test_loss,test_accuracy,status,message")

# ---------------------------------------------------------------------------
# Serve mode: ./bench's pytorch-cpu and pytorch-cuda backends
# (backends/peer/pytorch.c) run this script as a child process and drive it
# over stdin/stdout, one command at a time. Each command is one text line,
# some followed by a binary payload (little-endian); each answer is one line
# starting with "ok" (some followed by a payload) or "error MESSAGE".
#
#   (start)                       -> ready<TAB>VERSION<TAB>DESCRIPTION
#   config OPTIONS                 -> the same: a new model and optimiser from
#                                     serve mode's options, same device
#   park                           -> (no answer) drops model and data until
#                                     the next config
#   params                 + P f32 -> ok                  (P: parameter count)
#   get                            -> ok            + P f32
#   data N M ROWS COLS + N*ROWS*COLS u8 images + N u8 labels (training set)
#                      + M*ROWS*COLS u8 images + M u8 labels (test set) -> ok
#   train BATCH STEPS  + BATCH*STEPS i32 indices -> ok + STEPS f32 losses
#   eval LIMIT                     -> ok COUNT LOSS_SUM CLASSES C00 C01 ... (confusion)
#   memory                         -> ok BYTES: this process's peak resident
#                                     set since its configuration (VmHWM,
#                                     reset at each config; 0: unknown)
#   quit (or end of input)         -> exits 0
#
# The answers go to a duplicate of the original stdout; stdout itself is
# pointed at stderr before torch is imported, so nothing printed can garble
# an answer.



def probe_line():
    """One line for ./bench's probe: the torch version, whether CPU autocast
    to bf16 works, and the GPUs it sees."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    name = torch.cuda.get_device_name(0) if count else ""
    bf16 = 1 if cpu_autocast_bf16() else 0
    fp16 = 1 if cpu_autocast_to("float16") else 0
    return (f"pytorch {torch.__version__} cpu-bf16 {bf16} cpu-fp16 {fp16} "
            f"cuda {count} {name}").rstrip()





def openmp_runtime():
    """The OpenMP runtime this process has mapped (the PyPI wheels bring
    their own copy of GNU libgomp; Debian's torch uses the system's)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "omp" in line.rsplit("/", 1)[-1]}
    except OSError:
        return "unknown"
    found = sorted(p for p in paths if re.search(r"/lib(gomp|iomp5|omp)[^/]*\.so", p))
    if not found:
        return "none mapped"
    kind = {"gomp": "GNU libgomp", "iomp5": "Intel libiomp5", "omp": "LLVM libomp"}
    names = []
    for p in found:
        lib = re.search(r"/lib(gomp|iomp5|omp)[^/]*$", p).group(1)
        own = "/torch/" in p or "site-packages" in p or "dist-packages" in p
        names.append(f"{'its own' if own else 'the system' + chr(39) + 's'} {kind[lib]}")
    return ", ".join(names)


def cpu_libraries():
    """One line for ./bench's probe: oneDNN's version, the BLAS the dense
    layers call, the OpenMP runtime."""
    config = torch.__config__.show()
    dnn = re.search(r"(?:MKL-DNN|oneDNN) v?([0-9][0-9.]*)", config)
    onednn = (f"oneDNN {dnn.group(1)}" if dnn else "oneDNN") \
        if torch.backends.mkldnn.is_available() else "no oneDNN"
    mkl = re.search(r"Math Kernel Library Version ([0-9][0-9.]*)", config)
    blas = blas_note()
    if mkl and "MKL" in blas:
        blas = blas.replace("MKL", f"MKL {mkl.group(1)}", 1)
    return f"{onednn}, {blas}, OpenMP: {openmp_runtime()}"


def blas_note():
    """Which BLAS the dense layers call: a PyTorch built with MKL (the PyPI
    wheels) brings its own, on which ./bench's OPENBLAS_CORETYPE has no
    effect; a distribution's calls the system BLAS (OpenBLAS)."""
    found = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    info = found.group(1) if found else "unknown"
    if info == "mkl" or torch.backends.mkl.is_available():
        return "BLAS: its own MKL (OPENBLAS_CORETYPE does not apply)"
    try:
        with open("/proc/self/maps") as f:
            mapped = sorted({line.split()[-1] for line in f if "libopenblas" in line})
    except OSError:
        mapped = []
    if mapped:
        return f"BLAS: the system's OpenBLAS ({mapped[0]})"
    return f"BLAS: the system's ({info})"


def describe(device, args):
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        where = (f" on {props.name}, CUDA {torch.version.cuda}, "
                 f"cuDNN {torch.backends.cudnn.version()}, "
                 f"cudnn.benchmark {'on' if torch.backends.cudnn.benchmark else 'off'}")
    else:
        onednn = "oneDNN" if torch.backends.mkldnn.is_available() else "no oneDNN"
        threads = torch.get_num_threads()
        where = (f", {threads} thread{'' if threads == 1 else 's'}, {onednn}, {blas_note()}, "
                 f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '')}")
    mode = getattr(args, "mode", "eager")
    mode = ("torch.compile (inductor; epoch 1 holds the compile)" if mode == "compile"
            else "eager")
    math_mode = ("autocast bf16 (fp32 master weights)" if args.precision == "bf16" else
                 "fp32, TF32 on" if args.precision == "tf32" else "fp32, TF32 off")
    return f"PyTorch {torch.__version__}{where}; {mode}, {math_mode}"


def reset_peak_memory():
    """Starts this process's peak resident set (VmHWM) afresh: True when it
    could (Linux: 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_memory():
    """This process's peak resident set in bytes: VmHWM, else getrusage's."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def compile_missing():
    """Why torch.compile cannot run here ("" when it can): it needs
    PyTorch 2.0 or later, and inductor builds C++ on the CPU with a C++
    compiler and Python's headers."""
    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile (2.0 and later)"
    import shutil
    import sysconfig
    cxx = os.environ.get("CXX", "")
    if not (cxx and shutil.which(cxx)) and not shutil.which("g++") and not shutil.which("clang++"):
        return "torch.compile on the CPU needs a C++ compiler (g++ or clang++; apt-get install g++)"
    headers = sysconfig.get_paths().get("include", "")
    if not os.path.exists(os.path.join(headers, "Python.h")):
        return (f"torch.compile on the CPU needs Python's headers ({headers}/Python.h; "
                "apt-get install python3-dev)")
    return ""


def compiled(net):
    """net's forward under torch.compile (inductor, its default mode); a
    PyTorch without it is refused with the reason."""
    missing = compile_missing()
    if missing:
        raise ValueError(missing)
    return torch.compile(net)


def read_exact(stream, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            raise EOFError(f"input ended after {got} of {n} bytes")
        got += k
    return buf


def serve(args):
    commands = sys.stdin.buffer
    answers = ANSWERS if ANSWERS is not None else os.fdopen(os.dup(1), "wb")

    def answer(line, payload=b""):
        answers.write(line.encode() + b"\n" + payload)
        answers.flush()

    if args.device == "cuda":
        if not torch.cuda.is_available() or args.device_index >= torch.cuda.device_count():
            sys.exit(f"train.py: PyTorch sees no CUDA device {args.device_index}")
        device = torch.device("cuda", args.device_index)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    def configure(a):
        nonlocal autocast, step_net
        torch.set_num_threads(a.threads)
        set_math(device, a.precision)
        autocast = forward_context(device, a.precision)
        net = Net(a.workload).to(device)
        # the training forward under torch.compile (compiled on the first
        # steps, inside the first epoch's time); evaluation stays eager on
        # the same parameters
        step_net = compiled(net) if a.mode == "compile" else net
        answer(f"ready\t{torch.__version__}\t{describe(device, a)}")
        return net, make_optimizer(net, a)

    autocast = contextlib.nullcontext
    step_net = None
    try:
        net, opt = configure(args)
    except ValueError as err:
        sys.exit(f"train.py: {err}")
    train_x = train_y = test_x = test_y = None
    peak_known = True  # a fresh process's peak is its configuration's
    while True:
        line = commands.readline()
        if not line:
            return 0
        words = line.decode("ascii", "replace").split()
        cmd, rest = (words[0], words[1:]) if words else ("", [])
        try:
            if cmd == "quit":
                return 0
            if cmd == "park":
                # idle until the next config: drop the model and the data
                # (and on a GPU their memory), no answer
                net = opt = step_net = train_x = train_y = test_x = test_y = None
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            if cmd == "config":
                # a new engine on the same device: the options of serve mode
                try:
                    a = parse_args(rest)
                except SystemExit:
                    raise ValueError("config: bad options " + " ".join(rest)) from None
                net = opt = train_x = train_y = test_x = test_y = None
                net, opt = configure(a)  # a ValueError is answered, parked stays
                # this configuration's peak, not the ones served before
                peak_known = reset_peak_memory()
                continue
            if cmd == "memory":
                answer(f"ok {peak_memory() if peak_known else 0}")
                continue
            if net is None:
                raise ValueError(f"'{cmd}' while parked (config first)")
            count = sum(p.numel() for _, p in net.named)
            classes = net.named[-1][1].shape[0]
            if cmd == "params":
                v = np.frombuffer(read_exact(commands, 4 * count), dtype="<f4")
                with torch.no_grad():
                    first = 0
                    for _, p in net.named:
                        part = v[first:first + p.numel()].reshape(p.shape)
                        p.copy_(torch.from_numpy(part.astype(np.float32)))
                        first += p.numel()
                answer("ok")
            elif cmd == "get":
                flat = torch.cat([p.detach().reshape(-1) for _, p in net.named])
                answer("ok", flat.cpu().numpy().astype("<f4").tobytes())
            elif cmd == "data":
                n, m, rows, cols = (int(w) for w in rest)
                # the whole payload first, so that an error leaves the
                # next command where it should be
                raw = [(k, read_exact(commands, k * rows * cols), read_exact(commands, k))
                       for k in (n, m)]
                if (rows, cols) != (28, 28):
                    raise ValueError(f"images are {rows}x{cols}, the workload takes 28x28")
                sets = []
                for k, image_bytes, label_bytes in raw:
                    images = np.frombuffer(image_bytes, dtype=np.uint8)
                    labels = np.frombuffer(label_bytes, dtype=np.uint8)
                    if k and labels.max() >= classes:
                        raise ValueError(f"a label is {labels.max()}, expected 0..{classes - 1}")
                    x = torch.from_numpy(images.astype(np.float32) / np.float32(255.0))
                    sets += [x.reshape(k, 1, rows, cols).to(device),
                             torch.from_numpy(labels.astype(np.int64)).to(device)]
                train_x, train_y, test_x, test_y = sets
                answer("ok")
            elif cmd == "train":
                batch, steps = int(rest[0]), int(rest[1])
                raw = read_exact(commands, 4 * batch * steps)
                if train_x is None:
                    raise ValueError("train before data")
                order = np.frombuffer(raw, dtype="<i4").astype(np.int64)
                if order.size and (order.min() < 0 or order.max() >= len(train_y)):
                    raise ValueError(f"a batch index is outside 0..{len(train_y) - 1}")
                order = torch.from_numpy(order).to(device)
                losses = torch.empty(steps, device=device)
                for s in range(steps):
                    idx = order[s * batch:(s + 1) * batch]
                    opt.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(logits_of(step_net, train_x[idx], autocast),
                                           train_y[idx])
                    loss.backward()
                    opt.step()
                    losses[s] = loss.detach()
                answer("ok", losses.cpu().numpy().astype("<f4").tobytes())
            elif cmd == "eval":
                if test_x is None:
                    raise ValueError("eval before data")
                limit = int(rest[0])
                n = len(test_y) if limit <= 0 else min(limit, len(test_y))
                confusion = torch.zeros(classes * classes, dtype=torch.int64, device=device)
                loss_sum = 0.0
                net.eval()
                with torch.no_grad():
                    for first in range(0, n, 1000):
                        logits = logits_of(net, test_x[first:min(first + 1000, n)], autocast)
                        target = test_y[first:min(first + 1000, n)]
                        loss_sum += F.cross_entropy(logits, target, reduction="sum").item()
                        cell = target * classes + logits.argmax(1)
                        confusion += torch.bincount(cell, minlength=classes * classes)
                net.train()
                counts = " ".join(str(c) for c in confusion.cpu().tolist())
                answer(f"ok {n} {loss_sum!r} {classes} {counts}")
            else:
                raise ValueError(f"unknown command '{cmd}'")
        except EOFError:
            return 0
        except (ValueError, IndexError, RuntimeError) as err:
            answer("error " + " ".join(str(err).split())[:400])


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train the suite's workload in PyTorch and append epochs.csv rows.")
    p.add_argument("--workload", default="lenet", choices=["lenet", "mlp"])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--limit", type=int, default=0, help="first N training images only")
    p.add_argument("--test-limit", type=int, default=0, help="first N test images only")
    p.add_argument("--data", default=DEFAULT_DATA, help="directory with the IDX files")
    p.add_argument("--optimizer", default="nesterov", choices=["nesterov", "sgd", "adam"])
    p.add_argument("--lr", type=float, default=None, help="default 0.01; adam 0.001")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--seed", type=int, default=123, help="initial parameters (default 123)")
    p.add_argument("--order-seed", type=int, default=None,
                   help="seed of the harness's batch order (default: --seed)")
    p.add_argument("--no-shuffle", action="store_true", help="train in file order")
    p.add_argument("--init-params", help="start from this parameter file")
    p.add_argument("--save-params", help="write the trained parameters here")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--out", help="epochs.csv to append rows to (header written if new)")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines on stderr")
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"],
                   help="tf32: TF32 matmuls and convolutions (GPU); bf16: CPU autocast")
    p.add_argument("--device-index", type=int, default=0, help="with --device cuda")
    p.add_argument("--mode", default="eager", choices=["eager", "compile"],
                   help="compile: the training steps under torch.compile (its first "
                        "steps compile it)")
    p.add_argument("--serve", action="store_true",
                   help="answer ./bench's commands on stdin/stdout (see serve())")
    p.add_argument("--probe", action="store_true",
                   help="print the torch version and the GPU count, then exit")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.limit < 0 or args.test_limit < 0:
        p.error("--limit and --test-limit must be 0 (all) or more")
    if args.lr is None:
        args.lr = 0.001 if args.optimizer == "adam" else 0.01
    if not args.lr > 0:
        p.error("--lr must be above 0")
    if args.order_seed is None:
        args.order_seed = args.seed
    if args.seed < 0 or args.order_seed < 0:
        p.error("--seed and --order-seed must not be negative")
    return args


def open_out(path):
    """The CSV to append to, with the header when it is new or empty."""
    if path is None:
        return None
    fresh = not os.path.exists(path) or os.path.getsize(path) == 0
    if not fresh:
        with open(path) as f:
            header = f.readline().strip()
        if header != EPOCHS_HEADER:
            raise ValueError(f"{path}: its header is not epochs.csv's; refusing to append")
    f = open(path, "a")
    if fresh:
        f.write(EPOCHS_HEADER + "\n")
        f.flush()
    return f


def main(argv):
    args = parse_args(argv)
    if args.probe:
        print(probe_line())
        print(f"libraries {cpu_libraries()}")
        missing = compile_missing()
        print("modes eager" + (f"; no compile: {missing}" if missing else " compile"))
        return 0
    if args.serve:
        return serve(args)
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("train.py: --device cuda but PyTorch sees no CUDA device")
    device = torch.device(args.device)
    set_math(device, args.precision)
    try:
        autocast = forward_context(device, args.precision)
    except ValueError as err:
        sys.exit(f"train.py: {err}")
    backend = "pytorch-cuda" if args.device == "cuda" else "pytorch-cpu"

    try:
        train_images, train_labels = load_split(args.data, "train")
        test_images, test_labels = load_split(args.data, "t10k")
    except (OSError, ValueError) as err:
        sys.exit(f"train.py: {err}")
    if args.limit:
        if args.limit > len(train_labels):
            sys.exit(f"train.py: --limit {args.limit} but only {len(train_labels)} images")
        train_images, train_labels = train_images[:args.limit], train_labels[:args.limit]
    if args.test_limit:
        test_images, test_labels = test_images[:args.test_limit], test_labels[:args.test_limit]
    n = len(train_labels)
    if args.batch_size > n:
        sys.exit(f"train.py: --batch-size {args.batch_size} is more than the {n} images")

    def as_tensors(images, labels):
        x = torch.from_numpy(images.astype(np.float32) / np.float32(255.0))
        return (x.reshape(-1, 1, 28, 28).to(device),
                torch.from_numpy(labels.astype(np.int64)).to(device))

    train_x, train_y = as_tensors(train_images, train_labels)
    test_x, test_y = as_tensors(test_images, test_labels)

    net = Net(args.workload)
    try:
        if args.init_params:
            load_params(args.init_params, net)
        else:
            xavier_init(net, args.seed)
    except (OSError, ValueError) as err:
        sys.exit(f"train.py: {err}")
    net.to(device)
    opt = make_optimizer(net, args)
    try:
        out = open_out(args.out)
    except (OSError, ValueError) as err:
        sys.exit(f"train.py: {err}")
    if not OPENBLAS_NUM_THREADS_PRESET and not args.quiet:
        print("train.py: OPENBLAS_NUM_THREADS=1 (PyTorch's own threads do the work)",
              file=sys.stderr)

    batch = args.batch_size
    devices = 1 if args.device == "cuda" else 0
    for epoch in range(args.epochs):
        order = torch.from_numpy(epoch_order(args.order_seed, epoch, n, not args.no_shuffle))
        order = order.to(device)
        steps = [(s, batch) for s in range(0, n - batch + 1, batch)]
        if n % batch:
            steps.append((n - n % batch, n % batch))
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        for first, size in steps:
            idx = order[first:first + size]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(logits_of(net, train_x[idx], autocast), train_y[idx])
            loss.backward()
            opt.step()
            # the harness weights a short last batch by its size
            loss_sum += loss.detach() * (size / batch)
        train_loss = loss_sum.item()  # waits for the device
        seconds = time.perf_counter() - start
        test_loss, accuracy = evaluate(net, test_x, test_y, batch, autocast)
        status = "ok" if math.isfinite(train_loss) else "diverged"
        train_loss /= n / batch
        ips = n / seconds
        row = [backend, args.workload, args.precision, args.threads, devices, 1, 1, batch,
               args.optimizer, 1, epoch + 1, n, f"{seconds:.6f}", f"{ips:.1f}",
               f"{ips * net.train_flops * 1e-9:.3f}", f"{train_loss:.6f}",
               f"{test_loss:.6f}", f"{accuracy:.6f}", status, ""]
        if out:
            out.write(",".join(str(v) for v in row) + "\n")
            out.flush()
        if not args.quiet:
            print(f"{backend:<12} epoch {epoch + 1}/{args.epochs}  {n} images  {seconds:.3f} s"
                  f"  {ips:.0f} img/s  loss {train_loss:.4f}  test acc {accuracy:.4f}",
                  file=sys.stderr)
        if status != "ok":
            break
    if args.save_params:
        save_params(args.save_params, net)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
