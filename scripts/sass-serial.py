#!/usr/bin/env python3
"""Kernels whose global loads feed shared-memory stores one at a time, read in the SASS of CUDA objects.

    scripts/sass-serial.py [--min N] build/CMakeFiles/verlc_cuda.dir/src/backend/cuda/*.cu.o

For every kernel it counts the places where a lone LDG is followed by an STS (in the order of the two kinds of
instruction): a staging loop whose store waits for its load, one memory latency an element, where issuing a group of
loads before their stores waits one a group. The count is static (a loop body counts once); kernels with at least
--min (8) such pairs are listed, most first, with their LDG count. cuobjdump: $CUOBJDUMP, else on the PATH (PyPI's
nvidia-cuda-cuobjdump has one where the toolkit lacks it). Exit status 2 when cuobjdump or an object is missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def kernels(sass):
    """(name, [LDG/STS ...]) for each function of cuobjdump -sass output"""
    name, seq = None, []
    for line in sass.split("\n"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                yield name, seq
            name, seq = m.group(1), []
            continue
        m = re.search(r"\b(LDG|STS)\b", line)
        if m and name:
            seq.append(m.group(1))
    if name:
        yield name, seq


def serial_pairs(seq):
    """lone LDGs followed by an STS, and the LDG count"""
    runs = []
    for op in seq:
        if runs and runs[-1][0] == op:
            runs[-1][1] += 1
        else:
            runs.append([op, 1])
    n = sum(1 for a, b in zip(runs, runs[1:]) if a == ["LDG", 1] and b[0] == "STS")
    return n, seq.count("LDG")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min", type=int, default=8)
    ap.add_argument("objects", nargs="+")
    a = ap.parse_args()
    tool = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if not tool:
        print("sass-serial: no cuobjdump (set CUOBJDUMP)", file=sys.stderr)
        return 2
    rows = []
    for f in a.objects:
        if not os.path.isfile(f):
            print(f"sass-serial: {f}: no such file", file=sys.stderr)
            return 2
        r = subprocess.run([tool, "-sass", f], capture_output=True, text=True)
        if r.returncode:
            print(f"sass-serial: {f}: cuobjdump failed: {r.stderr.strip()[:200]}", file=sys.stderr)
            return 2
        for name, seq in kernels(r.stdout):
            n, ldg = serial_pairs(seq)
            if n >= a.min:
                rows.append((n, ldg, os.path.basename(f), name))
    names = [r[3] for r in rows]
    filt = shutil.which("c++filt")
    if filt and names:
        names = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    for (n, ldg, f, _), name in sorted(zip(rows, names), reverse=True):
        print(f"{n:5d} serial of {ldg:5d} LDG  {f}  {name[:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
