/* verlc tokenizer: Hugging Face tokenizer.json and SentencePiece tokenizer.model, encode/decode with
 * exact parity with the `tokenizers` and `sentencepiece` libraries. */
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
