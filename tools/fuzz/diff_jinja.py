#!/usr/bin/env python3
"""Differential check of verlc's Jinja interpreter against Jinja2 (transformers' sandboxed settings) on random
expressions: literals, filters, methods, operators, tests and conditionals nested up to four deep, rendered as
{{ expr }} over a few variables. Jinja2's generator reprs (memory addresses) are left out.

usage: diff_jinja.py N [SEED] [OUT.json]     (from the repository root; needs jinja2 and build/libverlc.a, or a
driver built already in $VC_JINJA_DRV: tools/fuzz/jinja_drv.c linked with -fsanitize=address,undefined runs the same
expressions under the sanitizers). Known to differ (2026-12-06, seeds 1-3, 5,000 expressions each: 46, 44, 68; 180 of
5,000 before that day's sort, dictsort, batch, wordcount, center, '%' formatting, list methods and tuples): Jinja2's
lazy filters (select, reject, map, unique, items yield generators: their errors wait until iterated, their repr is
printed, `not` of one is False), its compile-time folding of constant subscripts (`(-3)[:2]` is Undefined there, a
TypeError on a variable, as verlc does for both), dict views printed as dict_keys([...]) and Markup's repr in lists."""
import copy, json, os, random, subprocess, sys
from drv_build import build_driver
import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
def raise_exception(m): raise jinja2.exceptions.TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson; env.globals["raise_exception"] = raise_exception
R = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
LIT = ['1', '0', '-3', '2.5', '1e3', '"ab"', '"A b "', "'x'", '""', '[1, 2, 3]', '["b", "a"]', '[]', '{"k": 1, "j": 2}',
       'none', 'true', 'false', 'messages', 'messages[0]', 'messages[0].content', 'm', 'n', 's', '"3"', '" 7 "', '(1, 2)',
       '"%s-%d"', '"%5.2f|%x"', '"%(k)s %r"', '"%-4s%%"', '("a", 2)', '[[2, "b"], [1, "a"]]']
FIL = ['length', 'upper', 'lower', 'trim', 'first', 'last', 'reverse', 'sort', 'unique', 'int', 'float', 'string', 'list',
       'tojson', 'items', 'join', 'join(", ")', 'default("d")', 'replace("a", "z")', 'capitalize', 'title', 'abs', 'round',
       'sum', 'min', 'max', 'count', 'e', 'safe', 'dictsort', 'map("upper")', 'select', 'reject', 'batch(2)|list',
       'indent(2)', 'center(9)', 'wordcount', 'trim("a")', 'tojson(indent=2)', 'string|length', 'sort(reverse=true)',
       'sort(attribute="0")', 'dictsort(by="value")', 'max(case_sensitive=true)', 'sum(start=1)', 'batch(2, 0)|list']
MET = ['.strip()', '.split()', '.split(" ")', '.startswith("a")', '.endswith("b")', '.lower()', '.upper()', '.items()',
       '.keys()', '.values()', '.get("k")', '.get("z", 5)', '.replace("a", "b")', '.lstrip("A")', '.rstrip()', '.title()',
       '.count("a")', '.find("b")', '[0]', '[-1]', '[1:]', '[:2]', '[::-1]', '.content', '["k"]', '.index(1)', '.title()']
OPS = ['+', '-', '*', '/', '//', '%', '**', '~', '==', '!=', '<', '>=', 'and', 'or', 'in', 'not in']
TESTS = ['string', 'number', 'integer', 'float', 'mapping', 'iterable', 'sequence', 'none', 'defined', 'undefined',
         'true', 'false', 'boolean', 'even', 'odd', 'lower', 'upper', 'eq(1)', 'divisibleby(2)']
def expr(d=0):
    k = R.random()
    if d > 3 or k < 0.3: return R.choice(LIT)
    if k < 0.45: return f"{expr(d+1)}|{R.choice(FIL)}"
    if k < 0.6: return f"({expr(d+1)}){R.choice(MET)}"
    if k < 0.8: return f"({expr(d+1)} {R.choice(OPS)} {expr(d+1)})"
    if k < 0.88: return f"({expr(d+1)} is {R.choice(['', 'not '])}{R.choice(TESTS)})"
    if k < 0.94: return f"(not {expr(d+1)})"
    return f"({expr(d+1)} if {expr(d+1)} else {expr(d+1)})"
N = int(sys.argv[1])
tmpls = ["{{ " + expr() + " }}" for _ in range(N)]
vars_ = {"messages": [{"role": "user", "content": "Hello World"}], "m": {"a": 1, "b": [1, 2]}, "n": 7, "s": "aAb"}
ref = []
for t in tmpls:
    try: ref.append(env.from_string(t).render(**copy.deepcopy(vars_)))
    except Exception as e: ref.append(None)
inp = "".join(json.dumps({"t": t}) + "\n" for t in tmpls)
drv = os.environ.get("VC_JINJA_DRV")  # a driver built already (e.g. with -fsanitize=address,undefined)
if not drv:
    drv = build_driver("jinja_drv")
run = subprocess.run([drv], input=inp, capture_output=True, text=True)
if run.returncode: sys.exit(f"driver exited {run.returncode}: {run.stderr[-2000:]}")
out = run.stdout.split('\n')
bad = []
for t, r, o in zip(tmpls, ref, out):
    ours = None if o == "ERR" else bytes.fromhex(o).decode('utf-8', 'replace')
    if r is not None and '<generator object' in r: continue
    if ours != r: bad.append((t, r, ours))
print(N, 'expressions,', sum(r is None for r in ref), 'raise in Jinja2,', len(bad), 'differ')
if len(sys.argv) > 3:
    json.dump(bad, open(sys.argv[3], 'w'), ensure_ascii=False, indent=0)
