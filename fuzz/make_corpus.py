#!/usr/bin/env python3
"""Writes the seed corpus under fuzz/corpus/: a few valid small files and a
few invalid ones per target. Run from the repository root; the output is
committed, so this only needs rerunning when the formats change."""
import gzip
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def be32(*v):
    return struct.pack(">%dI" % len(v), *v)


def images(count, rows, cols, magic=0x803, extra=0, short=0):
    data = bytes((i * 7) % 256 for i in range(count * rows * cols + extra - short))
    return be32(magic, count, rows, cols) + data


def labels(values, magic=0x801, count=None):
    return be32(magic, len(values) if count is None else count) + bytes(values)


def params_tiny(values=None, version=1, names=None, conv_shape=(2, 1, 2, 2), extra=b""):
    """The fuzz target's tiny workload: conv 1->2 (2x2), dense 8->3."""
    tensors = [("conv.weight", conv_shape), ("conv.bias", (2,)),
               ("fc.weight", (3, 8)), ("fc.bias", (3,))]
    if names:
        tensors = [(n, s) for n, (_, s) in zip(names, tensors)]
    out = b"LBPARAMS" + struct.pack("<II", version, len(tensors))
    k = 0
    for name, shape in tensors:
        out += struct.pack("<I", len(name)) + name.encode()
        out += struct.pack("<I", len(shape)) + struct.pack("<%dI" % len(shape), *shape)
        n = 1
        for d in shape:
            n *= d
        for _ in range(n):
            v = values[k] if values and k < len(values) else (k - 18) / 16.0
            out += struct.pack("<f", v)
            k += 1
    return out + extra


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


idx = {
    "valid-images-2x3": images(2, 2, 3),
    "valid-images-28x28": images(1, 28, 28),
    "valid-labels": labels([0, 1, 2, 9, 5]),
    "bad-magic": images(1, 2, 3, magic=0x12345678),
    "bad-element-type": images(1, 2, 3, magic=0x0D03),
    "labels-out-of-range": labels([0, 10, 255]),
    "truncated-header": images(1, 2, 3)[:10],
    "truncated-data": images(2, 2, 3, short=5),
    "trailing-bytes": labels([1, 2], count=1),
    "dims-overflow": be32(0x803, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF),
    "zero-count": images(0, 2, 3),
}
for name, data in idx.items():
    write("idx_parse", name, data)
    write("idx_file", name, data)
write("idx_file", "gz-valid-images", gzip.compress(images(3, 2, 3), mtime=0))
write("idx_file", "gz-valid-labels", gzip.compress(labels([3, 1, 4, 1, 5]), mtime=0))
write("idx_file", "gz-two-members",
      gzip.compress(labels([1, 2, 3])[:5], mtime=0) + gzip.compress(labels([1, 2, 3])[5:], mtime=0))
write("idx_file", "gz-truncated", gzip.compress(images(3, 2, 3), mtime=0)[:20])
write("idx_file", "gz-too-much", gzip.compress(images(1, 2, 3, extra=7), mtime=0))
write("idx_file", "gz-trailing-garbage", gzip.compress(labels([1]), mtime=0) + b"junk")

nan = struct.unpack("<f", struct.pack("<I", 0x7FC00000))[0]
pf = {
    "valid-tiny": params_tiny(),
    "valid-tiny-zeros": params_tiny(values=[0.0] * 37),
    "nan-value": params_tiny(values=[0.0] * 20 + [nan]),
    "wrong-version": params_tiny(version=2),
    "wrong-name": params_tiny(names=["conv.weight", "conv.bias", "fc2.weight", "fc.bias"]),
    "wrong-shape": params_tiny(conv_shape=(2, 1, 4)),
    "truncated": params_tiny()[:100],
    "trailing-bytes": params_tiny(extra=b"\0\0"),
    "lenet-header-only": b"LBPARAMS" + struct.pack("<II", 1, 8),
    "bad-magic": b"LBPARAMZ" + struct.pack("<II", 1, 4),
}
for name, data in pf.items():
    write("paramfile", name, data)

# csv: what compare, history and plot read
csv = {
    "valid-summary": b"backend,workload,status,message,images_per_second\n"
                     b"naive,lenet,ok,,2400.5\n"
                     b"cuda,lenet,skipped,\"no GPU, \"\"none\"\" found\",0\n",
    "valid-crlf-blank-lines": b"a,b\r\n\r\n1,2\r\n\n3,4",
    "valid-quoted-newline": b"a,b\n\"two\nlines\",x\n",
    "valid-header-only": b"a,b,c\n",
    "unclosed-quote": b"a,b\n\"open,1\n",
    "text-after-quote": b"a,b\n\"x\"y,1\n",
    "quote-in-field": b"a,b\nx\"y,1\n",
    "wrong-width": b"a,b,c\n1,2\n",
    "nul-byte": b"a,b\n1,\x002\n",
    "empty": b"",
}
for name, data in csv.items():
    write("csv", name, data)
