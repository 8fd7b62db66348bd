#!/usr/bin/env python3
"""Differential check of verlc's tokenizers against Hugging Face `tokenizers` on random texts drawn from many scripts
(Latin, CJK, Hangul, Arabic, Devanagari, emoji and ZWJ sequences, combining marks, odd spaces, control and private-use
characters, special tokens, code). No NUL: a JSONL string holding \\u0000 is refused by verlc (cJSON ends strings there).

usage: diff_tok.py TOKENIZER_DIR N [SEED]     (from the repository root; needs `tokenizers` and build/verlc). Encodes
each text without special tokens through both (verlc tokenize), prints how many differ and the first three. A folder
with a tokenizer.model and no tokenizer.json is compared with the `sentencepiece` library instead."""
import json, os, random, subprocess, sys, unicodedata
from tokenizers import Tokenizer
R = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 5)
# characters from many categories: ASCII, Latin-1, CJK, Hangul, Arabic, Devanagari, emoji (incl. ZWJ), combining marks,
# whitespace kinds, digits of other scripts, control characters, private use, surrogate-free astral
POOLS = ["abcXYZ", "0123456789", " ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u2009", "\u3000", "'s", "'LL", "’re", "...", "!?",
         "éüßøñ", "中文字符测试", "한국어", "العربية", "हिन्दी", "👍🏽", "👨‍👩‍👧", "\u0301", "\u200b", "\u200d", "٣٤٥", "१२३",
         "\x07", "\ue000", "𝔘𝔫𝔦", "ﬁ", "Ⅻ", "½", "<|im_start|>", "<|endoftext|>", "<think>", "```python\n", "    ", "\u2028"]
def rand_text():
    return "".join(R.choice(POOLS) for _ in range(R.randint(0, 12)))
N = int(sys.argv[2])
texts = [rand_text() for _ in range(N)]
if os.path.exists(sys.argv[1] + "/tokenizer.json"):
    tok = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
    ref = [tok.encode(t, add_special_tokens=False).ids for t in texts]
else:  # a SentencePiece model alone: the sentencepiece library is the reference
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1] + "/tokenizer.model")
    ref = [sp.encode(t) for t in texts]
inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
r = subprocess.run(["build/verlc", "tokenize", "--tokenizer", sys.argv[1]], input=inp, capture_output=True, text=True)
out = [json.loads(l)["ids"] for l in r.stdout.splitlines()]
bad = [(t, a, b) for t, a, b in zip(texts, ref, out) if a != b]
print(sys.argv[1].split("/")[-1], len(texts), "texts,", len(bad), "differ", "(lines out %d)" % len(out))
for t, a, b in bad[:3]: print(" ", json.dumps(t), a, b)
sys.exit(1 if bad else 0)
