/* SFT messages rows as verl's MultiTurnSFTDataset builds them, turn by turn: Qwen3's template renders its last turn
 * otherwise in the whole conversation (<think>), so a row stops, as verl stops, unless data.ignore_input_ids_mismatch;
 * then the turns: a row's `tools` (a list of schemas, or a JSON string of one) reach the first turn's rendering (the
 * <tools> block), the loss covers the assistant's text and its end of turn. `enable_thinking` (a per-row bool, the
 * kwargs, later verl's default) reaches the template: a template that shows it in the assistant's turn. */
#include "train/sft_internal.h"
#include "sft_test_util.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* every key of verl's sft_trainer.yaml at its default is accepted; the ones verlc has no setting for change
 * nothing at values that change nothing and are refused (naming key and value) otherwise */
static void test_verl_keys(void) {
    vc_sft_config c, d;
    vc_sft_config_default(&c);
    vc_sft_config_default(&d);
    static const char *const SAME[][2] = {
        { "data.micro_batch_size", "null" }, { "data.train_max_samples", "-1" }, { "data.balance_dp_token", "False" },
        { "data.chat_template", "null" }, { "data.custom_cls.path", "null" }, { "model.fsdp_config.cpu_offload", "False" },
        { "model.strategy", "fsdp2" }, { "ulysses_sequence_parallel_size", "1" }, { "use_remove_padding", "true" },
        { "trainer.project_name", "gsm8k-sft" }, { "trainer.logger", "['console','wandb']" },
        { "trainer.total_training_steps", "null" }, { "trainer.max_ckpt_to_keep", "null" }, { "optim.optimizer", "AdamW" },
        { "optim.optimizer_impl", "torch.optim" }, { "data.apply_chat_template_kwargs", "{}" }, { "trainer.resume_mode", "disable" },
    };
    for (size_t i = 0; i < sizeof SAME / sizeof SAME[0]; i++) CHECK_OK(vc_sft_config_set(&c, SAME[i][0], SAME[i][1]));
    CHECK_MSG(c.total_steps == d.total_steps && c.keep_last == d.keep_last && c.micro_batch_size == d.micro_batch_size &&
              c.resume == NULL, "null values changed the defaults");
    CHECK_OK(vc_sft_config_set(&c, "data.micro_batch_size", "3"));
    CHECK_OK(vc_sft_config_set(&c, "++trainer.seed", "77")); /* Hydra's add prefixes, as verl's scripts write them */
    CHECK_OK(vc_sft_config_set(&c, "trainer.resume_mode", "auto"));
    CHECK_OK(vc_sft_config_set(&c, "data.train_max_samples", "100"));
    CHECK_OK(vc_sft_config_set(&c, "data.chat_template", "{{ x }}"));
    CHECK(c.micro_batch_size == 3 && c.seed == 77 && c.resume && !strcmp(c.resume, "auto") && c.train_max_samples == 100);
    /* verl's engine-based SFT trainer (sft_trainer_engine.yaml and its hf_model / fsdp groups) at defaults */
    static const char *const ENGINE[][2] = {
        { "engine", "fsdp" }, { "optim", "fsdp" }, { "model", "hf_model" }, { "data.pad_mode", "no_padding" },
        { "data.ignore_input_ids_mismatch", "False" }, { "checkpoint.save_contents", "[model,optimizer,extra]" },
        { "checkpoint.load_contents", "${checkpoint.save_contents}" }, { "trainer.profile_interval", "[-1,-1]" },
        { "model.hf_config_path", "null" }, { "model.override_config", "{}" }, { "model.use_remove_padding", "True" },
        { "model.lora_adapter_path", "null" }, { "model.mtp.enable", "False" }, { "model.tiled_mlp.num_shards", "4" },
        { "engine.param_offload", "False" }, { "engine.strategy", "fsdp2" }, { "engine.model_dtype", "fp32" },
        { "engine.ulysses_sequence_parallel_size", "1" }, { "engine.forward_only", "False" }, { "engine.seed", "42" },
        { "engine.wrap_policy.min_num_params", "0" }, { "optim.warmup_style", "null" },
    };
    vc_sft_config e;
    vc_sft_config_default(&e);
    for (size_t i = 0; i < sizeof ENGINE / sizeof ENGINE[0]; i++) CHECK_OK(vc_sft_config_set(&e, ENGINE[i][0], ENGINE[i][1]));
    CHECK(!memcmp(&e, &d, sizeof e)); /* defaults change nothing */
    CHECK_OK(vc_sft_config_set(&e, "model.path", "/m"));
    CHECK_OK(vc_sft_config_set(&e, "model.custom_chat_template", "{{ y }}"));
    CHECK_OK(vc_sft_config_set(&e, "optim.warmup_style", "constant"));
    CHECK_OK(vc_sft_config_set(&e, "engine.dtype", "bfloat16"));
    CHECK_OK(vc_sft_config_set(&e, "model.lora_adapter_path", "/a"));
    CHECK_OK(vc_sft_config_set(&e, "model.mtp.enable", "True")); /* (the model's MTP layers kept: checked at load) */
    CHECK_OK(vc_sft_config_set(&e, "model.mtp.enable_train", "True"));
    CHECK_OK(vc_sft_config_set(&e, "model.mtp.detach_encoder", "True"));
    CHECK(e.mtp_train && e.mtp_detach && e.mtp_scale == 0.1);
    CHECK_OK(vc_sft_config_set(&e, "model.mtp.mtp_loss_scaling_factor", "0.25"));
    CHECK(e.mtp_scale == 0.25);
    /* keys of their own under a group the verl table takes whole (model.fsdp_config.*) are read, not passed over */
    CHECK_OK(vc_sft_config_set(&e, "model.fsdp_config.mixed_precision.reduce_dtype", "bf16"));
    CHECK(e.reduce_dtype && !strcmp(e.reduce_dtype, "bf16"));
    CHECK(!strcmp(e.model_dir, "/m") && !strcmp(e.chat_template, "{{ y }}") && !strcmp(e.lr_scheduler, "constant") &&
          !strcmp(e.param_dtype, "bfloat16") && e.lora_from && !strcmp(e.lora_from, "/a") && e.mtp_enable);
    static const char *const BAD[][3] = {
        { "engine", "veomni", "engine=veomni" }, { "optim", "muon", "optim=muon" }, { "engine.forward_only", "True", "trains" },
        { "model.mtp.mtp_loss_scaling_factor", "lots", "mtp_loss_scaling_factor" },
        { "optim.optimizer", "SGD", "AdamW" }, { "data.custom_cls.path", "my.py", "Python" },
        { "trainer.resume_mode", "sometimes", "auto, disable or resume_path" }, { "data.nonsense", "1", "unknown SFT key" },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        vc_status st = vc_sft_config_set(&c, BAD[i][0], BAD[i][1]);
        CHECK_MSG(st && strstr(vc_last_error(), BAD[i][2]), "%s=%s: %s", BAD[i][0], BAD[i][1], vc_last_error());
    }
}

/* use_legacy_worker_impl=enable's validation batches: verl b178a3cd's sampler deals row r + W j to rank r and drops
 * what does not fill a batch on every rank; val/loss the mean of the ranks' mean of each batch's token mean (pooled:
 * the step's NLL over its tokens) */
static void test_legacy_val(void) {
    uint32_t order[11];
    size_t kept = sft_legacy_val_order(11, 2, 2, order);
    static const uint32_t WANT[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
    CHECK(kept == 8 && !memcmp(order, WANT, sizeof WANT));
    CHECK(sft_legacy_val_order(3, 2, 2, order) == 0);
    CHECK(sft_legacy_val_order(5, 1, 2, order) == 4 && order[3] == 3);
    /* two steps of 2 ranks x 2 rows: rank batches (1+2)/(1+1), (3+0)/(2+1); (4+4)/(2+2), (6+0)/(3+0) */
    const double nll[8] = { 1, 2, 3, 0, 4, 4, 6, 0 }, tok[8] = { 1, 1, 2, 1, 2, 2, 3, 0 };
    double unpooled = ((1.5 + 1.0) / 2 + (2.0 + 2.0) / 2) / 2, pooled = (6.0 / 5 + 14.0 / 7) / 2;
    CHECK_NEAR(sft_legacy_val_loss(nll, tok, 8, 2, 2, 0), unpooled, 1e-15);
    CHECK_NEAR(sft_legacy_val_loss(nll, tok, 8, 2, 2, 1), pooled, 1e-15);
    CHECK_NEAR(sft_legacy_val_loss(nll, tok, 8, 1, 4, 0), (6.0 / 5 + 14.0 / 7) / 2, 1e-15);
    /* training rows: 8 of a step over 2 ranks dealt every other one (rank 0: 10 12 14 16, rank 1: 11 13 15 17), so
     * micro-batches of 2 in blocks are verl's ranks' {10, 12} {14, 16} and {11, 13} {15, 17}; micro-batches of 3 do not
     * divide a rank's 4 rows, one rank needs no dealing */
    static const uint32_t STEP[8] = { 10, 11, 12, 13, 14, 15, 16, 17 }, DEALT[8] = { 10, 12, 14, 16, 11, 13, 15, 17 };
    uint32_t dealt[8];
    CHECK(sft_legacy_deal(STEP, 8, 2, 2, dealt) && !memcmp(dealt, DEALT, sizeof DEALT));
    CHECK(!sft_legacy_deal(STEP, 8, 2, 3, dealt) && !sft_legacy_deal(STEP, 8, 1, 2, dealt) &&
          !sft_legacy_deal(STEP, 7, 2, 1, dealt));
    const double none[2] = { 0, 0 };
    CHECK(sft_legacy_val_loss(none, none, 2, 1, 2, 0) == 0.0 && isnan(sft_legacy_val_loss(none, none, 0, 1, 2, 0)));
}

int main(void) {
    test_verl_keys();
    test_legacy_val();
    if (!vc_test_have_shared()) return vc_test_done();
    char tdir[512], path[128];
    snprintf(tdir, sizeof tdir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    snprintf(path, sizeof path, "/tmp/verlc_sftdata_%d.jsonl", (int)getpid());
    vc_tokenizer *tok = NULL;
    vc_chat_template *tmpl = NULL;
    CHECK_OK(vc_tokenizer_load(tdir, &tok));
    CHECK_OK(vc_chat_template_load(tdir, &tmpl));
    if (!tok || !tmpl) return vc_test_done();
    sft_tok tk = { tok, tmpl, vc_tokenizer_eos_id(tok), NULL };
#define MSGS "\"messages\": [{\"role\": \"user\", \"content\": \"What is 2+2?\"}, {\"role\": \"assistant\", \"content\": \"It is 4.\"}]"
#define TOOL "{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"parameters\": {\"type\": \"object\"}}}"
    static const char ROWS[] = "{" MSGS ", \"tools\": [" TOOL "]}\n"
                               "{" MSGS "}\n"
                               "{" MSGS ", \"tools\": \"[{\\\"type\\\": \\\"function\\\", \\\"function\\\": {\\\"name\\\": "
                               "\\\"calculator\\\", \\\"parameters\\\": {\\\"type\\\": \\\"object\\\"}}}]\"}\n"
                               "{" MSGS ", \"enable_thinking\": false, \"tools\": null}\n";
    CHECK_OK(vc_write_file_atomic(path, ROWS, strlen(ROWS)));
    vc_sft_config c;
    vc_sft_config_default(&c);
    c.max_length = 4096;
    c.skip_bad_lines = 0;
    sft_data d;
    vc_status st0 = sft_data_load(&c, path, &tk, &d); /* verl raises on such a row: so does verlc, naming the key */
    CHECK_MSG(st0 == VC_ERR_ARG && strstr(vc_last_error(), ":1: its turns") &&
              strstr(vc_last_error(), "data.ignore_input_ids_mismatch=true"), "%s", vc_last_error());
    if (!st0) sft_data_free(&d);
    c.ignore_ids_mismatch = 1;
    CHECK_OK(sft_data_load(&c, path, &tk, &d));
    CHECK(d.n == 4);
    if (d.n == 4) {
        char *r0 = decode(tok, d.ids + d.cu[0], (size_t)(d.cu[1] - d.cu[0]));
        char *r1 = decode(tok, d.ids + d.cu[1], (size_t)(d.cu[2] - d.cu[1]));
        char *r2 = decode(tok, d.ids + d.cu[2], (size_t)(d.cu[3] - d.cu[2]));
        CHECK_MSG(strstr(r0, "<tools>") && strstr(r0, "\"name\": \"calculator\""), "tools row: %s", r0);
        CHECK_MSG(!strstr(r1, "<tools>"), "row without tools: %s", r1);
        CHECK_MSG(!strcmp(r0, r2), "tools as a JSON string render differently:\n%s\n%s", r0, r2);
        CHECK_MSG(!strcmp(r1, "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\nIt is 4.<|im_end|>\n"),
                  "the turns: [%s]", r1);
        char *t0 = trained(tok, &d, 0), *t1 = trained(tok, &d, 1), *t3 = trained(tok, &d, 3);
        /* the assistant's turn less the generation prompt's tokens, with or without tools or thinking */
        CHECK_MSG(!strcmp(t0, "It is 4.<|im_end|>\n") && !strcmp(t0, t1) && !strcmp(t0, t3), "trained: [%s] [%s] [%s]",
                  t0, t1, t3);
        free(r0), free(r1), free(r2), free(t0), free(t1), free(t3);
    }
    sft_data_free(&d);
    /* enable_thinking from here on: a template whose assistant turns show it, rendering turns as the whole does */
    vc_chat_template *shows = NULL;
    CHECK_OK(vc_chat_template_from_string(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' and enable_thinking is defined and "
        "not enable_thinking %}[nothink]{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}", NULL, "<|im_end|>", &shows));
    tk.tmpl = shows;
    c.ignore_ids_mismatch = 0;
    /* data.apply_chat_template_kwargs: {enable_thinking: false} for every row (as verl's MultiTurnSFTDataset
     * passes it), a row's own enable_thinking winning; the .KEY=VALUE form the same */
    static const char KW_ROWS[] = "{" MSGS "}\n{" MSGS ", \"enable_thinking\": true}\n";
    CHECK_OK(vc_write_file_atomic(path, KW_ROWS, strlen(KW_ROWS)));
    for (int form = 0; form < 2; form++) {
        vc_sft_config kc = c;
        if (form == 0) CHECK_OK(vc_sft_config_set(&kc, "data.apply_chat_template_kwargs", "{enable_thinking: false}"));
        else CHECK_OK(vc_sft_config_set(&kc, "+data.apply_chat_template_kwargs.enable_thinking", "False"));
        cJSON *kw = NULL;
        CHECK_OK(vc_sft_chat_kwargs(&kc, &kw));
        sft_tok kt = tk;
        kt.kwargs = kw;
        CHECK_OK(sft_data_load(&kc, path, &kt, &d));
        if (d.n == 2) {
            char *a = trained(tok, &d, 0), *b = trained(tok, &d, 1);
            CHECK_MSG(!strcmp(a, "[nothink]It is 4.<|im_end|>\n") && !strcmp(b, "It is 4.<|im_end|>\n"), "kwargs form %d: [%s] [%s]",
                      form, a, b);
            free(a), free(b);
        } else CHECK(d.n == 2);
        sft_data_free(&d);
        cJSON_Delete(kw);
    }
    /* later verl's data.enable_thinking_default: for rows without the key (a row's own value wins) */
    for (int v = 0; v < 3; v++) {
        static const char *const VALS[] = { "false", "none", "maybe" };
        vc_sft_config kc = c;
        CHECK_OK(vc_sft_config_set(&kc, "data.enable_thinking_default", VALS[v]));
        vc_status st = sft_data_load(&kc, path, &tk, &d);
        if (v == 2) CHECK(st == VC_ERR_ARG && strstr(vc_last_error(), "enable_thinking_default=maybe"));
        else if (d.n == 2) {
            CHECK_OK(st);
            char *a = trained(tok, &d, 0), *b = trained(tok, &d, 1);
            CHECK_MSG(!strcmp(a, v == 0 ? "[nothink]It is 4.<|im_end|>\n" : "It is 4.<|im_end|>\n") &&
                      !strcmp(b, "It is 4.<|im_end|>\n"), "enable_thinking_default=%s: [%s] [%s]", VALS[v], a, b);
            free(a), free(b);
        } else CHECK(d.n == 2);
        sft_data_free(&d);
    }
    {
        vc_sft_config kc = c;
        cJSON *kw = NULL;
        CHECK_OK(vc_sft_config_set(&kc, "data.apply_chat_template_kwargs", "[1, 2]"));
        CHECK(vc_sft_chat_kwargs(&kc, &kw) == VC_ERR_ARG && strstr(vc_last_error(), "must be a mapping") && !kw);
        CHECK_OK(vc_sft_config_set(&kc, "data.apply_chat_template_kwargs", "{}"));
        CHECK_OK(vc_sft_chat_kwargs(&kc, &kw));
        CHECK(kw == NULL);
    }
    static const struct { const char *row, *needle; } BAD[] = {
        { "{" MSGS ", \"tools\": 5}\n", "'tools' must be a list" },
        { "{" MSGS ", \"enable_thinking\": \"yes\"}\n", "'enable_thinking' must be true or false" },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        CHECK_OK(vc_write_file_atomic(path, BAD[i].row, strlen(BAD[i].row)));
        vc_status st = sft_data_load(&c, path, &tk, &d);
        CHECK_MSG(st != VC_OK && strstr(vc_last_error(), BAD[i].needle), "%s: %s", BAD[i].row, vc_last_error());
        if (!st) sft_data_free(&d);
    }
    /* verl's key names: data.multiturn.messages_key / enable */
    static const char CONV[] = "{\"conv\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                               "\"content\": \"Hello!\"}]}\n";
    CHECK_OK(vc_write_file_atomic(path, CONV, strlen(CONV)));
    CHECK_OK(vc_sft_config_set(&c, "data.multiturn.messages_key", "conv"));
    CHECK_OK(vc_sft_config_set(&c, "data.multiturn.enable", "true"));
    CHECK_OK(sft_data_load(&c, path, &tk, &d));
    if (d.n == 1) {
        char *t = trained(tok, &d, 0);
        CHECK_MSG(strstr(t, "Hello!") && !strstr(t, "Hi"), "conv row: %s", t);
        free(t);
        sft_data_free(&d);
    } else CHECK(d.n == 1);
    static const char PR[] = "{\"prompt\": \"Hi\", \"response\": \"Hello!\"}\n";
    CHECK_OK(vc_write_file_atomic(path, PR, strlen(PR)));
    vc_status st = sft_data_load(&c, path, &tk, &d);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "data.multiturn.enable=true"), "%s", vc_last_error());
    if (!st) sft_data_free(&d);
    /* verl's prompt_dict_keys / response_dict_keys: nested fields */
    vc_sft_config c2;
    vc_sft_config_default(&c2);
    c2.max_length = 4096;
    c2.skip_bad_lines = 0;
    static const char NEST[] = "{\"prompt\": {\"q\": {\"text\": \"Hi\"}}, \"response\": {\"text\": \"Hello!\"}}\n";
    CHECK_OK(vc_write_file_atomic(path, NEST, strlen(NEST)));
    CHECK_OK(vc_sft_config_set(&c2, "data.prompt_dict_keys", "[q,text]"));
    CHECK_OK(vc_sft_config_set(&c2, "data.response_dict_keys", "text"));
    CHECK_OK(sft_data_load(&c2, path, &tk, &d));
    if (d.n == 1) {
        char *t = trained(tok, &d, 0);
        CHECK_MSG(!strncmp(t, "Hello!", 6), "nested response: %s", t);
        free(t);
        sft_data_free(&d);
    } else CHECK(d.n == 1);
    CHECK_OK(vc_sft_config_set(&c2, "data.prompt_dict_keys", "[q,nope]"));
    st = sft_data_load(&c2, path, &tk, &d);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "row has neither"), "missing nested key: %s", vc_last_error());
    if (!st) sft_data_free(&d);
    unlink(path);
    vc_tokenizer_free(tok);
    vc_chat_template_free(tmpl);
    vc_chat_template_free(shows);
    return vc_test_done();
}
