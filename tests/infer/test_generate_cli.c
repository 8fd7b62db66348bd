/* `verlc generate`: chat-template and raw prompts, n samples, identical output across --max-batch and
 * --threads, overlong prompts skipped / truncated / rejected with the row named. */
#include "vc_test.h"
#include <unistd.h>

static char tmp[256], bin[1024];

static int sh(const char *fmt, const char *extra) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, fmt, bin, tmp, tmp, tmp, extra);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strdup(buf);
}

static void put(const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmp, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, what)); p++) n++;
    return n;
}

/* the response_ids arrays of an output file, concatenated */
static void response_ids(const char *text, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (const char *p = text; p && (p = strstr(p, "\"response_ids\":[")); p++) {
        const char *e = strchr(p, ']');
        if (!e || k + (size_t)(e - p) + 2 >= cap) break;
        memcpy(out + k, p, (size_t)(e - p));
        k += (size_t)(e - p);
        out[k++] = ';';
        out[k] = 0;
    }
}

/* the "..." strings after each `key` in text, joined by '|' */
static void strings_after(const char *text, const char *key, char *out, size_t cap) {
    size_t k = 0, kl = strlen(key);
    out[0] = 0;
    for (const char *p = text; p && (p = strstr(p, key)); p += kl) {
        const char *q = p + kl, *e = q;
        while (*e && !(*e == '"' && e[-1] != '\\')) e++;
        if (!*e || k + (size_t)(e - q) + 2 >= cap) break;
        memcpy(out + k, q, (size_t)(e - q));
        k += (size_t)(e - q);
        out[k++] = '|';
        out[k] = 0;
    }
}

/* verl's main_generation_server command line: its Parquet rows (every input column and `responses`) from two
 * data.train_files, greedy at temperature 0 giving the texts --greedy gives; its refusals by name */
/* verl's older main_generation (generation.yaml's keys: data.path, data.n_samples, model.path with its tokenizer,
 * rollout.*): do_sample=False's samples are --greedy's; data.n_samples a row; its refusals */
static void legacy_form(void) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/both && ln -sf %s/model/* %s/tok/* %s/both/ && %s data parquet --input %s/v1.jsonl "
             "--out %s/v1.parquet > /dev/null && %s generate data.path=%s/v1.parquet model.path=%s/both data.n_samples=1 "
             "rollout.do_sample=False rollout.response_length=6 rollout.prompt_length=40 rollout.dtype=float32 "
             "trainer.n_gpus_per_node=8 rollout.name=vllm data.output_path=%s/lg/l.parquet 2>/dev/null && "
             "%s data jsonl --input %s/lg/l.parquet --out %s/l.jsonl > /dev/null",
             tmp, tmp, tmp, tmp, bin, tmp, tmp, bin, tmp, tmp, tmp, bin, tmp, tmp);
    CHECK(system(cmd) == 0);
    char *o = slurp("l.jsonl"), *g = slurp("g.jsonl");
    static char ro[4096], rg[4096];
    strings_after(o, "\"responses\":[\"", ro, sizeof ro);
    strings_after(g, "\"response\":\"", rg, sizeof rg);
    /* (g.jsonl: --greedy over v1 then v2; the first two of its responses are v1's) */
    char *cut = strstr(rg, "|");
    if (cut && (cut = strstr(cut + 1, "|"))) cut[1] = 0;
    CHECK_MSG(count(o, "\"responses\":[") == 2 && ro[0] && !strcmp(rg, ro), "main_generation '%s', --greedy's '%s'", ro, rg);
    free(o);
    free(g);
    snprintf(cmd, sizeof cmd, "%s generate data.path=%s/v1.parquet model.path=%s/both data.n_samples=3 rollout.top_k=5 "
             "rollout.response_length=4 rollout.prompt_length=40 rollout.dtype=float32 data.output_path=%s/l3.parquet "
             "2>/dev/null && %s data jsonl --input %s/l3.parquet --out %s/l3.jsonl > /dev/null", bin, tmp, tmp, tmp, bin, tmp, tmp);
    CHECK(system(cmd) == 0);
    o = slurp("l3.jsonl");
    CHECK(o && count(o, "\"responses\":[\"") == 2 && count(o, "\",\"") >= 4);
    free(o);
    const char *bad[][2] = { { "rollout.temperature=0", "When temperature=0, n_samples must be 1." },
                             { "rollout.ignore_eos=True data.n_samples=1", "rollout.ignore_eos=True" },
                             { "data.n_sample=2", "data.n_sample: not a key of verl's main_generation" },
                             { "model.external_lib=my.mod", "model.external_lib=my.mod" },
                             { "rollout.top_p=2", "rollout.top_p=2: a number from" } };
    for (int i = 0; i < 5; i++) {
        snprintf(cmd, sizeof cmd, "%s generate data.path=%s/v1.parquet model.path=%s/both data.output_path=%s/x.parquet %s "
                 "2>%s/l.err", bin, tmp, tmp, tmp, bad[i][0], tmp);
        CHECK(system(cmd) != 0);
        char *err = slurp("l.err");
        CHECK_MSG(err && strstr(err, bad[i][1]), "want '%s': %s", bad[i][1], err ? err : "");
        free(err);
    }
}

static void verl_form(void) {
    put("v1.jsonl", "{\"data_source\": \"a\", \"prompt\": [{\"role\": \"user\", \"content\": \"What is 2+3?\"}], "
                    "\"reward_model\": {\"ground_truth\": \"5\"}}\n"
                    "{\"data_source\": \"a\", \"prompt\": [{\"role\": \"user\", \"content\": \"Name a colour.\"}], "
                    "\"reward_model\": {\"ground_truth\": \"red\"}}\n");
    put("v2.jsonl", "{\"data_source\": \"b\", \"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                    "\"extra_info\": {\"index\": 7}}\n");
    char cmd[4096];
    const char *verl = "%s generate data.train_files=[%s/v1.jsonl,%s/v2.jsonl] actor_rollout_ref.model.path=%s/model "
                       "actor_rollout_ref.model.tokenizer_path=%s/tok actor_rollout_ref.rollout.response_length=6 "
                       "actor_rollout_ref.rollout.prompt_length=40 %s";
    char out[300], extra[400];
    snprintf(out, sizeof out, "%s/made/o.parquet", tmp); /* (in a folder main_generation_server makes) */
    snprintf(extra, sizeof extra, "actor_rollout_ref.rollout.temperature=0 +data.output_path=%s 2>/dev/null", out);
    snprintf(cmd, sizeof cmd, verl, bin, tmp, tmp, tmp, tmp, extra);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof cmd, "%s data jsonl --input %s --out %s/o.jsonl >/dev/null && cat %s/v1.jsonl %s/v2.jsonl > %s/v.jsonl && "
             "%s generate --model %s/model --tokenizer %s/tok --input %s/v.jsonl --output %s/g.jsonl --greedy "
             "--max-new-tokens 6 2>/dev/null", bin, out, tmp, tmp, tmp, tmp, bin, tmp, tmp, tmp, tmp);
    CHECK(system(cmd) == 0);
    char *o = slurp("o.jsonl"), *g = slurp("g.jsonl");
    static char ro[4096], rg[4096];
    strings_after(o, "\"responses\":[\"", ro, sizeof ro);
    strings_after(g, "\"response\":\"", rg, sizeof rg);
    CHECK_MSG(count(o, "\"responses\":[") == 3 && rg[0] && !strcmp(ro, rg), "parquet responses '%s', --greedy's '%s'", ro, rg);
    CHECK_MSG(o && strstr(o, "\"data_source\":\"b\"") && strstr(o, "\"ground_truth\":\"red\"") &&
              strstr(o, "\"extra_info\":{\"index\":7}") && count(o, "\"extra_info\":null") == 2, "%s", o ? o : "");
    free(o);
    free(g);
    /* n samples a row in sample order; refusals */
    snprintf(cmd, sizeof cmd, verl, bin, tmp, tmp, tmp, tmp, "actor_rollout_ref.rollout.n=3 +data.output_path=");
    size_t l = strlen(cmd);
    snprintf(cmd + l, sizeof cmd - l, "%s/n3.parquet 2>/dev/null && %s data jsonl --input %s/n3.parquet --out %s/n3.jsonl >/dev/null",
             tmp, bin, tmp, tmp);
    CHECK(system(cmd) == 0);
    o = slurp("n3.jsonl");
    CHECK(o && count(o, "\"responses\":[\"") == 3 && count(o, "\",\"") >= 6);
    free(o);
    const char *bad[][2] = { { "actor_rollout_ref.rollout.temperature=0 actor_rollout_ref.rollout.n=2 +data.output_path=x.parquet",
                               "When temperature=0, n_samples must be 1." },
                             { "", "+data.output_path=FILE.parquet is needed" },
                             { "data.prompt_key=question +data.output_path=x.parquet", "v1.jsonl:1: data.prompt_key 'question' is absent" } };
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, verl, bin, tmp, tmp, tmp, tmp, bad[i][0]);
        l = strlen(cmd);
        snprintf(cmd + l, sizeof cmd - l, " 2>%s/v.err", tmp);
        CHECK(system(cmd) != 0);
        char *err = slurp("v.err");
        CHECK_MSG(err && strstr(err, bad[i][1]), "want '%s': %s", bad[i][1], err ? err : "");
        free(err);
    }
    legacy_form();
}

int main(void) {
    const char *b = getenv("VERLC_BIN");
    snprintf(bin, sizeof bin, "%s", b ? b : "build/verlc");
    snprintf(tmp, sizeof tmp, "/tmp/vc_gen_cliXXXXXX");
    CHECK(mkdtemp(tmp) != NULL);
    put("cfg.json", "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32,"
                    " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                    " \"num_key_value_heads\": 2, \"vocab_size\": 32000, \"max_position_embeddings\": 64,"
                    " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false,"
                    " \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}");
    put("tok_config.json", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"chat_template\": \"{% for m in messages %}"
                           "<|{{ m['role'] }}|>{{ m['content'] }}\\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}\"}");
    put("in.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"What is 2+3?\"}]}\n"
                    "{\"prompt\": \"The quick brown fox\"}\n"
                    "{\"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"data_source\": \"x\"}\n"
                    "{\"prompt\": \"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty\"}\n");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/tok && cp %s/fixtures/tokenizers/llama2/tokenizer.json %s/tok/ && cp %s/tok_config.json "
             "%s/tok/tokenizer_config.json && %s init --config %s/cfg.json --out %s/model >/dev/null",
             tmp, vc_test_shared(), tmp, tmp, tmp, bin, tmp, tmp);
    CHECK(system(cmd) == 0);
    const char *run = "%s generate --model %s/model --tokenizer %s/tok --input %s/in.jsonl %s";
    CHECK(sh(run, "--output /tmp/x.jsonl --n 2 --max-new-tokens 6 --seed 4 2>/dev/null") == 0);
    char extra[1024];
    snprintf(extra, sizeof extra, "--output %s/a.jsonl --n 3 --max-new-tokens 6 --seed 4 --max-prompt-len 24 --overlong skip 2>%s/a.err", tmp, tmp);
    CHECK(sh(run, extra) == 0);
    snprintf(extra, sizeof extra, "--output %s/b.jsonl --n 3 --max-new-tokens 6 --seed 4 --max-prompt-len 24 --overlong skip --max-batch 1 --threads 1 2>/dev/null", tmp);
    CHECK(sh(run, extra) == 0);
    char *a = slurp("a.jsonl"), *bb = slurp("b.jsonl"), *err = slurp("a.err");
    CHECK(a && bb && !strcmp(a, bb));
    CHECK(count(a, "\"index\":") == 9); /* rows 0..2 kept, row 3 skipped */
    CHECK(count(a, "\"index\":3") == 0);
    CHECK(count(a, "\"prompt\":\"<|user|>What is 2+3?\\n<|assistant|>\"") == 3);
    CHECK(count(a, "\"finish_reason\":\"length\"") + count(a, "\"finish_reason\":\"eos\"") == 9);
    CHECK(count(a, "\"logprobs\":[") == 9 && count(a, "\"response_ids\":[") == 9 && count(a, "\"sample\":2") == 3);
    CHECK_MSG(err && strstr(err, "in.jsonl:4: prompt has") && strstr(err, "skipped"), "%s", err ? err : "");
    free(a);
    free(bb);
    free(err);
    snprintf(extra, sizeof extra, "--output %s/c.jsonl --max-new-tokens 6 --max-prompt-len 24 2>%s/c.err", tmp, tmp);
    CHECK(sh(run, extra) != 0);
    err = slurp("c.err");
    CHECK_MSG(err && strstr(err, "in.jsonl:4: prompt has"), "%s", err ? err : "");
    free(err);
    snprintf(extra, sizeof extra, "--output %s/d.jsonl --max-new-tokens 6 --max-prompt-len 24 --overlong truncate --greedy 2>/dev/null", tmp);
    CHECK(sh(run, extra) == 0);
    a = slurp("d.jsonl");
    CHECK(a && count(a, "\"index\":3") == 1);
    /* the same greedy run on the sim device (backend memory behind poisoned pointers) gives the same tokens */
    snprintf(extra, sizeof extra, "--output %s/e.jsonl --max-new-tokens 6 --max-prompt-len 24 --overlong truncate --greedy --device sim 2>/dev/null", tmp);
    CHECK(sh(run, extra) == 0);
    bb = slurp("e.jsonl");
    static char ra[8192], rb[8192];
    response_ids(a, ra, sizeof ra);
    response_ids(bb, rb, sizeof rb);
    CHECK_MSG(ra[0] && !strcmp(ra, rb), "greedy tokens differ between cpu and sim:\n%s\n%s", ra, rb);
    free(a);
    free(bb);
    snprintf(extra, sizeof extra, "--output %s/f.jsonl --device tpu 2>%s/f.err", tmp, tmp);
    CHECK(sh(run, extra) == 2);
    err = slurp("f.err");
    CHECK_MSG(err && strstr(err, "--device tpu: unknown device"), "%s", err ? err : "");
    free(err);
    /* a row with images for a text model is refused by name (not generated from "<image>" as text) */
    put("img.jsonl", "{\"prompt\": \"Hi\"}\n{\"prompt\": [{\"role\": \"user\", \"content\": \"<image>What?\"}], "
                     "\"images\": [\"a.png\"]}\n");
    const char *run_img = "%s generate --model %s/model --tokenizer %s/tok --input %s/img.jsonl %s";
    snprintf(extra, sizeof extra, "--output %s/g.jsonl 2>%s/g.err", tmp, tmp);
    CHECK(sh(run_img, extra) != 0);
    err = slurp("g.err");
    CHECK_MSG(err && strstr(err, "img.jsonl:2: a row with images or videos needs an image-text model"), "%s", err ? err : "");
    free(err);
    /* --speculative: drafting with the MTP layer of a MiMo checkpoint gives the same output, its drafts counted; a model
     * without one is refused by name */
    put("mimo.json", "{\"architectures\": [\"MiMoForCausalLM\"], \"model_type\": \"mimo\", \"hidden_size\": 32,"
                     " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                     " \"num_key_value_heads\": 2, \"vocab_size\": 32000, \"max_position_embeddings\": 64,"
                     " \"rms_norm_eps\": 1e-6, \"num_nextn_predict_layers\": 1, \"bos_token_id\": 1, \"eos_token_id\": 2,"
                     " \"torch_dtype\": \"float32\"}");
    snprintf(cmd, sizeof cmd, "%s init --config %s/mimo.json --out %s/mimo >/dev/null", bin, tmp, tmp);
    CHECK(system(cmd) == 0);
    const char *run_mimo = "%s generate --model %s/mimo --tokenizer %s/tok --input %s/in.jsonl %s";
    snprintf(extra, sizeof extra, "--output %s/h.jsonl --n 2 --max-new-tokens 12 --max-prompt-len 24 --overlong skip 2>/dev/null",
             tmp);
    CHECK(sh(run_mimo, extra) == 0);
    snprintf(extra, sizeof extra, "--output %s/i.jsonl --n 2 --max-new-tokens 12 --max-prompt-len 24 --overlong skip "
             "--speculative --num-speculative-tokens 2 2>%s/i.err", tmp, tmp);
    CHECK(sh(run_mimo, extra) == 0);
    a = slurp("h.jsonl"), bb = slurp("i.jsonl"), err = slurp("i.err");
    CHECK_MSG(a && bb && !strcmp(a, bb), "--speculative changed the output");
    CHECK_MSG(err && strstr(err, "drafts from the MTP layer"), "%s", err ? err : "");
    free(a);
    free(bb);
    free(err);
    snprintf(extra, sizeof extra, "--output %s/j.jsonl --speculative 2>%s/j.err", tmp, tmp);
    CHECK(sh(run, extra) != 0);
    err = slurp("j.err");
    CHECK_MSG(err && strstr(err, "declares no multi-token-prediction layers"), "%s", err ? err : "");
    free(err);
    verl_form();
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
