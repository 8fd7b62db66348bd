#!/usr/bin/env python3
"""Differential check of verlc's tokenizer.json pipeline against Hugging Face `tokenizers` on random tokenizer
configurations: a random normalizer, pre-tokenizer, model (BPE, Unigram, WordPiece, WordLevel, trained by `tokenizers`
on a random corpus, with byte fallback, subword prefixes and suffixes, ignore_merges), post-processor, decoder and
added tokens (special or not, single_word / lstrip / rstrip / normalized). For each tokenizer it compares encodings of
random texts with and without special tokens and decodings (skip_special_tokens false and true) of those ids and of
random id sequences.

usage: diff_tokcfg.py N [SEED] [--keep DIR] [--only I,J]   (from the repository root; needs `tokenizers` and build/verlc;
--only reruns those of the N tokenizers alone: each one's draws depend on SEED and its index only)
Prints one line per tokenizer that differs or that verlc refuses (the refusal's message), then the totals; with
--keep, the differing tokenizers' folders are kept under DIR (DIR/NNN/tokenizer.json + cases.jsonl)."""
import json, os, random, shutil, subprocess, sys, tempfile
from tokenizers import Tokenizer, Regex, AddedToken, models, trainers
from tokenizers import normalizers as N, pre_tokenizers as P, decoders as D, processors as PP

args = [a for a in sys.argv[1:] if not a.startswith("--")]
KEEP = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
ONLY = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
args = [a for a in args if a not in (KEEP, ONLY)]
ONLY = {int(x) for x in ONLY.split(",")} if ONLY else None
COUNT = int(args[0]) if args else 50
SEED = int(args[1]) if len(args) > 1 else 1
R = random.Random(SEED)

POOLS = ["the", "quick", "brown", "fox", "Hello", "WORLD", "abc", "xyz", "a", "I", "don't", "it's", "'s", "'ll", "12", "345",
         "2024", "7", "3.14", "$18", "#", "####", "<<", ">>", "=", "+", "-", "*", "(", ")", ",", ".", "!", "?", ":", ";", "\"",
         "'", " ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000", "\u2009", "é", "naïve", "café", "Ångström",
         "ﬁ", "Ⅻ", "½", "２３", "ｆｕｌｌ", "中文", "字符", "日本語", "한국어", "العربية", "हिन्दी", "Ελληνικά", "Привет", "e\u0301",
         "\u0308", "\u200b", "\u200d", "👍", "👍🏽", "👨‍👩‍👧", "🤖", "\x07", "\x1b", "\ue000", "𝔘𝔫𝔦", "▁", "_", "##", "</w>", "Ġ",
         "<0x41>", "[UNK]", "<unk>", "def f(x):\n    return x", "```"]
ADDED = ["<|im_start|>", "<|im_end|>", "<s>", "</s>", "[SEP]", "[CLS]", "<think>", "</think>", "<pad>", "hello", "ab", " x",
         "Ⅻ", "fox", "  ", "\n", "<tool_call>", "ÅB", "1", "<|endoftext|>", "te st", "é"]
SPLIT_PATTERNS = [(" ", False), ("-", False), ("ab", False), ("\\s+", True), ("\\d", True), ("\\p{L}+", True),
                  ("[^\\s\\p{L}\\p{N}]+", True), ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", True),
                  ("\\p{N}{1,3}", True), (" ?\\p{L}+| ?\\p{N}+", True), ("[\\u4e00-\\u9fff]+", True), ("a|e", True)]
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]

def text():
    return "".join(R.choice(POOLS + ADDED[:6]) + R.choice(["", " ", ""]) for _ in range(R.randint(0, 14)))

def rand_normalizer():
    opts = [lambda: R.choice([N.NFC(), N.NFD(), N.NFKC(), N.NFKD()]), N.Lowercase,
            lambda: N.Strip(left=R.random() < .5, right=R.random() < .5), N.StripAccents,
            lambda: N.Replace(R.choice([" ", "  ", "a", "\n", Regex("\\s+"), Regex("[0-9]")]), R.choice(["▁", "", "_", " "])),
            lambda: N.Prepend(R.choice(["▁", " ", "_"])),
            lambda: N.BertNormalizer(clean_text=R.random() < .5, handle_chinese_chars=R.random() < .5,
                                     strip_accents=R.choice([None, True, False]), lowercase=R.random() < .5),
            N.ByteLevel, N.Nmt]
    parts = [R.choice(opts)() for _ in range(R.choice([0, 0, 1, 1, 2, 3]))]
    return None if not parts else parts[0] if len(parts) == 1 and R.random() < .5 else N.Sequence(parts)

def rand_pretok():
    def split():
        pat, rx = R.choice(SPLIT_PATTERNS)
        return P.Split(Regex(pat) if rx else pat, R.choice(BEHAVIORS), invert=R.random() < .2)
    opts = [lambda: P.ByteLevel(add_prefix_space=R.random() < .5, use_regex=R.random() < .7),
            lambda: P.Metaspace(replacement=R.choice(["▁", "_"]), prepend_scheme=R.choice(["always", "first", "never"]),
                                split=R.random() < .5),
            P.Whitespace, P.WhitespaceSplit, P.BertPreTokenizer, lambda: P.Punctuation(R.choice(BEHAVIORS)),
            lambda: P.Digits(individual_digits=R.random() < .5), split, split, P.UnicodeScripts,
            lambda: P.CharDelimiterSplit(R.choice([" ", "a", "-"])), lambda: P.FixedLength(R.randint(1, 5))]
    parts = [R.choice(opts)() for _ in range(R.choice([0, 1, 1, 2, 3]))]
    return None if not parts else parts[0] if len(parts) == 1 and R.random() < .5 else P.Sequence(parts)

def rand_decoder():
    opts = [D.ByteLevel, lambda: D.Metaspace(replacement=R.choice(["▁", "_"]), prepend_scheme=R.choice(["always", "first", "never"]),
                                             split=R.random() < .5),
            lambda: D.WordPiece(prefix=R.choice(["##", "@@"]), cleanup=R.random() < .5), lambda: D.BPEDecoder(R.choice(["</w>", "_"])),
            D.ByteFallback, D.Fuse, lambda: D.Strip(R.choice([" ", "▁", "a"]), R.randint(0, 2), R.randint(0, 2)),
            lambda: D.Replace(R.choice(["▁", "_", "a"]), R.choice([" ", "", "b"])),
            lambda: D.CTC(pad_token=R.choice(["<pad>", "a"]), word_delimiter_token=R.choice(["|", "_"]), cleanup=R.random() < .5)]
    parts = [R.choice(opts)() for _ in range(R.choice([0, 1, 1, 2, 3, 4]))]
    return None if not parts else parts[0] if len(parts) == 1 and R.random() < .5 else D.Sequence(parts)

def rand_post(specials):
    a, b = (R.choice(specials), R.choice(specials)) if specials else (None, None)
    opts = [lambda: PP.ByteLevel(trim_offsets=R.random() < .5)]
    if specials:
        def tmpl():
            single = R.choice([f"{a} $A", f"$A {b}", f"{a} $A {b}", f"{a} $A:1 {b}:1", "$A"])
            return PP.TemplateProcessing(single=single, pair=f"{single} $B:1 {b}:1",
                                         special_tokens=[(t, tok_ids[t]) for t in dict.fromkeys([a, b])])
        opts += [tmpl, tmpl, lambda: PP.BertProcessing((b, tok_ids[b]), (a, tok_ids[a])),
                 lambda: PP.RobertaProcessing((b, tok_ids[b]), (a, tok_ids[a]), trim_offsets=R.random() < .5,
                                              add_prefix_space=R.random() < .5)]
    r = R.random()
    if r < .3: return None
    if r < .4: return PP.Sequence([opts[0](), R.choice(opts)()])
    return R.choice(opts)()

def build():
    kind = R.choice(["BPE", "BPE", "BPE", "Unigram", "Unigram", "WordPiece", "WordLevel"])
    specials = R.sample(ADDED[:9], R.randint(0, 4))
    unk = R.choice([None, "<unk>", "[UNK]"]) if kind != "Unigram" else R.choice(["<unk>", None])
    special_list = ([unk] if unk else []) + specials
    vocab_size = R.choice([60, 120, 300, 800])
    corpus = [text() for _ in range(400)]
    pre = rand_pretok()
    if kind == "BPE":
        prefix, suffix = R.choice([None, None, "##"]), R.choice([None, None, "</w>"])
        kw = {k: v for k, v in (("unk_token", unk), ("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix))
              if v is not None}
        tok = Tokenizer(models.BPE(fuse_unk=R.random() < .5, byte_fallback=R.random() < .3, **kw))
        alphabet = P.ByteLevel.alphabet() if R.random() < .5 else []
        kw = {k: v for k, v in (("continuing_subword_prefix", prefix), ("end_of_word_suffix", suffix),
                                 ("limit_alphabet", R.choice([None, 30]))) if v is not None}
        tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_list, initial_alphabet=alphabet,
                                 show_progress=False, **kw)
    elif kind == "Unigram":
        tok = Tokenizer(models.Unigram())
        tr = trainers.UnigramTrainer(vocab_size=max(vocab_size, 300), special_tokens=special_list, show_progress=False,
                                     **({"unk_token": unk} if unk else {}))
    elif kind == "WordPiece":
        tok = Tokenizer(models.WordPiece(unk_token=unk or "[UNK]", max_input_chars_per_word=R.choice([100, 8])))
        tr = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(dict.fromkeys([unk or "[UNK]"] + special_list)),
                                       continuing_subword_prefix=R.choice(["##", "@@"]), show_progress=False)
    else:
        tok = Tokenizer(models.WordLevel(unk_token=unk or "[UNK]"))
        tr = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=list(dict.fromkeys([unk or "[UNK]"] + special_list)),
                                       show_progress=False)
    tok.normalizer = rand_normalizer()
    if pre is not None: tok.pre_tokenizer = pre
    tok.train_from_iterator(corpus, tr)
    j = json.loads(tok.to_str())
    m = j["model"]
    if kind == "BPE":
        if m.get("byte_fallback"):  # byte fallback needs the 256 byte pieces in the vocab, as Llama's
            for b in range(256): m["vocab"].setdefault("<0x%02X>" % b, len(m["vocab"]))
        m["ignore_merges"] = R.random() < .3
    if kind == "Unigram" and R.random() < .3:
        m["byte_fallback"] = True
        for b in range(256): m["vocab"].append(["<0x%02X>" % b, 0.0])
    tok = Tokenizer.from_str(json.dumps(j))
    global tok_ids
    extra = [AddedToken(c, single_word=R.random() < .3, lstrip=R.random() < .3, rstrip=R.random() < .3,
                        normalized=R.random() < .5, special=False) for c in R.sample(ADDED, R.randint(0, 4))]
    tok.add_tokens(extra)
    more_special = [AddedToken(c, single_word=R.random() < .2, lstrip=R.random() < .3, rstrip=R.random() < .3,
                               normalized=R.random() < .3, special=True) for c in R.sample(ADDED[9:], R.randint(0, 2))]
    tok.add_special_tokens(more_special)
    tok_ids = {t: tok.token_to_id(t) for t in specials + [a.content for a in more_special] if tok.token_to_id(t) is not None}
    post = rand_post(list(tok_ids))
    if post is not None: tok.post_processor = post
    dec = rand_decoder()
    if dec is not None: tok.decoder = dec
    return tok

def run(d, cmd, flag, rows):
    inp = "".join(json.dumps(r) + "\n" for r in rows)
    a = ["build/verlc", cmd, "--tokenizer", d] + ([flag] if flag else [])
    r = subprocess.run(a, input=inp.encode(), capture_output=True)
    if r.returncode: return None, r.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["exit %d" % r.returncode]
    return [json.loads(l) for l in r.stdout.decode().split("\n") if l], None  # not splitlines: U+2028 is in the text

tmp = tempfile.mkdtemp()
stats = {"agree": 0, "differ": 0, "refused": 0, "python_error": 0}
for i in range(COUNT):
    if ONLY is not None and i not in ONLY: continue
    R.seed(SEED * 1000003 + i)  # each tokenizer's draws its own (the trainers' ties are not reproducible)
    try:  # the reference is the saved file loaded again (a tokenizer's in-memory state can hold more than it saves)
        tok = Tokenizer.from_str(build().to_str())
        texts = [text() for _ in range(40)]
        enc = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        encs = [tok.encode(t).ids for t in texts]
        vs = tok.get_vocab_size(with_added_tokens=True)
        idseq = enc + encs + [[R.randrange(vs) for _ in range(R.randint(0, 10))] for _ in range(40)]
        dec = [tok.decode(s, skip_special_tokens=False) for s in idseq]
        decs = [tok.decode(s, skip_special_tokens=True) for s in idseq]
    except BaseException as e:  # a configuration `tokenizers` itself cannot train or run (its panics included)
        if isinstance(e, KeyboardInterrupt): raise
        stats["python_error"] += 1
        continue
    d = os.path.join(tmp, "%03d" % i); os.makedirs(d)
    tok.save(os.path.join(d, "tokenizer.json"))
    problems, cases = [], []
    for name, cmd, flag, rows, want, key in [
            ("encode", "tokenize", None, [{"text": t} for t in texts], enc, "ids"),
            ("encode+special", "tokenize", "--add-special-tokens", [{"text": t} for t in texts], encs, "ids"),
            ("decode", "detokenize", None, [{"ids": s} for s in idseq], dec, "text"),
            ("decode-skip", "detokenize", "--skip-special-tokens", [{"ids": s} for s in idseq], decs, "text")]:
        got, err = run(d, cmd, flag, rows)
        if err is not None:
            problems.append(("refused", name, err[0])); break
        bad = [(r, w, g[key]) for r, w, g in zip(rows, want, got) if g[key] != w]
        if len(got) != len(want): bad.append(("line count", len(want), len(got)))
        cases += [{"check": name, "input": r, "want": w, "got": g} for r, w, g in bad]
        if bad: problems.append(("differ", name, "%d of %d, e.g. %s want %s got %s" % ((len(bad), len(rows)) + tuple(
            json.dumps(x, ensure_ascii=False) for x in bad[0])))); 
    if not problems:
        stats["agree"] += 1; shutil.rmtree(d); continue
    kind = problems[0][0]
    stats[kind] += 1
    comp = json.loads(tok.to_str())
    desc = "model=%s norm=%s pre=%s post=%s dec=%s" % (comp["model"]["type"], *[(comp.get(k) or {}).get("type") for k in
                                                        ("normalizer", "pre_tokenizer", "post_processor", "decoder")])
    for p in problems: print("%03d %s %s: %s [%s]" % (i, p[0], p[1], p[2], desc))
    if KEEP:
        os.makedirs(KEEP, exist_ok=True); shutil.copytree(d, os.path.join(KEEP, "%03d" % i), dirs_exist_ok=True)
        with open(os.path.join(KEEP, "%03d" % i, "cases.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    shutil.rmtree(d)
shutil.rmtree(tmp)
print("tokenizers:", COUNT, " ".join("%s %d" % kv for kv in stats.items()))
sys.exit(1 if stats["differ"] else 0)
