#!/usr/bin/env python3
"""Builds the small synthetic tokenizer.json files under tests/tokenizer/data/ with the Python `tokenizers`
library and records its encodings (encode_reference.jsonl: text, ids, ids_with_special, decoded), so the C
tests cover models and components that the real fixtures do not use (WordPiece, Unigram, Metaspace,
Digits, Punctuation, Split behaviours, Replace/Strip/Lowercase/NFKC, TemplateProcessing, BertProcessing).
usage: scripts/make_tok_synthetic.py [NAME ...]  (run from the repo root; needs `pip install tokenizers`; NAMEs: write
only those folders)"""
import json, os, sys
from tokenizers import Tokenizer, Regex, AddedToken, models, normalizers as N, pre_tokenizers as P, decoders as D, processors, trainers

OUT = "tests/tokenizer/data"
CORPUS = [l for r in map(json.loads, open("../shared/data/gsm8k/test.jsonl", encoding="utf-8")) for l in (r["question"], r["answer"])][:400]
TEXTS = ["", " ", "Hello World", "  Hello   World  ", "HELLO, world! It's 12345 o'clock.", "naïve café ÅÅ ﬁ ２３",
         "a-b_c  d\te\nf", "$18.50 + 25% = ?", "<<16-3-4=9>>9 eggs", "[CLS] hi [SEP]", "unknown ☃ snowman",
         "The answer is #### 42", "tab\tand\nnewline\r\nend   ", "x" * 60, "mixed中English"] + CORPUS[:30]

ONLY = set(sys.argv[1:])

def save(name, tok, texts=TEXTS, id_lists=()):
    """Writes NAME/tokenizer.json and its references, computed by the saved file loaded again (a tokenizer's in-memory
    state can hold more than it saves); id_lists add decode-only rows."""
    if ONLY and name not in ONLY:
        return
    d = os.path.join(OUT, name); os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "encode_reference.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = tok.encode(t, add_special_tokens=False).ids
            f.write(json.dumps({"text": t, "ids": ids, "ids_with_special": tok.encode(t).ids,
                                "decoded": tok.decode(ids, skip_special_tokens=False),
                                "decoded_skip": tok.decode(ids, skip_special_tokens=True)}, ensure_ascii=False) + "\n")
        for ids in id_lists:
            f.write(json.dumps({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                                "decoded_skip": tok.decode(ids, skip_special_tokens=True)}, ensure_ascii=False) + "\n")

# WordPiece, BERT-style pipeline without BertNormalizer
wp = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=20))
wp.normalizer = N.Sequence([N.NFKC(), N.Lowercase(), N.Strip()])
wp.pre_tokenizer = P.BertPreTokenizer()
wp.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]"]))
wp.post_processor = processors.BertProcessing(("[SEP]", wp.token_to_id("[SEP]")), ("[CLS]", wp.token_to_id("[CLS]")))
wp.decoder = D.WordPiece()
save("wordpiece", wp)

# Unigram with Metaspace (prepend first, split) and individual digits
ug = Tokenizer(models.Unigram())
ug.normalizer = N.Sequence([N.NFKC(), N.Replace(Regex(r"\s+"), " ")])
ug.pre_tokenizer = P.Sequence([P.Digits(individual_digits=True), P.Metaspace(replacement="▁", prepend_scheme="first", split=True)])
ug.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>"))
ug.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", 1), ("</s>", 2)])
ug.decoder = D.Metaspace(replacement="▁", prepend_scheme="first")
ug.add_tokens(["####"])
save("unigram_metaspace", ug)

# BPE with Split behaviours, Punctuation, Contiguous digits, lowercase, suffix-free merges
bp = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##"))
bp.normalizer = N.Sequence([N.Lowercase(), N.Replace("  ", " ")])
bp.pre_tokenizer = P.Sequence([P.WhitespaceSplit(), P.Split(Regex(r"[0-9]+"), behavior="merged_with_previous"),
                               P.Punctuation(behavior="isolated"), P.Split("-", behavior="removed", invert=False)])
bp.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "<bos>"], continuing_subword_prefix="##"))
bp.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
bp.decoder = D.WordPiece(prefix="##")
bp.add_special_tokens(["<tool>"])
bp.add_tokens(["HeLLo"])  # normalized (non-special): matched as "hello" after Lowercase
save("bpe_split", bp, TEXTS + ["call <tool> now", "<tool><tool>x", "say HELLO or hello or HeLLo"])

# WordPiece with Whitespace pre-tokenizer, Split invert + merged_with_next, Strip decoder chain
w2 = Tokenizer(models.WordPiece(unk_token="[UNK]"))
w2.pre_tokenizer = P.Sequence([P.Split(Regex(r"\s+"), behavior="merged_with_next", invert=False), P.Whitespace(),
                               P.Digits(individual_digits=False)])
w2.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=250, special_tokens=["[UNK]"]))
w2.decoder = D.Sequence([D.WordPiece(), D.Strip(" ", 1, 1)])
save("wordpiece_ws", w2)
# BERT: BertNormalizer (clean text, CJK padding, accents stripped, lowercase), StripAccents in a sequence
bt = Tokenizer(models.WordPiece(unk_token="[UNK]"))
bt.normalizer = N.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True)
bt.pre_tokenizer = P.BertPreTokenizer()
bt.train_from_iterator(CORPUS + ["中文 naïve café 日本"], trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
bt.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
bt.decoder = D.WordPiece()
save("bert", bt, TEXTS + ["ctrl\x07chars\u200b here\ufffd", "中文字 naïve ÉCOLE"])

sa = Tokenizer(models.WordPiece(unk_token="[UNK]"))
sa.normalizer = N.Sequence([N.NFD(), N.StripAccents(), N.NFC()])
sa.pre_tokenizer = P.WhitespaceSplit()
sa.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]"]))
save("strip_accents", sa)
# Unigram tokenizer.json converted from the shared SentencePiece unigram model, as transformers converts
# T5/ALBERT-style models: Precompiled normalizer (the model's nmt_nfkc charsmap), WhitespaceSplit + Metaspace
import base64
def pb_fields(b):
    i = 0
    while i < len(b):
        key = 0; sh = 0
        while True:
            c = b[i]; i += 1; key |= (c & 0x7F) << sh; sh += 7
            if c < 0x80: break
        num, wt = key >> 3, key & 7
        if wt == 0:
            v = 0; sh = 0
            while True:
                c = b[i]; i += 1; v |= (c & 0x7F) << sh; sh += 7
                if c < 0x80: break
            yield num, v
        elif wt == 2:
            n = 0; sh = 0
            while True:
                c = b[i]; i += 1; n |= (c & 0x7F) << sh; sh += 7
                if c < 0x80: break
            yield num, b[i:i + n]; i += n
        elif wt == 5: yield num, b[i:i + 4]; i += 4
        elif wt == 1: yield num, b[i:i + 8]; i += 8
import struct
raw = open("../shared/fixtures/tokenizers/spm_unigram_nfkc/tokenizer.model", "rb").read()
vocab, charsmap, unk = [], b"", 0
for num, v in pb_fields(raw):
    if num == 1:
        f = dict(pb_fields(v)); vocab.append([f[1].decode(), struct.unpack("<f", f.get(2, b"\0\0\0\0"))[0]])
        if f.get(3) == 2: unk = len(vocab) - 1
    if num == 3: charsmap = dict(pb_fields(v)).get(2, b"")
j = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
     "normalizer": {"type": "Sequence", "normalizers": [
         {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(charsmap).decode()},
         {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
     "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
     "post_processor": None, "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
     "model": {"type": "Unigram", "unk_id": unk, "vocab": vocab, "byte_fallback": False}}
pc = Tokenizer.from_str(json.dumps(j))
save("unigram_precompiled", pc, TEXTS + ["ｆｕｌｌ　ｗｉｄｔｈ ①②③ ﬁ ㍻ ½", "e\u0301 a\u030a Å K"])
# GPT-2 / RoBERTa style: ByteLevel pre-tokenizer with add_prefix_space and its own regex, RobertaProcessing,
# an added special token in the middle of words, a normalized added token
gp = Tokenizer(models.BPE())
gp.pre_tokenizer = P.ByteLevel(add_prefix_space=True, use_regex=True)
gp.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=500, special_tokens=["<s>", "</s>", "<pad>"],
                                                   initial_alphabet=P.ByteLevel.alphabet()))
gp.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0), add_prefix_space=True)
gp.decoder = D.ByteLevel()
gp.add_special_tokens(["<|endoftext|>"])
gp.add_tokens([" dozen"])
save("gpt2_style", gp, TEXTS + ["Hello<|endoftext|>world", "a dozen eggs, two dozen", "<|endoftext|> lead", "tail <|endoftext|>"])
# Qwen3.5's pipeline (transformers' Qwen3_5Tokenizer): NFC, its own split regex (letters with their combining marks, one
# digit at a time, punctuation runs carrying their line breaks), then byte-level without a regex; trained on the corpus
# and texts with combining marks, so that \p{M}, NFC and the CR/LF runs decide the splits
Q35 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
MARKS = ["नमस्ते दुनिया, यह एक परीक्षा है।", "ภาษาไทย สวัสดีครับ", "e\u0301te\u0301 cafe\u0301 na\u0308ive", "Ångström ÅA\u030a",
         "Tiếng Việt có dấu: người, được, những", "عَرَبِيّ مُشَكَّل", "x\u0301\u0302\u0303y 12\u0301 3", "He said: \"2024!\"\r\n\r\nOK?!\n",
         "I'M HERE, YOU'LL SEE; it's they'RE", "a 1234567 b 3.14159 c ١٢٣ d ۴۵۶", "emoji 👍🏽 and 🇫🇷 flags", "tabs\t\tand   spaces  \n"]
q5 = Tokenizer(models.BPE())
q5.normalizer = N.NFC()
q5.pre_tokenizer = P.Sequence([P.Split(Regex(Q35), behavior="isolated", invert=False),
                               P.ByteLevel(add_prefix_space=False, use_regex=False)])
q5.train_from_iterator(CORPUS + MARKS * 3, trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>"],
                                                               initial_alphabet=P.ByteLevel.alphabet()))
q5.decoder = D.ByteLevel()
q5.add_special_tokens(["<|im_start|>", "<|im_end|>"])
save("qwen3_5_style", q5, TEXTS + MARKS + ["<|im_start|>user\nनमस्ते<|im_end|>\n", "e\u0301" * 5, "\r\n\r\n\r\n", "1\u0301\u0301"])

# Added-token matching as tokenizers' AddedVocabulary does it (tools/fuzz/diff_tokcfg.py found each): leftmost-longest
# matches that never overlap (a match refused as not a single word still consumes its text); rstrip widening over a
# later match (its token repeated) and lstrip clamped to nothing (the token dropped); Unicode white space for the
# strips and Unicode \w for single_word
ae = Tokenizer(models.BPE())
ae.pre_tokenizer = P.ByteLevel(add_prefix_space=False, use_regex=True)
ae.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, initial_alphabet=P.ByteLevel.alphabet(), show_progress=False))
ae.add_tokens([AddedToken("  ", single_word=True, normalized=False), AddedToken("ab", single_word=True, normalized=False)])
ae.add_special_tokens([AddedToken("\t\t", rstrip=True), AddedToken("\t ", lstrip=True),
                       AddedToken("<sep>", lstrip=True, rstrip=True)])
save("added_edges", ae, ["Hello   World", "a   b", "x    y", "4    \n", "\t\t\t\t", "\t\t\t\tz", "\t\t\t x", "q\t\t\t\t\t\t\tr",
                         "a\u3000<sep>\u00a0b", "a\u2003 <sep>\u2029\u0085b", "éab", "\u3000ab\u3000", "½ab½", "_ab", "ab", "xab ab aby",
                         "中ab", "Ⓐab", "١ab"])

# Decoding by string, as tokenizers does: skip_special_tokens drops any id whose string is a special token's content
# (a model piece too), a normalized special token decodes as its normalized form (and so is kept), an added token's
# content wins over a model piece of the same id; WordLevel, Nmt, StripAccents over all marks, CharDelimiterSplit,
# FixedLength, CTC and BPEDecoder
wl_vocab = {"[UNK]": 0, "<s>": 1, "</s>": 2, "hello": 3, "world": 4, "x": 5, "y": 6, "<pad>": 7, "|": 8, "<sep>": 9,
            "ab</w>": 10, "c</w>": 11, "ह": 12, "नद": 13, "hnd": 14, "cafe": 15, " tab": 16, "a</w>b": 17}
dj = {"version": "1.0", "truncation": None, "padding": None,
      "added_tokens": [{"id": 1, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
                       {"id": 2, "content": "</s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
                       {"id": 20, "content": "<sep>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True},
                       {"id": 21, "content": "\tTAB", "single_word": False, "lstrip": False, "rstrip": False, "normalized": True, "special": True},
                       {"id": 5, "content": "zzz", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False}],
      "normalizer": {"type": "Sequence", "normalizers": [{"type": "Nmt"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "CharDelimiterSplit", "delimiter": " "}, {"type": "FixedLength", "length": 5}]},
      "post_processor": None,
      "decoder": {"type": "Sequence", "decoders": [{"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
                                                   {"type": "BPEDecoder", "suffix": "</w>"}]},
      "model": {"type": "WordLevel", "vocab": wl_vocab, "unk_token": "[UNK]"}}
dt = Tokenizer.from_str(json.dumps(dj))
save("decode_edges", dt, ["hello world", "helloworld", "Hello\tWorld", "hi\u200bx", "हिन्दी", "hnd", "café", "zzz x", "\tTAB <s>",
                          "<sep>hello", "a\x07b", "x\u2581y"],
     [[9], [20], [21], [5], [1, 3, 3, 7, 8, 4, 2], [10, 11], [10, 10, 11, 17], [3, 8, 8, 4], [7, 7], [16, 21, 16], [9, 3, 20, 4, 1]])

# Unigram scores as f64 (tokenizers keeps them so): with these scores float32 path sums pick another split of 7 spaces
uj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
      "post_processor": None, "decoder": None,
      "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": False, "vocab": [["<unk>", 0.0]] + [
          [" ", -5.903178784216698], ["  ", -3.52710186824022], ["   ", -5.992544726878883], ["x", -2.548350267381695],
          ["xx", -1.3848535235270596], ["y", -3.9988140439830033], ["$1", -1.1568888108765887], ["$18", -1.986924282142097],
          ["#", -3.039680678084954]]}}
save("unigram_f64", Tokenizer.from_str(json.dumps(uj)), [" " * 7, " " * 11, "x       xx", "$18   #", "y" + " " * 9 + "y"])

# Metaspace "first" prepends only to a piece at original offset 0: not after Strip dropped leading spaces
mf = Tokenizer(models.WordLevel({"[UNK]": 0, "▁hello": 1, "hello": 2, "▁world": 3, "world": 4}, unk_token="[UNK]"))
mf.normalizer = N.Strip()
mf.pre_tokenizer = P.Metaspace(prepend_scheme="first")
mf.add_special_tokens(["<s>"])
save("metaspace_first_strip", mf, ["hello world", "  hello world", "\thello", "<s>hello", "hello<s>world", " <s> hello"])
mr = Tokenizer(models.WordLevel({"[UNK]": 0, "▁hello": 1, "hello": 2, "▁world": 3, "world": 4, "▁": 5, "▁é": 6, "é": 7},
                                unk_token="[UNK]"))
mr.normalizer = N.Sequence([N.Replace("  ", ""), N.NFC()])  # two spaces dropped; e + U+0301 composed with what follows
mr.pre_tokenizer = P.Metaspace(prepend_scheme="first")
save("metaspace_first_replace", mr, ["hello world", "  hello world", "    hello", " hello", "e\u0301", "e\u0301 world",
                                     "  e\u0301"])

# transformers' clean_up_tokenization_spaces (tokenizer_config.json): applied to decoded text but, from 5.7 on, not to a
# BPE model's unless clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output; references from
# transformers' own decode
def save_with_config(name, tok, cfg, texts):
    if ONLY and name not in ONLY:
        return
    from transformers import AutoTokenizer
    d = os.path.join(OUT, name); os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)
    at = AutoTokenizer.from_pretrained(d)
    with open(os.path.join(d, "encode_reference.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            ids = at(t, add_special_tokens=False)["input_ids"]
            f.write(json.dumps({"text": t, "ids": ids, "decoded": at.decode(ids), "decoded_skip": at.decode(ids, skip_special_tokens=True)},
                               ensure_ascii=False) + "\n")
CLEAN = ["Hello , world . I do n't know ? It 's fine !", "a ' b ' c", "We 're sure you 've done it , I 'm told .", "do not . . ."]
cu = Tokenizer(models.Unigram())
cu.pre_tokenizer = P.Metaspace()
cu.decoder = D.Metaspace()
cu.train_from_iterator(CORPUS + CLEAN * 5, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<unk>", "<s>"], unk_token="<unk>", show_progress=False))
save_with_config("clean_up_unigram", cu, {"clean_up_tokenization_spaces": True, "tokenizer_class": "PreTrainedTokenizerFast"}, CLEAN)
cb = Tokenizer(models.BPE())
cb.pre_tokenizer = P.ByteLevel(add_prefix_space=False)
cb.decoder = D.ByteLevel()
cb.train_from_iterator(CORPUS + CLEAN * 5, trainers.BpeTrainer(vocab_size=400, initial_alphabet=P.ByteLevel.alphabet(), show_progress=False))
save_with_config("clean_up_bpe", cb, {"clean_up_tokenization_spaces": True, "tokenizer_class": "PreTrainedTokenizerFast"}, CLEAN)
save_with_config("clean_up_bpe_forced", cb, {"clean_up_tokenization_spaces": True, "tokenizer_class": "PreTrainedTokenizerFast",
                                              "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True}, CLEAN)
print("ok")
