/* libFuzzer harness for a JSONL dataset in verl's row schema (not a CTest program; scripts/fuzz.sh builds and runs
 * it): the rows through vc_rl_dataset_load with the qwen3 or llama3 tokenizer and chat template. Input: the first
 * byte picks the tokenizer, the truncation, max_prompt_length and filter_overlong_prompts; the rest is the file. */
#include "verlc/chat_template.h"
#include "verlc/tokenizer.h"
#include "verlc/trainer.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static vc_tokenizer *tok[2];
static vc_chat_template *tmpl[2];
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    static const char *names[2] = { "qwen3", "llama3" };
    const char *sh = getenv("VERLC_SHARED") ? getenv("VERLC_SHARED") : "../shared";
    for (int i = 0; i < 2; i++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/%s", sh, names[i]);
        if (vc_tokenizer_load(dir, &tok[i]) || vc_chat_template_load(dir, &tmpl[i])) {
            fprintf(stderr, "%s\n", vc_last_error());
            abort();
        }
    }
    snprintf(path, sizeof path, "/tmp/vc_fuzz_dataset_%d.jsonl", (int)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *const trunc[4] = { "error", "left", "right", "middle" };
    if (size < 1) return 0;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 1, 1, size - 1, f);
    fclose(f);
    const int w = data[0] & 1;
    vc_rl_data_opts o = { 0 };
    o.prompt_key = "prompt";
    o.max_prompt_length = (data[0] >> 3 & 15) * 4;
    o.filter_overlong = data[0] >> 7;
    o.truncation = trunc[data[0] >> 1 & 3];
    o.max_samples = -1;
    o.need_ground_truth = 1;
    vc_rl_dataset *d = NULL;
    if (!vc_rl_dataset_load(path, tok[w], tmpl[w], &o, &d)) vc_rl_dataset_free(d);
    unlink(path);
    return 0;
}
