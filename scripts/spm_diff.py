#!/usr/bin/env python3
"""Differential check of `verlc tokenize`/`detokenize` against the `sentencepiece` library for a
tokenizer.model folder, on GSM8K rows and random texts. Not a CTest test (needs `pip install sentencepiece`).
usage: scripts/spm_diff.py VERLC_BIN DIR [N_RANDOM]"""
import json, os, random, subprocess, sys
import sentencepiece as spm

verlc, d = sys.argv[1], sys.argv[2]
n_random = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
rng = random.Random(7)
alphabet = (list("  \t\n\r\u00a0\u3000") * 3 + list("abcXYZ019'.,;:!?-_#$%&*()[]{}<>|/\\\"") +
            list("éñüßçÅÅﬁ中文日本語한국어αβγжщ\u0301\u0308\u200b\u200d🤖👍🏽ｆｕｌｌ٣४①") +
            ["<|im_start|>", "<|im_end|>", "<s>", "</s>", "<unk>", " the", "▁"])
texts = []
data = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "gsm8k", "test.jsonl")
for line in open(data, encoding="utf-8"):
    r = json.loads(line); texts += [r["question"], r["answer"]]
for _ in range(n_random):
    texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, rng.choice((8, 40, 200))))))
inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
out = subprocess.run([verlc, "tokenize", "--tokenizer", d], input=inp.encode(), capture_output=True, check=True).stdout.decode().splitlines()
bad = 0
for t, line in zip(texts, out):
    got, want = json.loads(line)["ids"], sp.encode(t)
    if got != want:
        bad += 1
        if bad <= 10: print("ENCODE MISMATCH", repr(t), got, want)
ids = [sp.encode(t) for t in texts] + [[rng.randrange(sp.get_piece_size()) for _ in range(rng.randint(0, 12))] for _ in range(500)]
out = subprocess.run([verlc, "detokenize", "--tokenizer", d], input="".join(json.dumps({"ids": i}) + "\n" for i in ids).encode(),
                     capture_output=True, check=True).stdout.decode().splitlines()
for i, line in zip(ids, out):
    got, want = json.loads(line)["text"], sp.decode(i)
    if got != want:
        bad += 1
        if bad <= 20: print("DECODE MISMATCH", i, [sp.id_to_piece(x) for x in i], repr(got), repr(want))
print(f"{d}: {len(texts)} texts, {len(ids)} id rows, {bad} mismatches")
sys.exit(1 if bad else 0)
