/* Internal structures of the tokenizer module. */
#ifndef VC_TOK_INTERNAL_H
#define VC_TOK_INTERNAL_H
#include <pthread.h>
#include <stdint.h>
#include <stddef.h>
#include <oniguruma.h>
#include "verlc/core.h"
#include "verlc/tokenizer.h"

/* ---- growable buffers (tok_util.c) ---- */
typedef struct { char *p; size_t n, cap; } tk_buf;
int tk_buf_put(tk_buf *b, const void *s, size_t n); /* 0 ok, -1 out of memory */
int tk_buf_putc(tk_buf *b, char c);
void tk_buf_free(tk_buf *b);

typedef struct { int32_t *v; size_t n, cap; } tk_ids;
int tk_ids_push(tk_ids *a, int32_t id);

/* A list of byte strings stored back to back in one buffer; flag bit 1: piece starts the original text. */
typedef struct { tk_buf buf; size_t *off, *len; uint8_t *flag; size_t n, cap; } tk_pieces;
int tk_pieces_add(tk_pieces *p, const char *s, size_t n, uint8_t flag);
void tk_pieces_clear(tk_pieces *p);
void tk_pieces_free(tk_pieces *p);
#define TK_PIECE(ps, i) ((ps)->buf.p + (ps)->off[i])

/* UTF-8: length of the character at s (1 for an invalid byte), *cp receives the code point or -1. */
int tk_utf8_next(const unsigned char *s, size_t n, int32_t *cp);
int tk_utf8_encode(uint32_t cp, char out[4]);
/* Appends s with invalid sequences replaced as Rust's String::from_utf8_lossy does. */
int tk_utf8_lossy(tk_buf *out, const char *s, size_t n);
int tk_is_space_cp(int32_t cp); /* Unicode White_Space */
int tk_is_word_cp(int32_t cp);
int tk_clean_up_spaces(tk_buf *b); /* transformers' clean_up_tokenization; 0 ok, -1 out of memory */  /* Unicode \\w (Rust regex's) */

/* ---- string -> int hash map and pair map (tok_util.c) ---- */
typedef struct { char *k; uint32_t klen; uint32_t h; int32_t v; } tk_ent;
/* the keys' bytes lie in blocks the map owns (a tokenizer's 150k pieces: a few allocations, not one each) */
typedef struct { tk_ent *e; uint32_t cap, n; char *block; size_t block_used, block_cap; } tk_smap;
int tk_smap_put(tk_smap *m, const char *k, size_t klen, int32_t v); /* overwrites; 0 ok, -1 nomem */
int tk_smap_reserve(tk_smap *m, size_t n); /* room for n entries without regrowing; 0 ok, -1 nomem */
int32_t tk_smap_get(const tk_smap *m, const char *k, size_t klen);   /* -1 if absent */
void tk_smap_free(tk_smap *m);

typedef struct { uint64_t *k; int32_t *rank, *out; uint32_t cap, n; } tk_pmap;
int tk_pmap_put(tk_pmap *m, int32_t a, int32_t b, int32_t rank, int32_t out);
int tk_pmap_reserve(tk_pmap *m, size_t n); /* room for n pairs without regrowing; 0 ok, -1 nomem */
int tk_pmap_get(const tk_pmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *out); /* 1 found */
void tk_pmap_free(tk_pmap *m);

/* ---- normalizers (tok_norm.c) ---- */
enum { TK_N_NFC = 1, TK_N_NFKC, TK_N_NFD, TK_N_NFKD, TK_N_LOWER, TK_N_PREPEND, TK_N_REPLACE, TK_N_STRIP,
       TK_N_SEQ, TK_N_PRECOMPILED, TK_N_STRIP_ACCENTS, TK_N_BERT, TK_N_NMT, TK_N_BYTELEVEL };
typedef struct tk_norm {
    int type;
    char *a, *b;        /* Prepend: a; Replace: pattern a (literal) -> b */
    regex_t *re;        /* Replace with a Regex pattern */
    int left, right;    /* Strip; BertNormalizer: left = clean_text, right = handle_chinese_chars */
    int strip_accents, lowercase; /* BertNormalizer */
    struct tk_charsmap *cm;
    struct tk_norm **kids;
    int n_kids;
} tk_norm;
int tk_norm_apply(const tk_norm *n, const char *s, size_t len, tk_buf *out); /* 0 ok */
void tk_norm_free(tk_norm *n);

/* SentencePiece precompiled charsmap (double-array trie + replacement strings). */
typedef struct tk_charsmap { uint32_t *units; size_t n_units; const char *norm; size_t norm_len; char *blob; } tk_charsmap;
vc_status tk_charsmap_load(const char *data, size_t len, tk_charsmap **out, const char *what);
/* Longest match at s: returns consumed bytes (0 if none) and sets *rep and *rep_len to the replacement. */
size_t tk_charsmap_match(const tk_charsmap *cm, const char *s, size_t n, const char **rep, size_t *rep_len);
/* The shortest match instead (what tokenizers' Precompiled uses); the same return convention. */
size_t tk_charsmap_first(const tk_charsmap *cm, const char *s, size_t n, const char **rep, size_t *rep_len);
void tk_charsmap_free(tk_charsmap *cm);

/* ---- pre-tokenizers (tok_pretok.c) ---- */
enum { TK_P_SPLIT = 1, TK_P_BYTELEVEL, TK_P_DIGITS, TK_P_METASPACE, TK_P_WHITESPACE, TK_P_WSSPLIT,
       TK_P_PUNCT, TK_P_SEQ, TK_P_BERT, TK_P_FIXED };
enum { TK_B_REMOVED, TK_B_ISOLATED, TK_B_MERGED_PREV, TK_B_MERGED_NEXT, TK_B_CONTIGUOUS };
enum { TK_PS_ALWAYS, TK_PS_FIRST, TK_PS_NEVER };
typedef struct tk_pretok {
    int type;
    regex_t *re;           /* Split regex, ByteLevel use_regex, Whitespace */
    char *lit; size_t lit_len; /* Split with a String pattern */
    int behavior, invert;
    int fast;              /* TK_FAST_* for `re` */
    int add_prefix_space, use_regex, individual_digits, prepend_scheme, split;
    int length;            /* FixedLength: characters per piece */
    char *repl;            /* Metaspace replacement */
    struct tk_pretok **kids;
    int n_kids;
} tk_pretok;
int tk_pretok_apply(const tk_pretok *p, tk_pieces *in, tk_pieces *tmp); /* result in `in` */
int tk_pretok_uses_first(const tk_pretok *p); /* a Metaspace with prepend_scheme "first" in it */
void tk_pretok_free(tk_pretok *p);
regex_t *tk_regex_new(const char *pat, size_t len, char *err, size_t errlen);
extern const char *tk_bytelevel_char[256]; /* UTF-8 of the char each byte maps to */
int tk_bytelevel_init(void);
int tk_bytelevel_byte(int32_t cp); /* byte for a byte-level char, -1 if none */

/* ---- fast ASCII paths of common pre-tokenizer regexes (tok_fastre.c) ---- */
enum { TK_FAST_NONE, TK_FAST_LLAMA3, TK_FAST_QWEN2, TK_FAST_GPT2 };
int tk_fastre_kind(const char *pat, size_t len);
int tk_fastre_spans(int kind, const char *s, size_t n, size_t base, int (*add)(void *, size_t, size_t), void *arg);
/* Match spans (start, end pairs) of a regex over s, with the fast path `fast` for ASCII runs (0: none). */
int tk_regex_spans(regex_t *re, int fast, const char *s, size_t n, size_t **v, size_t *nv);

/* ---- decoders (tok_decode.c) ---- */
enum { TK_D_BYTELEVEL = 1, TK_D_REPLACE, TK_D_BYTEFALLBACK, TK_D_FUSE, TK_D_STRIP, TK_D_METASPACE, TK_D_SEQ,
       TK_D_WORDPIECE, TK_D_BPE, TK_D_CTC };
typedef struct tk_dec {
    int type;
    char *a, *b;          /* Replace a->b; Strip content a; Metaspace replacement a; WordPiece prefix a; BPEDecoder
                           * suffix a; CTC pad a, word delimiter b */
    int start, stop, prepend_scheme, cleanup;
    struct tk_dec **kids;
    int n_kids;
} tk_dec;
void tk_dec_free(tk_dec *d);

/* ---- added tokens ---- */
typedef struct {
    char *s; size_t len; int32_t id;
    uint8_t special, lstrip, rstrip, normalized, single_word;
    uint8_t special_set; /* its content is in tokenizers' set of special contents (decode's skip_special_tokens) */
} tk_added;

enum { TK_M_BPE = 1, TK_M_UNIGRAM, TK_M_WORDPIECE, TK_M_WORDLEVEL };
enum { TK_SRC_JSON = 1, TK_SRC_SPM };
enum { TK_SP_NORMAL = 1, TK_SP_UNKNOWN, TK_SP_CONTROL, TK_SP_USER, TK_SP_UNUSED, TK_SP_BYTE };

#define TK_CACHE_SHARDS 64
typedef struct { pthread_mutex_t mu; tk_smap map; int32_t **vals; uint32_t *nvals; uint32_t n, cap; } tk_cache_shard;

typedef struct { int32_t id; int is_seq; } tk_tmpl_item; /* is_seq: the sequence A; else a special token id */

struct vc_tokenizer {
    int src, model;
    /* vocabulary: model vocab plus added tokens */
    char **tok; uint32_t *tok_len; int n_tok;  /* id -> token (may be NULL for holes) */
    tk_smap vocab;                              /* model vocab token -> id */
    uint8_t *is_special;                        /* per id */
    int clean_up;                               /* transformers' clean_up_tokenization on decoded text */
    int hf_ids;                                 /* added token ids assigned as tokenizers does (tokenizer.json) */
    int32_t n_model_vocab;                      /* the model's vocabulary size as tokenizers counts it */
    int first_flag;                             /* the pre-tokenizer asks for the first piece (Metaspace "first") */
    uint8_t *dec_skip;                          /* per id: left out by decode(skip_special_tokens) (tokenizer.json) */
    /* BPE */
    tk_pmap merges;
    int32_t unk_id, byte_ids[256];
    int byte_fallback, fuse_unk, ignore_merges;
    int tiktoken; /* BPE by rank: any adjacent pair whose concatenation is a token merges, lowest id first */
    char *cont_prefix, *eow_suffix;
    /* Unigram / SentencePiece */
    double *score; uint8_t *ptype; int n_pieces; int max_piece_len; double min_score, max_score; /* f64 as tokenizers keeps them */
    int32_t *user_ids; int n_user;              /* SentencePiece user-defined symbols */
    int add_dummy_prefix, remove_extra_ws, escape_ws, treat_ws_suffix;
    char *unk_surface;
    tk_charsmap *spm_cm;
    /* WordPiece */
    int wp_max_chars;
    /* added tokens: sorted by length desc for matching; lookup map by content */
    tk_added *added; int n_added;
    tk_smap added_map;
    /* added-token matching, per kind (0: matched on raw text, 1: on normalized text): content -> index,
     * distinct lengths in decreasing order, and which bytes can start a token */
    tk_smap added_kind[2];
    uint32_t *added_lens[2]; int n_added_lens[2];
    uint8_t added_first[2][256];
    /* pipeline */
    tk_norm *norm; tk_pretok *pre; tk_dec *dec;
    tk_tmpl_item *tmpl; int n_tmpl; int has_post;
    int bos_id, eos_id, pad_id, add_bos, add_eos;
    int32_t prefix_ids[2]; int n_prefix;        /* SentencePiece: written first by add_special_tokens (ChatGLM3) */
    tk_cache_shard *cache;
};

/* loaders */
vc_status tk_load_json(vc_tokenizer *t, const char *path);
struct cJSON;
vc_status tk_load_json_root(vc_tokenizer *t, const struct cJSON *root, const char *path); /* path: for messages */
/* tiktoken rank files (Qwen1's qwen.tiktoken, GLM-4's tokenizer.model), tok_tiktoken.c */
int tk_is_tiktoken(const char *path);
vc_status tk_load_tiktoken(vc_tokenizer *t, const char *path, const char *config_path);
vc_status tk_load_spm(vc_tokenizer *t, const char *path);
/* tokenizer_config.json beside a SentencePiece model, as transformers' slow tokenizers take it (tok_spm_config.c) */
vc_status tk_spm_config(vc_tokenizer *t, const char *config_path);
/* Sets id -> token (growing the table); with `model`, also token -> id in the model vocab. */
vc_status tk_vocab_set(vc_tokenizer *t, int id, const char *s, size_t len, int model);

/* models: encode one pre-tokenized word and append ids */
int tk_bpe_word(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out);
int tk_unigram_word(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out);
int tk_wordpiece_word(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out);
int tk_spm_bpe(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out);
int tk_spm_encode(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out); /* added tokens split out first */
int tk_spm_encode_text(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out);
int tk_spm_decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip, tk_buf *out);
int tk_json_encode(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out);
int tk_json_decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip, tk_buf *out);
/* cache */
int tk_cache_get(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out);
void tk_cache_put(const vc_tokenizer *t, const char *w, size_t n, const int32_t *ids, size_t k);
void tk_cache_free(vc_tokenizer *t);
#endif
