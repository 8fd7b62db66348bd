#!/usr/bin/env python3
"""Differential check of verlc's tokenizers against Hugging Face `tokenizers` on random texts drawn from many scripts
(Latin, CJK, Hangul, Arabic, Devanagari, emoji and ZWJ sequences, combining marks, odd spaces, control and private-use
characters, special tokens, code). No NUL: a JSONL string holding \\u0000 is refused by verlc (cJSON ends strings there).

usage: diff_tok.py TOKENIZER_DIR N [SEED]     (from the repository root; needs `tokenizers` and build/verlc). Encodes
each text without special tokens through both (verlc tokenize), prints how many differ and the first three; then decodes
those ids and N random id lists (verlc detokenize, with and without --skip-special-tokens). A folder with a
tokenizer.model and no tokenizer.json is compared with the `sentencepiece` library instead (encoding only)."""
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
out = [json.loads(l)["ids"] for l in r.stdout.split("\n") if l]
bad = [(t, a, b) for t, a, b in zip(texts, ref, out) if a != b]
print(sys.argv[1].split("/")[-1], len(texts), "texts,", len(bad), "differ", "(lines out %d)" % len(out))
for t, a, b in bad[:3]: print(" ", json.dumps(t), a, b)
if os.path.exists(sys.argv[1] + "/tokenizer.json"):  # decoding: the encodings and random ids, special tokens kept and skipped
    seqs = ref + [[R.randrange(tok.get_vocab_size()) for _ in range(R.randint(1, 12))] for _ in range(N)]
    inp = "".join(json.dumps({"ids": s}) + "\n" for s in seqs)
    for skip in (False, True):
        r = subprocess.run(["build/verlc", "detokenize", "--tokenizer", sys.argv[1]] + (["--skip-special-tokens"] if skip else []),
                           input=inp, capture_output=True, text=True)
        got = [json.loads(l)["text"] for l in r.stdout.split("\n") if l]  # not splitlines: U+2028 is in the text
        dbad = [(s, w, g) for s, w, g in zip(seqs, (tok.decode(s, skip_special_tokens=skip) for s in seqs), got) if w != g]
        if len(got) != len(seqs): dbad.append(("lines", len(seqs), len(got)))
        print("  decode%s: %d id lists, %d differ" % (" (skip special)" if skip else "", len(seqs), len(dbad)))
        for x in dbad[:3]: print("   ", json.dumps(x, ensure_ascii=False))
        bad += dbad
sys.exit(1 if bad else 0)
