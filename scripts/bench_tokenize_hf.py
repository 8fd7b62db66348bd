#!/usr/bin/env python3
"""Single-thread encode throughput of the Python `tokenizers` library on the same texts that
`verlc bench tokenize` uses (question/answer/text fields of a JSONL file). Not a test.
usage: scripts/bench_tokenize_hf.py TOKENIZER_DIR FILE.jsonl"""
import json, os, sys, time
from tokenizers import Tokenizer

os.environ.setdefault("RAYON_NUM_THREADS", "1")
tok = Tokenizer.from_file(os.path.join(sys.argv[1], "tokenizer.json"))
texts = []
for line in open(sys.argv[2], encoding="utf-8"):
    row = json.loads(line)
    texts += [row[k] for k in ("question", "answer", "text") if isinstance(row.get(k), str)]
mb = sum(len(t.encode()) for t in texts) / 1e6
for label in ("cold cache", "warm cache"):
    t0 = time.perf_counter()
    n = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
    dt = time.perf_counter() - t0
    print(f"tokenizers {sys.argv[1]} 1 thread ({label}): {mb / dt:8.2f} MB/s {n / dt:10.0f} tokens/s ({n} tokens)")
