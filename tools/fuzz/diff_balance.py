#!/usr/bin/env python3
"""Differential check of trainer.balance_batch on several ranks (src/rl/balance.c rl_balance_partition) against verl's
own RayPPOTrainer._balance_batch arithmetic (b178a3cd: seqlen_balancing.calculate_workload, get_seqlen_balanced_partitions
into equal counts, each partition sorted by (workload, index) and taken as its even places then its odd ones reversed):
random batches of 2-8 ranks, row lengths drawn wide, narrow or all equal (ties in the Karmarkar-Karp heap), every
rank's rows in their order compared; a third of them in groups of rows sharing a prompt (use_prefix_grouper: verl's
get_group_balanced_partitions, whole groups to the ranks, each rank's rows ascending).

usage: diff_balance.py VERL_SRC N [SEED]   (from the repository root, after make; PYTHONPATH must give torch)"""
import os, random, subprocess, sys

VERL, N = sys.argv[1], int(sys.argv[2])
SEED = int(sys.argv[3]) if len(sys.argv) > 3 else 1
sys.path.insert(0, VERL)
import torch
from verl.utils.seqlen_balancing import calculate_workload, get_group_balanced_partitions, get_seqlen_balanced_partitions

from drv_build import build_driver

drv = build_driver("balance_drv")

R = random.Random(SEED)
cases, want = [], []
for _ in range(N):
    W = R.choice([2, 3, 4, 8])
    G = R.choice([0, 0, R.choice([2, 4])])  # rows a group (0: no groups)
    GB = W * R.randint(1, 12) * max(G, 1)
    kind = R.choice(["wide", "narrow", "ties"])
    lens = [R.randint(5, 600) if kind == "wide" else R.randint(5, 40) if kind == "narrow" else R.choice([64, 100])
            for _ in range(GB)]
    wl = calculate_workload(torch.tensor(lens)).tolist()
    ranks = []
    if G:  # (verl: no reordering within a rank for the grouper)
        ranks = get_group_balanced_partitions(lens, [i // G for i in range(GB)], k_partitions=W)
    for p in [] if G else get_seqlen_balanced_partitions(wl, k_partitions=W, equal_size=True):
        p.sort(key=lambda x: (wl[x], x))
        ranks.append(p[::2] + p[1::2][::-1])
    cases.append(f"{GB} {W} {G} " + " ".join(map(str, lens)))
    want.append("|".join(" ".join(map(str, r)) for r in ranks) + "|")
out = subprocess.run([drv], input="\n".join(cases) + "\n", capture_output=True, text=True, check=True).stdout
got = [l.replace(" |", "|") for l in out.split("\n")[:N]]
bad = [i for i in range(N) if got[i] != want[i]]
for i in bad[:3]:
    print(f"case {i}: {cases[i][:100]}\n  verl  {want[i][:120]}\n  verlc {got[i][:120]}")
print(f"{N - len(bad)}/{N} batches agree (verl b178a3cd's _balance_batch, seed {SEED})")
