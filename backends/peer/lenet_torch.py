"""What backends/peer/train.py's two modes (training on its own, serving
./bench's peer backends) share: the suite's workloads as PyTorch modules,
their initial parameters, the parameter files, the IDX data, the harness's
batch order, the optimisers, evaluation and the precisions' math. Imported
by train.py once it has set the environment torch starts in."""
import contextlib
import gzip
import math
import os
import struct
import warnings

import numpy as np

import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------
# Workloads: the layer lists of workloads/workload.c


def layers_of(workload):
    """[(kind, name, kernel, units)] as in workloads/workload.c."""
    if workload == "lenet":
        return [("conv", "conv1", 5, 20), ("pool", "pool1", 2, 0),
                ("conv", "conv2", 5, 50), ("pool", "pool2", 2, 0),
                ("dense", "fc1", 0, 500), ("relu", "relu1", 0, 0),
                ("dense", "fc2", 0, 10)]
    if workload == "mlp":
        return [("dense", "fc1", 0, 100), ("relu", "relu1", 0, 0),
                ("dense", "fc2", 0, 10)]
    raise ValueError(f"unknown workload '{workload}'; choose lenet or mlp")


class Net(torch.nn.Module):
    """The workload's layers in order; params() lists (name, tensor) in the
    flat parameter order of the suite (each layer's weight, then bias)."""

    def __init__(self, workload):
        super().__init__()
        self.steps = []
        self.named = []
        c, h, w = 1, 28, 28
        self.train_flops = 0.0
        first = True
        for kind, name, kernel, units in layers_of(workload):
            if kind == "conv":
                mod = torch.nn.Conv2d(c, units, kernel)
                fwd = 2.0 * units * (h - kernel + 1) * (w - kernel + 1) * c * kernel * kernel
                c, h, w = units, h - kernel + 1, w - kernel + 1
            elif kind == "pool":
                mod = torch.nn.MaxPool2d(kernel, kernel)
                fwd = 0.0
                h, w = (h - kernel) // kernel + 1, (w - kernel) // kernel + 1
            elif kind == "dense":
                mod = torch.nn.Linear(c * h * w, units)
                fwd = 2.0 * units * c * h * w
                c, h, w = units, 1, 1
            else:
                mod = torch.nn.ReLU()
                fwd = 0.0
            if kind in ("conv", "dense"):
                # backward to weights always, to data except for the first layer
                self.train_flops += fwd * (2 if first else 3)
                first = False
                self.named += [(name + ".weight", mod.weight), (name + ".bias", mod.bias)]
            self.add_module(name, mod)
            self.steps.append((kind, mod))

    def forward(self, x):
        for kind, mod in self.steps:
            if kind == "dense" and x.dim() > 2:
                x = torch.flatten(x, 1)
            x = mod(x)
        return x


def xavier_init(net, seed):
    """Xavier normal (variance 2 / (fan_in + fan_out), fans counting the
    kernel area for convolutions), biases zero: the harness's rule, drawn
    from torch's generator, so not the harness's floats."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in net.named:
            if name.endswith(".bias"):
                p.zero_()
            else:
                fan_out = p.shape[0] * (p[0, 0].numel() if p.dim() > 2 else 1)
                fan_in = p[0].numel()
                std = math.sqrt(2.0 / (fan_in + fan_out))
                p.copy_(torch.randn(p.shape, generator=gen) * std)


# ---------------------------------------------------------------------------
# Parameter files (harness/paramfile.h): "LBPARAMS", version 1, tensors of
# (name, dims, float32 values), all little-endian.


def load_params(path, net):
    with open(path, "rb") as f:
        data = f.read()
    where = path

    def need(pos, n):
        if pos + n > len(data):
            raise ValueError(f"{where}: truncated at byte {pos}")

    need(0, 16)
    if data[:8] != b"LBPARAMS":
        raise ValueError(f"{where}: not a parameter file (bad magic)")
    version, count = struct.unpack_from("<II", data, 8)
    if version != 1:
        raise ValueError(f"{where}: version {version}, expected 1")
    if count != len(net.named):
        raise ValueError(f"{where}: {count} tensors, this workload has {len(net.named)} "
                         "(saved for a different workload?)")
    pos = 16
    values = []
    for name, p in net.named:
        need(pos, 4)
        (length,) = struct.unpack_from("<I", data, pos)
        pos += 4
        need(pos, length)
        got = data[pos:pos + length].decode("ascii", "replace")
        pos += length
        need(pos, 4)
        (ndims,) = struct.unpack_from("<I", data, pos)
        pos += 4
        need(pos, 4 * ndims)
        dims = struct.unpack_from(f"<{ndims}I", data, pos)
        pos += 4 * ndims
        if got != name or tuple(dims) != tuple(p.shape):
            raise ValueError(f"{where}: tensor {got} {list(dims)}, expected {name} "
                             f"{list(p.shape)} (saved for a different workload?)")
        n = int(np.prod(dims))
        need(pos, 4 * n)
        v = np.frombuffer(data, dtype="<f4", count=n, offset=pos)
        pos += 4 * n
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{where}: tensor {name} holds NaN or Inf")
        values.append(v.reshape(dims))
    if pos != len(data):
        raise ValueError(f"{where}: {len(data) - pos} bytes after the last tensor")
    with torch.no_grad():
        for (name, p), v in zip(net.named, values):
            p.copy_(torch.from_numpy(v.astype(np.float32)))


def save_params(path, net):
    out = [b"LBPARAMS", struct.pack("<II", 1, len(net.named))]
    for name, p in net.named:
        v = p.detach().cpu().numpy().astype("<f4")
        out += [struct.pack("<I", len(name)), name.encode("ascii"),
                struct.pack("<I", v.ndim), struct.pack(f"<{v.ndim}I", *v.shape), v.tobytes()]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(b"".join(out))
    os.replace(tmp, path)


# ---------------------------------------------------------------------------
# Data: the IDX files, plain or gzip (recognised by their first two bytes)


def read_idx(path, magic):
    for candidate in (path, path + ".gz"):
        if os.path.exists(candidate):
            break
    else:
        raise FileNotFoundError(f"{path}(.gz): no such file")
    with open(candidate, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    (got,) = struct.unpack_from(">I", raw, 0)
    if got != magic:
        raise ValueError(f"{candidate}: magic {got:#010x}, expected {magic:#010x}")
    ndims = magic & 0xFF
    dims = struct.unpack_from(f">{ndims}I", raw, 4)
    start = 4 + 4 * ndims
    count = int(np.prod(dims))
    if len(raw) - start != count:
        raise ValueError(f"{candidate}: {len(raw) - start} bytes of data, header says {count}")
    return np.frombuffer(raw, dtype=np.uint8, offset=start).reshape(dims)


def load_split(data_dir, split):
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte"), 0x803)
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte"), 0x801)
    if len(images) != len(labels):
        raise ValueError(f"{data_dir}: {len(images)} {split} images but {len(labels)} labels")
    if images.shape[1:] != (28, 28):
        raise ValueError(f"{data_dir}: {split} images are {images.shape[1:]}, expected 28x28")
    if labels.size and labels.max() >= 10:
        raise ValueError(f"{data_dir}: a {split} label is {labels.max()}, expected 0..9")
    return images, labels


# ---------------------------------------------------------------------------
# Batch order: harness/run/init.c's epoch_order, SplitMix64 and Fisher-Yates

MASK = (1 << 64) - 1


def epoch_order(seed, epoch, n, shuffle=True):
    order = np.arange(n, dtype=np.int64)
    if not shuffle or n < 2:
        return order
    state = (seed ^ ((0xD1B54A32D192ED03 * (epoch + 1)) & MASK)) & MASK
    # SplitMix64 draws k = 1..n-1 depend on the state only through
    # state + k * golden, so all of them are computed at once
    with np.errstate(over="ignore"):
        k = np.arange(1, n, dtype=np.uint64)
        z = np.uint64(state) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    i = np.arange(n - 1, 0, -1, dtype=np.uint64)
    js = (z % (i + np.uint64(1))).astype(np.int64)
    for i_, j in zip(range(n - 1, 0, -1), js.tolist()):
        order[i_], order[j] = order[j], order[i_]
    return order


# ---------------------------------------------------------------------------
# Optimisers and evaluation


def make_optimizer(net, args):
    weights = [p for name, p in net.named if name.endswith(".weight")]
    biases = [p for name, p in net.named if name.endswith(".bias")]
    groups = [{"params": weights, "weight_decay": args.weight_decay},
              {"params": biases, "weight_decay": 0.0}]
    if args.optimizer == "adam":
        return torch.optim.Adam(groups, lr=args.lr, betas=(args.beta1, args.beta2),
                                eps=args.eps)
    if args.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=args.lr)
    return torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, nesterov=True)


def evaluate(net, x, y, batch, autocast=contextlib.nullcontext):
    net.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for first in range(0, len(y), batch):
            logits = logits_of(net, x[first:first + batch], autocast)
            target = y[first:first + batch]
            loss_sum += F.cross_entropy(logits, target, reduction="sum").item()
            correct += (logits.argmax(1) == target).sum().item()
    net.train()
    n = max(len(y), 1)
    return loss_sum / n, correct / n


# ---------------------------------------------------------------------------
# The precisions' math

def cpu_autocast_bf16():
    """Whether this PyTorch runs CPU autocast to bfloat16 (1.10 on): the
    bf16 peer on the CPU is that."""
    return cpu_autocast_to("bfloat16")


def cpu_autocast_to(dtype_name):
    """Whether CPU autocast to torch.<dtype_name> works here (float16: not
    on 1.13, whose CPU autocast takes bfloat16 only). A small convolution
    and linear layer under it must come out in that type."""
    dtype = getattr(torch, dtype_name, None)
    if not hasattr(torch, "autocast") or dtype is None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast("cpu", dtype=dtype):
                y = F.linear(F.conv2d(torch.ones(1, 1, 5, 5), torch.ones(2, 1, 3, 3)).flatten(1),
                             torch.ones(3, 18))
        return y.dtype == dtype
    except (RuntimeError, TypeError, ValueError):
        return False

def forward_context(device, precision):
    """bf16 on the CPU is autocast: convolutions and matmuls in bfloat16,
    fp32 master weights, gradients and optimiser (what the blas backend's
    bf16 does with sbgemm); anything else runs as it is."""
    if precision == "bf16":
        if device.type != "cpu" or not cpu_autocast_bf16():
            raise ValueError(f"--precision bf16 needs CPU autocast to bfloat16 "
                             f"(torch {torch.__version__} on {device.type} has none)")
        return lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext

def logits_of(net, x, autocast):
    """The forward pass under `autocast`, logits back in fp32 so the loss
    and its softmax are fp32 as in every other engine."""
    with autocast():
        return net(x).float()

def set_math(device, precision):
    """fp32 means fp32: TF32 off for matmul and cuDNN (torch enables it for
    cuDNN convolutions by default); tf32 turns both on (GPU only)."""
    tf32 = precision == "tf32"
    if hasattr(torch.backends, "fp32_precision"):
        # PyTorch 2.9 on: the new settings only (mixing them with the old
        # ones is refused when read back)
        mode = "tf32" if tf32 else "ieee"
        torch.backends.fp32_precision = mode
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
        return
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("high" if tf32 else "highest")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
