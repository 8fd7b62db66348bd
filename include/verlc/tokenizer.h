/* verlc tokenizer: Hugging Face tokenizer.json and SentencePiece tokenizer.model, encode/decode with
 * exact parity with the `tokenizers` and `sentencepiece` libraries.
 *
 * tokenizer.json: models BPE (byte-level or SentencePiece-style: byte_fallback, fuse_unk, ignore_merges,
 * continuing_subword_prefix, end_of_word_suffix), WordPiece, Unigram; normalizers NFC, NFKC, NFD, NFKD,
 * Lowercase, Prepend, Replace, Strip, StripAccents, BertNormalizer, Precompiled, Sequence; pre-tokenizers
 * Split (Oniguruma, as tokenizers), ByteLevel, Digits, Metaspace, Whitespace, WhitespaceSplit, Punctuation,
 * BertPreTokenizer, Sequence; post-processors TemplateProcessing (single), BertProcessing, RobertaProcessing,
 * ByteLevel, Sequence; decoders ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece, Sequence;
 * added tokens (special, lstrip, rstrip, normalized, single_word), longest match first.
 * tokenizer.model: BPE and Unigram, byte fallback, user-defined and control symbols, precompiled charsmap,
 * add_dummy_prefix, remove_extra_whitespaces; add_special_tokens adds BOS (and EOS when tokenizer_config.json
 * sets add_eos_token; add_bos_token false turns BOS off). For tokenizer.json the post-processor alone decides
 * what add_special_tokens adds, as in `tokenizers`. */
#ifndef VERLC_TOKENIZER_H
#define VERLC_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "verlc/core.h"

typedef struct vc_tokenizer vc_tokenizer;

/* Loads DIR/tokenizer.json (preferred) or DIR/tokenizer.model, plus DIR/tokenizer_config.json when present.
 * DIR may also be the path of one of those files. */
vc_status vc_tokenizer_load(const char *dir, vc_tokenizer **out);
void vc_tokenizer_free(vc_tokenizer *t);

/* Encodes `len` bytes of text (any bytes; invalid UTF-8 is handled as the reference libraries do for
 * byte-level models). Thread-safe on one tokenizer. The caller frees *ids with free(). */
vc_status vc_tokenizer_encode(const vc_tokenizer *t, const char *text, size_t len, int add_special_tokens,
                              int32_t **ids, size_t *n_ids);
/* Decodes ids into a NUL-terminated UTF-8 string (*len excludes the NUL). The caller frees *text. */
vc_status vc_tokenizer_decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip_special_tokens,
                              char **text, size_t *len);

int vc_tokenizer_vocab_size(const vc_tokenizer *t); /* including added tokens */
int vc_tokenizer_token_to_id(const vc_tokenizer *t, const char *token); /* -1 if absent */
const char *vc_tokenizer_id_to_token(const vc_tokenizer *t, int id);    /* NULL if out of range */
int vc_tokenizer_is_special(const vc_tokenizer *t, int id);
int vc_tokenizer_bos_id(const vc_tokenizer *t); /* -1 if none */
int vc_tokenizer_eos_id(const vc_tokenizer *t);
int vc_tokenizer_pad_id(const vc_tokenizer *t);
int vc_tokenizer_unk_id(const vc_tokenizer *t);

#endif
