#!/usr/bin/env python3
"""Differential check of verlc's verl command lines against Hydra: random override sets (a leaf's value in each of
Hydra's syntaxes: ints with signs and underscores, floats in every spelling, inf / nan, true / True, null, quoted and
unquoted strings, escapes, lists, dicts, interpolations; `+key=` additions, `++key=` forced ones, `~key` deletions)
composed over verl's ppo_trainer config (b178a3cd, the defaults verlc compiles in) by Hydra 1.3 and resolved by
OmegaConf, against `verlc train --cfg job` with the same arguments. Both failing counts as agreement; verlc refusing a
value its key's type cannot take (a list for a boolean), and Hydra alone refusing a command line (characters its
grammar does not take unquoted, a key under a node that verl's YAML makes an interpolation), are counted apart: a
difference is a command line Hydra takes that verlc refuses otherwise, or takes to another configuration.

usage: diff_config.py VERL_CONFIG_DIR N [SEED]     (from the repository root; needs hydra-core, PyYAML and
build/verlc; VERL_CONFIG_DIR: verl/trainer/config of verl b178a3cd, e.g. from `git archive b178a3cd
verl/trainer/config`). Prints how many override sets differ and the first few."""
import math, random, subprocess, sys
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

CFG_DIR, N = sys.argv[1], int(sys.argv[2])
R = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)


def leaves(d, pre=""):
    for k, v in d.items():
        p = f"{pre}.{k}" if pre else str(k)
        if isinstance(v, dict) and v:
            yield from leaves(v, p)
        else:
            yield p, v


def hydra_config(overrides):
    try:
        with initialize_config_dir(config_dir=CFG_DIR, version_base=None):
            return OmegaConf.to_container(compose(config_name="ppo_trainer", overrides=overrides), resolve=True)
    except Exception as e:
        return "error: " + str(e).split("\n")[0][:200]


def verlc_config(overrides):
    r = subprocess.run(["build/verlc", "train", "--cfg", "job"] + overrides, capture_output=True, text=True)
    if r.returncode:
        return "error: " + (r.stderr.strip().split("\n") or [""])[-1][:200]
    return yaml.safe_load(r.stdout)


VALUES = ["1", "-3", "+7", "0", "1_000", "007", "1e-6", "1E3", "1.5", ".5", "5.", "-0.0", "1e+2", "inf", "-inf", "nan", "NaN",
          "true", "True", "TRUE", "false", "null", "NULL", "abc", "a_b-c", "'a b'", '"x y"', "'it''s'", "a\\ b", "''",
          "[]", "[1,2]", "[a, 'b c', 3.5]", "{}", "{a: 1, b: [x]}", "${trainer.total_epochs}", "'${data.max_prompt_length}'",
          "0x10", "1.0e-06", "/path/to/model", "Qwen/Qwen2.5-0.5B", "x=y", "a,b"]


def override(keys):
    k = R.random()
    key = R.choice(keys)
    if k < 0.08:
        return f"~{key}"
    if k < 0.15:
        return f"+{key}.extra_{R.randint(0, 3)}={R.choice(VALUES)}"
    if k < 0.2:
        return f"++{key}={R.choice(VALUES)}"
    return f"{key}={R.choice(VALUES)}"


def same(a, b):
    """equal, an int and a float of the same value alike (verlc keeps a float key a float: verl's entropy_coeff: 0)"""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return a == b
    return type(a) == type(b) and a == b


def diffs(a, b, path=""):
    """the paths where a and b differ, each with both values; a key only verlc has, or `_target_` (verlc keeps no
    classes), is not a difference"""
    if isinstance(a, dict) and isinstance(b, dict):
        out = set()
        for k in a:
            if k == "_target_":
                continue
            if k not in b:
                out.add(f"{path}.{k}: {a[k]!r:.100} vs absent")
            elif not same(a[k], b[k]):
                out |= diffs(a[k], b[k], f"{path}.{k}")
        return out
    return {f"{path}: {a!r:.100} vs {b!r:.100}"}


base = hydra_config([])
keys = [p for p, v in leaves(base)  # (profiler settings left out: verlc keeps its own, from later verl, and reads none)
        if not isinstance(v, (dict, list)) and not p.endswith("_target_") and "profiler" not in p]
known = diffs(base, verlc_config([]))  # where verlc's defaults differ on purpose (rollout.name, trainer.device)
bad, both_fail, stricter, lenient = [], 0, 0, 0
for i in range(N):
    ov = [override(keys) for _ in range(R.randint(1, 3))]
    h, v = hydra_config(ov), verlc_config(ov)
    if isinstance(h, str) and isinstance(v, str):
        both_fail += 1
        continue
    if isinstance(v, str) and not isinstance(h, str) and " expects " in v:
        stricter += 1  # verlc checks a value against its key's type first (Hydra leaves that to verl's dataclasses)
        continue
    if isinstance(h, str) and not isinstance(v, str):
        lenient += 1  # Hydra refuses what verlc takes: a value with '=' or '!' unquoted, a key under a node verl's YAML
        continue      # makes an interpolation, deleting a key whose value is null (Hydra: "does not exist")
    d = set() if isinstance(h, str) or isinstance(v, str) else diffs(h, v) - known
    if isinstance(h, str) or isinstance(v, str) or d:
        bad.append((ov, h if isinstance(h, str) else "", v if isinstance(v, str) else "", sorted(d)[:3]))
print(f"{N} override sets ({both_fail} refused by both, {stricter} refused by verlc's type check alone, {lenient} "
      f"refused by Hydra alone), {len(bad)} differ")
for ov, he, ve, d in bad[:15]:
    print(" ", ov, "\n    hydra:", he or "ok", "| verlc:", ve or "ok", "|", d)
sys.exit(1 if bad else 0)
