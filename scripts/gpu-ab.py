#!/usr/bin/env python3
"""The A/B benches of a gpu-check.sh summary side by side: each `== bench ...` step's tokens/s, and for a step whose
name ends in `, NAME=VALUE ...` (gpu-check.sh's ab_train / ab_logprob and the generate A/Bs) its ratio to the step of
the same name without the settings (the default).

    scripts/gpu-ab.py gpu-check.txt

gpu-check.sh appends its output to the summary. Figures read: training's `... tokens/s, ... GFLOP/s`, log-probs'
`time ... N tokens/s`, and generate's decode line (batch, decode tok/s) and `whole call N tokens/s`. A step with no
figure (skipped, failed) shows '-'.
"""
import re
import sys

STEP = re.compile(r"^== (bench (?:train|logprob|generate) .*?)(?:: skipped.*)?$")
TRAIN = re.compile(r"tokens in [0-9.]+ s: ([0-9.]+) tokens/s")
LOGPROB = re.compile(r"^\s*time [0-9.]+ s\s+([0-9.]+) tokens/s")
DECODE = re.compile(r"^\s+\d+\s+([0-9.]+)\s+[0-9.]+\s+(?:(?:mem|flop)\s+)?[0-9.]+ GB")
WHOLE = re.compile(r"whole call ([0-9.]+) tokens/s")


def figures(lines):
    """step name -> {kind: tokens/s} for every bench step, the last run of a name winning"""
    out, name = {}, None
    for ln in lines:
        m = STEP.match(ln)
        if m:
            name = m.group(1).strip()
            out[name] = {}
            continue
        if ln.startswith("== ") or ln.startswith("-- "):
            name = None if ln.startswith("== ") else name
            continue
        if name is None:
            continue
        for kind, rx in (("train", TRAIN), ("logprob", LOGPROB), ("decode", DECODE), ("whole", WHOLE)):
            m = rx.search(ln)
            if m and kind not in out[name]:
                out[name][kind] = float(m.group(1))
    return out


def split(name):
    """(base step name, settings) for `base, A=1 B=2`; settings '' for a default step"""
    m = re.match(r"^(.*\))(?:, ((?:[A-Z0-9_]+=\S+\s*)+))$", name)
    return (m.group(1), m.group(2).strip()) if m else (name, "")


def main(argv):
    if len(argv) != 2:
        print("usage: scripts/gpu-ab.py gpu-check.txt", file=sys.stderr)
        return 2
    try:
        lines = open(argv[1], encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        print("gpu-ab: %s: %s" % (argv[1], e.strerror), file=sys.stderr)
        return 1
    figs = figures(lines)
    rows = []
    for name, f in figs.items():
        base, setting = split(name)
        if not setting:
            continue
        ref = figs.get(base, {})
        for kind in ("train", "logprob", "decode", "whole"):
            if kind in f or kind in ref:
                x, r = f.get(kind), ref.get(kind)
                ratio = "%.3fx" % (x / r) if x and r else "-"
                rows.append((base, setting, kind, "%.0f" % r if r else "-", "%.0f" % x if x else "-", ratio))
    if not rows:
        print("gpu-ab: no A/B bench steps with figures in %s" % argv[1])
        return 0
    print("A/B benches (tokens/s: the default step's, the setting's, their ratio)")
    for base, setting, kind, r, x, ratio in rows:
        print("  %-58s %-40s %-8s %10s %10s %8s" % (base[:58], setting[:40], kind, r, x, ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
