#!/usr/bin/env python3
"""Differential check of `verlc tokenize`/`detokenize` against the Python `tokenizers` library on GSM8K
rows and random texts (whitespace runs, scripts, combining marks, emoji, special-token fragments).
Not a CTest test (needs `pip install tokenizers`). usage: scripts/tok_diff_hf.py VERLC_BIN TOKDIR [N_RANDOM]"""
import json, os, random, subprocess, sys
from tokenizers import Tokenizer

verlc, tokdir = sys.argv[1], sys.argv[2]
n_random = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
tok = Tokenizer.from_file(os.path.join(tokdir, "tokenizer.json"))
rng = random.Random(1234)
alphabet = (list(" \t\n\r\u00a0\u3000") * 3 + list("abcXYZ019'.,;:!?-_#$%&*()[]{}<>|/\\\"") +
            list("éñüßçÅÅﬁ中文日本語한국어αβγжщ\u0301\u0308\u200b\u200d🤖👍🏽ｆｕｌｌ٣४") +
            [t.content for t in tok.get_added_tokens_decoder().values()][:20] + ["'s", "'LL", " the", "<|", "|>"])
texts = []
data = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "gsm8k", "test.jsonl")
if os.path.exists(data):
    for line in open(data, encoding="utf-8"):
        r = json.loads(line); texts += [r["question"], r["answer"]]
for _ in range(n_random):
    texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, rng.choice((8, 40, 200))))))
inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
bad = 0
for special in (False, True):
    args = [verlc, "tokenize", "--tokenizer", tokdir] + (["--add-special-tokens"] if special else [])
    out = subprocess.run(args, input=inp.encode(), capture_output=True, check=True).stdout.decode().splitlines()
    for t, line in zip(texts, out):
        got, want = json.loads(line)["ids"], tok.encode(t, add_special_tokens=special).ids
        if got != want:
            bad += 1
            if bad <= 10: print("ENCODE MISMATCH", repr(t), got, want)
ids = [tok.encode(t, add_special_tokens=False).ids for t in texts]
for skip in (False, True):
    args = [verlc, "detokenize", "--tokenizer", tokdir] + (["--skip-special-tokens"] if skip else [])
    out = subprocess.run(args, input="".join(json.dumps({"ids": i}) + "\n" for i in ids).encode(),
                         capture_output=True, check=True).stdout.decode().splitlines()
    for i, line in zip(ids, out):
        got, want = json.loads(line)["text"], tok.decode(i, skip_special_tokens=skip)
        if got != want:
            bad += 1
            if bad <= 20: print("DECODE MISMATCH", i, repr(got), repr(want))
print(f"{tokdir}: {len(texts)} texts, {bad} mismatches")
sys.exit(1 if bad else 0)
