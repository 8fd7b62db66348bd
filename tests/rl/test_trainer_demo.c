/* The demo's building blocks: its tokenizer.json loads in the tokenizer library and agrees with the
 * demo's own character codes both ways, its chat template renders the bare prompt, its datasets are
 * valid verl rows with correct sums, and its reward (exact match) scores them. */
#include "../../src/rl/demo_internal.h"
#include "verlc/chat_template.h"
#include "verlc/data.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    char dir[128], *p;
    snprintf(dir, sizeof dir, "/tmp/verlc_tdemo_%d", (int)getpid());
    mkdir(dir, 0755);
    CHECK_OK(demo_write_tokenizer(dir));
    vc_tokenizer *tok = NULL;
    CHECK_OK(vc_tokenizer_load(dir, &tok));
    if (tok) {
        const char *text = "94+19=113";
        int32_t *ids = NULL, mine[16];
        size_t n = 0;
        CHECK_OK(vc_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n));
        int nm = demo_encode(text, mine);
        CHECK(n == (size_t)nm);
        for (int i = 0; i < nm && n == (size_t)nm; i++) CHECK(ids[i] == mine[i]);
        int32_t with_eos[16];
        memcpy(with_eos, mine, sizeof(int32_t) * nm);
        with_eos[nm] = 1;
        char *back = NULL;
        size_t bl = 0;
        CHECK_OK(vc_tokenizer_decode(tok, with_eos, (size_t)nm + 1, 1, &back, &bl));
        CHECK_MSG(back && !strcmp(back, text), "decoded `%s`", back ? back : "(null)");
        CHECK(vc_tokenizer_eos_id(tok) == 1);
        CHECK(vc_tokenizer_vocab_size(tok) == DEMO_VOCAB);
        free(ids);
        free(back);
        vc_tokenizer_free(tok);
    }
    vc_chat_template *t = NULL;
    CHECK_OK(vc_chat_template_load(dir, &t));
    cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"12+34=\"}]");
    char *out = NULL;
    vc_chat_opts o = { .add_generation_prompt = 1, .enable_thinking = -1 };
    if (t) CHECK_OK(vc_chat_template_render(t, msgs, &o, &out));
    CHECK_MSG(out && !strcmp(out, "12+34="), "rendered `%s`", out ? out : "(null)");
    free(out);
    cJSON_Delete(msgs);
    vc_chat_template_free(t);
    p = vc_path_join(dir, "val.jsonl");
    CHECK_OK(demo_write_dataset(p, 5, 1, 50));
    vc_jsonl *d = NULL;
    CHECK_OK(vc_jsonl_read(p, VC_JSONL_STRICT, &d));
    if (d) {
        CHECK(d->n_rows == 50);
        CHECK_OK(vc_verl_check(d, 1));
        for (size_t i = 0; i < d->n_rows; i++) {
            vc_verl_row r;
            CHECK_OK(vc_verl_row_get(d, i, &r));
            int a = 0, b = 0;
            CHECK(sscanf(r.prompt[0].content, "%d+%d=", &a, &b) == 2);
            CHECK(a >= 10 && a <= 99 && b >= 10 && b <= 99 && atoi(r.ground_truth) == a + b);
            vc_verl_row_clear(&r);
        }
        vc_jsonl_free(d);
    }
    unlink(p);
    free(p);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    return vc_test_done();
}
