#!/usr/bin/env python3
"""A stand-in for backends/peer/train.py that fails on purpose, for
tests/test_peers.sh (selected with LENET_BENCH_PYTORCH_SCRIPT). It answers
--probe as train.py does, without torch; in --serve mode it fails as
PEER_STANDIN says:
  exit     says it is ready, reads the first command, writes a traceback
           line to stderr and exits with status 3
  garbage  writes a line that is not the protocol instead of "ready", then
           waits (./bench must kill it)
  hang     says it is ready, reads the first command and never answers
"""
import os
import sys
import time

if "--probe" in sys.argv:
    print("pytorch 0.0-standin cuda 0")
    sys.exit(0)
mode = os.environ.get("PEER_STANDIN", "exit")
if mode == "garbage":
    print("hello, this is not the protocol", flush=True)
    time.sleep(3600)
print("ready\tstandin\ta stand-in that fails on purpose", flush=True)
sys.stdin.buffer.readline()
if mode == "exit":
    print("RuntimeError: the stand-in fails on purpose", file=sys.stderr, flush=True)
    sys.exit(3)
time.sleep(3600)
