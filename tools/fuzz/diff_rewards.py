#!/usr/bin/env python3
"""Differential check of verlc's rule-based rewards against verl's Python ones on a corpus of responses (the reward
fuzzer's, build-fuzz/corpus/reward after scripts/fuzz.sh reward: a selector byte, the response, 0x01, the ground truth).

usage: diff_rewards.py VERL_SRC CORPUS_DIR [OUT.json]
VERL_SRC holds verl/utils/reward_score (`git archive b178a3cd verl/utils/reward_score | tar -x -C DIR`); needs sympy
1.14, pylatexenc 2.11, mathruler 0.1.0 and latex2sympy2_extended importable, and build/libverlc.a (make). Compares
openai/gsm8k, lighteval/MATH, math_dapo, hiyouga/geometry3k, numina_* (prime_math) and searchR1_nq (the ground truth
as the golden answers [gt, GT]) over every input whose texts are
UTF-8 without NULs and whose ground truth is not JSON (verlc decodes a JSON ground truth, verl gets the object); a
Python call past 3 s or raising is left out. Prints the count differing per source; OUT.json lists them."""
import contextlib, glob, importlib.util, io, json, logging, os, signal, subprocess, sys, types, warnings
from drv_build import build_driver

logging.disable(logging.CRITICAL)
warnings.filterwarnings("ignore")
src, corpus = sys.argv[1], sys.argv[2]
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
drv = build_driver("reward_drv")


def stub(name, **attrs):
    m = types.ModuleType(name)
    m.__path__ = []
    m.__dict__.update(attrs)
    sys.modules[name] = m


stub("verl"), stub("verl.utils"), stub("verl.utils.reward_score")
stub("verl.utils.py_functional", timeout_limit=lambda seconds=0, use_signals=False: (lambda f: f))
rs = os.path.join(src, "verl/utils/reward_score")


def load(name, pkg=False):
    path = os.path.join(rs, name, "__init__.py") if pkg else os.path.join(rs, name + ".py")
    spec = importlib.util.spec_from_file_location("verl.utils.reward_score." + name, path,
                                                  submodule_search_locations=[os.path.join(rs, name)] if pkg else None)
    m = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = m
    spec.loader.exec_module(m)
    return m


gsm8k, mathr, dapo, geo, pm = load("gsm8k"), load("math_reward"), load("math_dapo"), load("geo3k"), load("prime_math", 1)
qa = load("search_r1_like_qa_em")
first = lambda r: float(r[0] if isinstance(r, tuple) else r)
SOURCES = {"openai/gsm8k": gsm8k.compute_score, "lighteval/MATH": mathr.compute_score,
           "math_dapo": lambda s, g: dapo.compute_score(s, g)["score"], "hiyouga/geometry3k": geo.compute_score,
           "numina_olympiads": lambda s, g: first(pm.compute_score(s, g)),
           "searchR1_nq": lambda s, g: qa.compute_score(s, {"target": [g, g.upper()]})}
# the ground truth as verlc's rows hold it, where verl's reward gets an object
GT_TEXT = {"searchR1_nq": lambda g: json.dumps({"target": [g, g.upper()]}, ensure_ascii=False)}
inputs = []
for f in sorted(glob.glob(os.path.join(corpus, "*"))):
    b = open(f, "rb").read()[1:]
    sol, _, gt = b.partition(b"\x01")
    gt = gt if _ else b"42"
    if b"\0" in sol + gt or gt[:1] in (b'"', b"{", b"["):
        continue
    try:
        inputs.append((sol.decode(), gt.decode()))
    except UnicodeDecodeError:
        pass


def timeout(*_):
    raise TimeoutError


signal.signal(signal.SIGALRM, timeout)
refs, lines = [], []
for sol, gt in inputs:
    for ds, fn in SOURCES.items():
        signal.alarm(3)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                r = float(fn(sol, gt))
        except Exception:
            r = None
        signal.alarm(0)
        refs.append((ds, sol, gt, r))
        lines.append(f"{ds}\t{sol.encode().hex()}\t{GT_TEXT.get(ds, lambda g: g)(gt).encode().hex()}")
out = subprocess.run([drv], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout.split("\n")
bad = {ds: [] for ds in SOURCES}
for (ds, sol, gt, r), o in zip(refs, out):
    if r is not None and (o == "ERR" or abs(float(o) - r) > 1e-9):
        bad[ds].append([sol, gt, r, o])
print(f"{len(inputs)} responses:", ", ".join(f"{ds} {len(b)} differ" for ds, b in bad.items()))
if len(sys.argv) > 3:
    json.dump(bad, open(sys.argv[3], "w"), ensure_ascii=False, indent=0)
sys.exit(1 if any(bad.values()) else 0)
