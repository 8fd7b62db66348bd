/* Hugging Face Hub ids as model / tokenizer paths, resolved in a local Hugging Face cache laid out as
 * huggingface_hub lays it out (models--ORG--NAME/refs/main + snapshots/COMMIT of symlinks into blobs): the model,
 * tokenizer and chat template load from the snapshot; HF_HUB_CACHE, then HF_HOME/hub; a snapshot without
 * refs/main when it is the only one; ModelScope's cache with VERL_USE_MODELSCOPE; an id not in the cache fails
 * naming the cache and what to run; local paths are taken as they are. */
#include "verlc/chat_template.h"
#include "verlc/core.h"
#include "verlc/model.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp[256];

static int sh(const char *fmt, const char *a, const char *b) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, tmp, a ? a : "", b ? b : "");
    return system(cmd);
}

/* TMP/CACHE/models--ORG--NAME with the files of src as blobs linked from snapshots/c0ffee (refs/main unless
 * no_ref) */
static void cache_repo(const char *cache, const char *org_name, const char *src, int no_ref) {
    char repo[256];
    snprintf(repo, sizeof repo, "%s/models--%s", cache, org_name);
    CHECK(sh("mkdir -p %1$s/%2$s/blobs %1$s/%2$s/snapshots/c0ffee %1$s/%2$s/refs", repo, NULL) == 0);
    CHECK(sh("for f in %3$s/*; do b=$(basename $f); cp $f %1$s/%2$s/blobs/$b.blob && "
             "ln -s ../../blobs/$b.blob %1$s/%2$s/snapshots/c0ffee/$b; done", repo, src) == 0);
    if (!no_ref) CHECK(sh("printf 'c0ffee' > %1$s/%2$s/refs/main", repo, NULL) == 0);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    snprintf(tmp, sizeof tmp, "/tmp/verlc_hfcache_%d", (int)getpid());
    char model_src[512], tok_src[512];
    snprintf(model_src, sizeof model_src, "%s/fixtures/models/qwen3", vc_test_shared());
    snprintf(tok_src, sizeof tok_src, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    cache_repo("hub", "acme--tiny-qwen3", model_src, 0);
    cache_repo("hub", "acme--qwen3-tok", tok_src, 1); /* no refs/main: its only snapshot */
    cache_repo("home/hub", "other--model", model_src, 0);
    char env[300];
    snprintf(env, sizeof env, "%s/hub", tmp);
    setenv("HF_HUB_CACHE", env, 1);
    vc_model *m = NULL, *ref = NULL;
    CHECK_OK(vc_model_load("acme/tiny-qwen3", &m));
    CHECK_OK(vc_model_load(model_src, &ref));
    CHECK(m && ref && vc_model_param_count(m) == vc_model_param_count(ref) &&
          vc_model_cfg(m)->vocab == vc_model_cfg(ref)->vocab);
    vc_model_free(m);
    vc_tokenizer *tok = NULL;
    vc_chat_template *ct = NULL;
    CHECK_OK(vc_tokenizer_load("acme/qwen3-tok", &tok));
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK(tok && !vc_tokenizer_encode(tok, "Hello world", 11, 0, &ids, &n) && n == 2);
    free(ids);
    vc_tokenizer_free(tok);
    CHECK_OK(vc_chat_template_load("acme/qwen3-tok", &ct));
    vc_chat_template_free(ct);
    /* not in the cache: one line naming the id, the cache and what to run */
    CHECK(vc_model_load("acme/absent", &m) == VC_ERR_IO && strstr(vc_last_error(), "acme/absent") &&
          strstr(vc_last_error(), env) && strstr(vc_last_error(), "huggingface-cli download acme/absent"));
    CHECK(vc_tokenizer_load("other/model", &tok) == VC_ERR_IO); /* that one is under HF_HOME only */
    /* HF_HOME/hub when HF_HUB_CACHE is not set */
    unsetenv("HF_HUB_CACHE");
    snprintf(env, sizeof env, "%s/home", tmp);
    setenv("HF_HOME", env, 1);
    CHECK_OK(vc_model_load("other/model", &m));
    vc_model_free(m);
    /* a local path is taken as it is: a missing one gets the loader's own message, not the cache's */
    CHECK(vc_model_load("./no/such/model", &m) != VC_OK && !strstr(vc_last_error(), "Hugging Face cache"));
    unsetenv("HF_HOME");
    /* VERL_USE_MODELSCOPE=true: ModelScope's cache (models/ORG/NAME, a '.' of the name as "___") */
    CHECK(sh("mkdir -p %1$s/ms/models/acme && ln -s $(realpath %2$s) %1$s/ms/models/acme/tiny-v0___5", model_src, NULL) == 0);
    snprintf(env, sizeof env, "%s/ms", tmp);
    setenv("MODELSCOPE_CACHE", env, 1);
    setenv("VERL_USE_MODELSCOPE", "True", 1);
    CHECK_OK(vc_model_load("acme/tiny-v0.5", &m));
    vc_model_free(m);
    unsetenv("VERL_USE_MODELSCOPE");
    CHECK(vc_model_load("acme/tiny-v0.5", &m) == VC_ERR_IO); /* without the switch: the Hugging Face cache only */
    unsetenv("MODELSCOPE_CACHE");
    vc_model_free(ref);
    if (!getenv("VERLC_KEEP")) CHECK(sh("rm -rf %1$s", NULL, NULL) == 0);
    return vc_test_done();
}
