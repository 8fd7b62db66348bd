#!/usr/bin/env python3
"""Differential check of verlc's YAML reader (config files: `verlc train --config`, the defaults it compiles in)
against OmegaConf 2.3's loader: random documents (nested mappings and lists, strings with quotes, escapes, unicode and
line breaks, numbers, booleans, nulls, shared values as anchors and aliases) written by PyYAML in random styles (block
and flow collections, plain, single- and double-quoted, literal and folded scalars, line widths, indents, document
markers), plus hand-made fragments (comments, merge keys, chomping indicators, multi-line plain scalars), each read
by OmegaConf.create and by verlc, compared as JSON (inf / nan as null, as verlc's JSON has them).

usage: diff_yaml.py N [SEED]     (from the repository root; needs PyYAML, omegaconf and build/libverlc.a)"""
import json, math, random, subprocess, sys
from drv_build import build_driver
import yaml
from omegaconf import OmegaConf

R = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
WORDS = ["a", "b c", "x: y", "- z", "#h", "q'q", 'd"d', "tab\there", "line\nbreak", "trailing ", " lead", "é中😀", "true", "null",
         "1.5", "08", "~", "", "@at", "%p", "{b}", "[l]", "a,b", "back\\slash", "*star", "&amp", "!bang", "|pipe", ">gt", "?q",
         "multi\nline\ntext\n", "ends\n\n", "\ttab", "ünï", "${x.y}", "???"]


def scalar():
    k = R.random()
    if k < 0.45:
        return "".join(R.choice(WORDS) for _ in range(R.randint(1, 3)))
    if k < 0.6:
        return R.choice([0, 1, -7, 10 ** 12, R.randint(-1000, 1000)])
    if k < 0.75:
        return R.choice([0.5, -2.25, 1e-6, 1e20, 3.0, -0.0, 123.456, float("inf")])
    if k < 0.85:
        return R.choice([True, False])
    return None


def value(d=0):
    k = R.random()
    if d < 3 and k < 0.2:
        return {f"k{i}_{R.choice(['', 'x', 'a b'])}".strip(): value(d + 1) for i in range(R.randint(0, 4))}
    if d < 3 and k < 0.35:
        return [value(d + 1) for _ in range(R.randint(0, 4))]
    return scalar()


def doc():
    shared = value(2)
    data = {f"top{i}": value() for i in range(R.randint(1, 4))}
    if R.random() < 0.3 and isinstance(shared, (dict, list)):
        data["s1"], data["s2"] = shared, shared  # anchors and aliases
    kw = dict(default_flow_style=R.choice([False, True, None]), default_style=R.choice([None, None, '"', "'", "|", ">"]),
              width=R.choice([20, 80, 10 ** 6]), allow_unicode=R.random() < 0.5, indent=R.choice([2, 4]),
              explicit_start=R.random() < 0.3, sort_keys=False)
    if kw["default_style"] in ("|", ">", "'") and R.random() < 0.5:
        kw["default_style"] = None
    return yaml.dump(data, **kw)


FRAGMENTS = [
    "a: 1 # comment\n# whole line\nb: two  # another\n",
    "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",
    "lit: |\n  one\n   two\n\n  three\nnext: 1\n", "keep: |+\n  a\n\n\nnext: 1\n", "strip: |-\n  a\n  b\n",
    "fold: >\n  one\n  two\n\n  three\n   indented\n  four\n", "foldstrip: >-\n  a\n  b\n",
    "plain: this is\n  a multi-line\n  plain scalar\nb: 1\n", "q: 'it''s\n  folded'\n", 'd: "a\\tb\\u00e9\\x41\\\n  c"\n',
    "list:\n- a\n- - b\n  - c\n- {d: 1}\n", "empty:\nnone: ~\nalso: null\n", "? complex\n: value\n", "a: [1, [2, 3], {b: c}]\n",
    "k: 'single \"q\"'\nj: \"double 'q'\"\n", "indent:\n    deep:\n        x: 1\n", "---\na: 1\n...\n", "a: 'x' # c\nb: \"y\"#notc\n",
]


def norm(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {str(k): norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


N = int(sys.argv[1])
docs = FRAGMENTS + [doc() for _ in range(N)]
refs = []
for d in docs:
    try:
        refs.append(norm(OmegaConf.to_container(OmegaConf.create(d), resolve=False)))
    except Exception as e:
        refs.append(None)
drv = build_driver("yaml_drv")
inp = "".join(d + ("" if d.endswith("\n") else "\n") + "\x1e\n" for d in docs)
out = subprocess.run([drv], input=inp, capture_output=True, text=True).stdout.split("\n")
bad = []
for d, r, o in zip(docs, refs, out):
    got = None if o == "ERR" else json.loads(o)
    if got != r or (r is not None and json.dumps(got, sort_keys=True) != json.dumps(r, sort_keys=True)):
        bad.append((d, r, got))
print(f"{len(docs)} documents ({sum(r is None for r in refs)} refused by OmegaConf), {len(bad)} differ")
for d, r, g in bad[:6]:
    print("----\n" + d[:600], "\n  omegaconf:", json.dumps(r)[:400], "\n  verlc:    ", json.dumps(g)[:400])
sys.exit(1 if bad else 0)
