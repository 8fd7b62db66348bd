/* The RL trainer's checkpoints through the training core (vc_train_ckpt_save_as): verl's layout
 * (global_step_N/{actor,critic}/, rl_state.json, latest_checkpointed_iteration.txt), rotation by
 * trainer.max_actor_ckpt_to_keep, no temporary directories left, exact resume of a PPO run with a
 * critic (actor, critic, value head and optimiser state byte-identical to an uninterrupted run, across
 * an epoch boundary), the same with LoRA adapters (frozen base weights, merged export, the adapters in
 * PEFT's format), and a corrupt checkpoint failing with the file named. */
#include "../../src/rl/demo_internal.h"
#include "../../src/rl/trainer_internal.h"
#include "rl_demo_util.h"
#include "verlc/report.h"
#include "verlc/safetensors.h"
#include "verlc/rng.h"
#include "verlc/trainer.h"
#include "vc_test.h"
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];
static const int64_t *ROW_LINES; /* rows_are's */
static size_t ROW_N;

static const char *ROWS[] = { "12+34=", "40+2=", "7+8=", "19+19=" };

static vc_status run(const char *out, int steps, const char *extra) {
    char buf[4096];
    snprintf(buf, sizeof buf,
             "actor_rollout_ref.model.path=%s/model|critic.model.path=%s/model|data.train_files=%s/train.jsonl|"
             "data.val_files=null|data.train_batch_size=2|data.max_prompt_length=16|data.max_response_length=3|"
             "actor_rollout_ref.rollout.n=2|algorithm.adv_estimator=gae|actor_rollout_ref.actor.ppo_mini_batch_size=1|"
             "actor_rollout_ref.actor.ppo_epochs=2|actor_rollout_ref.actor.optim.lr=1e-2|critic.optim.lr=1e-2|"
             "critic.ppo_micro_batch_size_per_gpu=1|algorithm.use_kl_in_reward=true|algorithm.kl_ctrl.type=adaptive|"
             "trainer.total_training_steps=%d|trainer.save_freq=1|trainer.max_actor_ckpt_to_keep=2|"
             "trainer.default_local_dir=%s/%s|%s",
             dir, dir, dir, steps, dir, out, extra);
    int64_t done = -1;
    vc_status st = demo_fit(buf, &done);
    if (!st) CHECK(done == steps);
    return st;
}

static int same_file(const char *a_run, const char *b_run, const char *rel) {
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s/%s", dir, a_run, rel);
    snprintf(pb, sizeof pb, "%s/%s/%s", dir, b_run, rel);
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int eq = !vc_read_file(pa, &x, &nx) && !vc_read_file(pb, &y, &ny) && nx == ny && !memcmp(x, y, nx);
    free(x);
    free(y);
    CHECK_MSG(eq, "%s differs between %s and %s", rel, a_run, b_run);
    return eq;
}

static int exists(const char *run_dir, const char *rel) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s/%s", dir, run_dir, rel);
    return vc_file_exists(p);
}

static void setup(void) {
    demo_model_setup(dir, 5);
    char rows[2048] = "", *p = rows;
    for (int i = 0; i < 4; i++) {
        int a, b;
        sscanf(ROWS[i], "%d+%d=", &a, &b);
        p += sprintf(p, "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"%s\"}],"
                        "\"reward_model\":{\"style\":\"rule\",\"ground_truth\":\"%d\"}}\n", ROWS[i], a + b);
    }
    char *tp = vc_path_join(dir, "train.jsonl");
    CHECK_OK(vc_write_file_atomic(tp, rows, strlen(rows)));
    free(tp);
}

/* max |a - b| over the weights of two Hugging Face directories (INFINITY if they do not match up) */
static double weight_diff(const char *a_rel, const char *b_rel) {
    char pa[512], pb[512];
    snprintf(pa, sizeof pa, "%s/%s", dir, a_rel);
    snprintf(pb, sizeof pb, "%s/%s", dir, b_rel);
    vc_model *x = NULL, *y = NULL;
    double d = INFINITY;
    CHECK_OK(vc_model_load(pa, &x));
    CHECK_OK(vc_model_load(pb, &y));
    if (x && y && vc_model_n_params(x) == vc_model_n_params(y)) {
        d = 0;
        for (int i = 0; i < vc_model_n_params(x); i++) {
            vc_tensor *tx = vc_model_param(x, i, NULL, NULL), *ty = vc_model_param(y, i, NULL, NULL);
            float *hx = malloc((size_t)tx->n * 4), *hy = malloc((size_t)ty->n * 4);
            if (hx && hy && tx->n == ty->n && !vc_tensor_read(tx, hx) && !vc_tensor_read(ty, hy))
                for (int64_t k = 0; k < tx->n; k++) d = fmax(d, fabs((double)hx[k] - hy[k]));
            else d = INFINITY;
            free(hx);
            free(hy);
        }
    }
    vc_model_free(x);
    vc_model_free(y);
    return d;
}

/* GRPO with LoRA adapters on the actor and a KL loss against the base model (the actor with its
 * adapters off): the base weights never move, the export carries the merged adapters, resume is exact */
static void test_lora(void) {
    /* a starting adapter (lora_adapter_path) with B != 0, so the policy differs from the base model and
     * the KL terms give a learning signal from the first step */
    char model[400], start[400], L[2048];
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(start, sizeof start, "%s/adapter0", dir);
    mkdir(start, 0755);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(model, &m));
    if (m) {
        CHECK_OK(vc_model_lora_init(m, 4, 8.0, "q_proj,v_proj,up_proj,down_proj", 5));
        vc_tensor *const *p = NULL;
        int n = vc_model_lora_params(m, &p);
        for (int i = 1; i < n; i += 2) {
            float *w = malloc((size_t)p[i]->n * 4);
            for (int64_t j = 0; w && j < p[i]->n; j++) w[j] = 0.05f * vc_rng_normal(8, (uint64_t)i, (uint64_t)j, 0);
            if (w) CHECK_OK(vc_tensor_write(p[i], w));
            free(w);
        }
        CHECK_OK(vc_model_lora_save(m, start));
        vc_model_free(m);
    }
    snprintf(L, sizeof L,
             "actor_rollout_ref.actor.use_kl_loss=true|actor_rollout_ref.model.lora_rank=4|"
             "actor_rollout_ref.model.lora_alpha=8|actor_rollout_ref.model.target_modules=[q_proj,v_proj,up_proj,down_proj]|"
             "actor_rollout_ref.model.lora_adapter_path=%s|critic.model.lora_rank=4|critic.model.lora_alpha=8", start);
    CHECK_OK(run("la", 3, L));
    CHECK_OK(run("lb", 2, L));
    CHECK_OK(run("lb", 3, L));
    CHECK(exists("la", "global_step_3/actor/lora_adapter/adapter_model.safetensors"));
    CHECK(exists("la", "hf_model/lora_adapter/adapter_config.json"));
    same_file("la", "lb", "hf_model/model.safetensors");
    same_file("la", "lb", "global_step_3/actor/lora_adapter/adapter_model.safetensors");
    same_file("la", "lb", "global_step_3/actor/optim.bin");
    same_file("la", "lb", "global_step_3/critic/lora_adapter/adapter_model.safetensors"); /* the critic's too */
    same_file("la", "lb", "global_step_3/critic/value_head.bin");
    /* the adapters were trained: nonzero actor gradients at every step */
    char mp[400];
    snprintf(mp, sizeof mp, "%s/la/metrics.jsonl", dir);
    vc_metrics *mt = NULL;
    CHECK_OK(vc_metrics_read(mp, &mt));
    const vc_metric_series *gs = mt ? vc_metrics_find(mt, "actor/grad_norm") : NULL;
    CHECK(gs && gs->n == 3);
    for (int i = 0; gs && i < gs->n; i++) CHECK_MSG(gs->y[i] > 0, "step %d: actor/grad_norm %g", i + 1, gs->y[i]);
    vc_metrics_free(mt);
    double moved = weight_diff("model", "la/hf_model");
    printf("LoRA: the merged export moved the weights by %.3g\n", moved);
    CHECK_MSG(moved > 1e-4 && moved < INFINITY, "the merged export barely moved (%g)", moved);
    /* the checkpointed base weights are those of step 2 byte for byte: frozen */
    char a[400], b[400];
    snprintf(a, sizeof a, "la/global_step_2/actor/model.safetensors");
    snprintf(b, sizeof b, "la/global_step_3/actor/model.safetensors");
    same_file(".", ".", a); /* (exists) */
    char pa[512], pb[512], *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    CHECK(!vc_read_file(pa, &x, &nx) && !vc_read_file(pb, &y, &ny) && nx == ny && !memcmp(x, y, nx));
    free(x);
    free(y);
    vc_status st = run("lc", 1, "actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.actor.zero_stage=2");
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "zero_stage"), "%s", vc_last_error());
}

/* LoRA on a MoE actor's routed experts and routers (later verl's target_parameters, verl's YAML lacking the
 * key: Hydra's +) with target_modules=[]: only expert and router adapters, PEFT's names in the checkpoint;
 * the merged export moves the expert and router tensors and nothing else */
static void test_lora_experts(void) {
    char md[300], cp[300];
    snprintf(md, sizeof md, "%s/moe", dir);
    snprintf(cp, sizeof cp, "%s/moe_config.json", dir);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3_moe\",\"vocab_size\":%d,"
             "\"hidden_size\":32,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"head_dim\":16,\"intermediate_size\":48,\"moe_intermediate_size\":16,\"num_experts\":4,"
             "\"num_experts_per_tok\":2,\"norm_topk_prob\":true,\"max_position_embeddings\":64,\"rms_norm_eps\":1e-6,"
             "\"rope_theta\":10000,\"tie_word_embeddings\":true,\"eos_token_id\":1,\"pad_token_id\":0}", DEMO_VOCAB);
    CHECK_OK(vc_write_file_atomic(cp, cfg, strlen(cfg)));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cp, 11, &m));
    CHECK_OK(vc_model_save_hf(m, md, VC_F32));
    CHECK_OK(demo_write_tokenizer(md));
    vc_model_free(m);
    char extra[600];
    snprintf(extra, sizeof extra, "algorithm.adv_estimator=grpo|actor_rollout_ref.model.path=%s|"
             "actor_rollout_ref.model.lora_rank=4|actor_rollout_ref.model.lora_alpha=8|"
             "actor_rollout_ref.model.target_modules=[]|actor_rollout_ref.actor.use_kl_loss=true|"
             "actor_rollout_ref.actor.entropy_coeff=0.01|" /* a gradient whatever the rewards */
             "+actor_rollout_ref.model.target_parameters=[mlp.experts.gate_up_proj,mlp.experts.down_proj,"
             "mlp.gate.weight]", md);
    vc_status st = run("le", 2, extra);
    CHECK_MSG(!st, "GRPO with expert adapters: %s", vc_last_error());
    char p[400], *text = NULL;
    size_t n = 0;
    snprintf(p, sizeof p, "%s/le/hf_model/lora_adapter/adapter_config.json", dir);
    CHECK_OK(vc_read_file(p, &text, &n));
    CHECK(text && strstr(text, "\"target_modules\": []") &&
          strstr(text, "\"target_parameters\": [\"mlp.experts.gate_up_proj\", \"mlp.experts.down_proj\", "
                       "\"mlp.gate.weight\"]"));
    free(text);
    snprintf(p, sizeof p, "%s/le/global_step_2/actor/lora_adapter/adapter_model.safetensors", dir);
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(p, &ck));
    CHECK(ck && vc_ckpt_count(ck) == 12 && /* 2 layers x (gate_up, down, router) x (A, B) */
          vc_ckpt_find(ck, "base_model.model.model.layers.1.mlp.experts.base_layer.lora_B.weight") &&
          vc_ckpt_find(ck, "base_model.model.model.layers.0.mlp.gate.lora_A.weight"));
    vc_ckpt_close(ck);
    /* the merged export: the routed experts and the routers moved, every other tensor is the base's */
    vc_model *x = NULL, *y = NULL;
    snprintf(p, sizeof p, "%s/le/hf_model", dir);
    CHECK_OK(vc_model_load(md, &x));
    CHECK_OK(vc_model_load(p, &y));
    int moved = 0, other = 0;
    for (int i = 0; x && y && i < vc_model_n_params(x); i++) {
        const char *name = NULL;
        vc_tensor *tx = vc_model_param(x, i, &name, NULL), *ty = vc_model_param(y, i, NULL, NULL);
        int diff = tx->n != ty->n || memcmp(tx->data, ty->data, sizeof(float) * (size_t)tx->n);
        int expert = strstr(name, "experts.") || strstr(name, "router");
        moved += diff && expert;
        other += diff && !expert;
        if (diff && !expert) fprintf(stderr, "LoRA on experts: %s changed\n", name);
    }
    printf("LoRA on routed experts and routers: %d expert/router tensors moved, %d others\n", moved, other);
    CHECK(moved == 8 && other == 0); /* per layer: the gate, up and down stacks and the router */
    vc_model_free(x);
    vc_model_free(y);
}

/* later verl's router replay on the MoE actor of test_lora_experts: R2 records the routing in the old-log-prob
 * pass and the update routes to it. With lr 0 the weights never move, so replay must give the run without it
 * bit for bit: any misplaced token (2 mini-batches x 2 epochs, shuffled, packed, shared prompts) would route
 * elsewhere. R3 is R2 (the old-log-prob pass computes what the rollout did). Bad modes are refused. */
static void test_router_replay(void) {
    static const char *KEYS[] = { "actor/pg_loss", "actor/grad_norm", "actor/entropy", "actor/ppo_kl", NULL };
    static const char *MODES[] = { "disabled", "R2", "R3" };
    static const char *MORE[] = { "", "|actor_rollout_ref.actor.use_prefix_grouper=true|actor_rollout_ref.actor.shuffle=true" };
    for (int v = 0; v < 2; v++) {
        double got[3][4];
        for (int k = 0; k < 3; k++) {
            char extra[700], name[16], mp[400];
            snprintf(name, sizeof name, "rr%d%d", v, k);
            snprintf(extra, sizeof extra, "algorithm.adv_estimator=grpo|actor_rollout_ref.model.path=%s/moe|"
                     "actor_rollout_ref.actor.optim.lr=0|actor_rollout_ref.actor.entropy_coeff=0.01|"
                     "actor_rollout_ref.actor.router_replay.mode=%s%s", dir, MODES[k],
                     MORE[v]);
            CHECK_OK(run(name, 1, extra));
            snprintf(mp, sizeof mp, "%s/%s/metrics.jsonl", dir, name);
            vc_metrics *mt = NULL;
            CHECK_OK(vc_metrics_read(mp, &mt));
            for (int i = 0; KEYS[i]; i++) {
                const vc_metric_series *s = mt ? vc_metrics_find(mt, KEYS[i]) : NULL;
                got[k][i] = s && s->n ? s->y[s->n - 1] : NAN;
            }
            vc_metrics_free(mt);
        }
        for (int i = 0; KEYS[i]; i++)
            CHECK_MSG(!isnan(got[0][i]) && got[1][i] == got[0][i] && got[2][i] == got[1][i] && (i != 1 || got[0][i] > 0),
                      "router replay%s: %s %.9g without, %.9g R2, %.9g R3", MORE[v], KEYS[i], got[0][i], got[1][i],
                      got[2][i]);
        printf("router replay%s: R2 and R3 with lr 0 equal the run without (grad_norm %.9g)\n", v ? " (shared prompts)" : "",
               got[1][1]);
    }
    char extra[400];
    snprintf(extra, sizeof extra, "actor_rollout_ref.model.path=%s/moe|actor_rollout_ref.actor.router_replay.mode=R5", dir);
    vc_status st = run("rrbad", 1, extra);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "router_replay.mode=R5"), "%s", vc_last_error());
    snprintf(extra, sizeof extra, "actor_rollout_ref.model.path=%s/moe|actor_rollout_ref.actor.router_replay.mode=R3|"
             "algorithm.rollout_correction.bypass_mode=true", dir);
    st = run("rrbad", 1, extra);
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "bypass_mode"), "%s", vc_last_error());
}

/* later verl's on-policy distillation: with the actor's own weights as the teacher the first step's loss is 0
 * exactly (the same log-probs); a teacher keyed by the rows' data source; refusals named */
static void test_distillation(void) {
    char extra[700], mp[400];
    snprintf(extra, sizeof extra, "algorithm.adv_estimator=grpo|distillation.enabled=true|"
             "distillation.teacher_models.teacher_model.model_path=%s/model|"
             "distillation.distillation_loss.use_task_rewards=false|actor_rollout_ref.actor.ppo_epochs=1|"
             "actor_rollout_ref.actor.ppo_mini_batch_size=2", dir); /* one update of the step's weights */
    CHECK_OK(run("ds", 2, extra));
    snprintf(mp, sizeof mp, "%s/ds/metrics.jsonl", dir);
    vc_metrics *mt = NULL;
    CHECK_OK(vc_metrics_read(mp, &mt));
    const vc_metric_series *l = mt ? vc_metrics_find(mt, "distillation/loss") : NULL;
    const vc_metric_series *g = mt ? vc_metrics_find(mt, "actor/grad_norm") : NULL;
    CHECK_MSG(l && l->n == 2 && l->y[0] == 0 && g && g->y[0] == 0, "distillation from itself: loss %g, grad_norm %g",
              l && l->n ? l->y[0] : NAN, g && g->n ? g->y[0] : NAN);
    vc_metrics_free(mt);
    /* forward_kl_topk from itself: the teacher's top 8 are the student's, the loss 0 and no gradient; the
     * masses equal, the top-k sets overlap wholly (later verl's chunked top-k keys taken) */
    size_t at = strlen(extra);
    snprintf(extra + at, sizeof extra - at, "|distillation.distillation_loss.loss_mode=forward_kl_topk|"
             "distillation.distillation_loss.topk=8|+distillation.distillation_loss.use_chunked_topk=true|"
             "+distillation.distillation_loss.chunked_topk_chunk_size=4096");
    CHECK_OK(run("dk", 1, extra));
    snprintf(mp, sizeof mp, "%s/dk/metrics.jsonl", dir);
    CHECK_OK(vc_metrics_read(mp, &mt));
    l = mt ? vc_metrics_find(mt, "distillation/loss") : NULL;
    g = mt ? vc_metrics_find(mt, "actor/grad_norm") : NULL;
    const vc_metric_series *sm = mt ? vc_metrics_find(mt, "distillation/student_mass") : NULL;
    const vc_metric_series *tm = mt ? vc_metrics_find(mt, "distillation/teacher_mass") : NULL;
    CHECK_MSG(l && g && sm && tm && l->y[0] == 0 && g->y[0] == 0 && sm->y[0] == tm->y[0] && sm->y[0] > 0,
              "forward_kl_topk from itself: loss %g, grad_norm %g, masses %g / %g", l ? l->y[0] : NAN,
              g ? g->y[0] : NAN, sm ? sm->y[0] : NAN, tm ? tm->y[0] : NAN);
    const vc_metric_series *ov = mt ? vc_metrics_find(mt, "distillation/overlap_ratio") : NULL;
    const vc_metric_series *oa = mt ? vc_metrics_find(mt, "distillation/overlap_token_advantage") : NULL;
    CHECK_MSG(ov && oa && ov->y[0] == 1 && oa->y[0] == 0, "forward_kl_topk from itself: overlap %g, advantage %g",
              ov ? ov->y[0] : NAN, oa ? oa->y[0] : NAN);
    vc_metrics_free(mt);
    /* a teacher with other weights (the MoE model of test_lora_experts shares the vocabulary), keyed by the
     * rows' data source, as a loss beside the task's, and as a policy gradient */
    snprintf(extra, sizeof extra, "algorithm.adv_estimator=grpo|distillation.enabled=true|"
             "+distillation.teacher_models.a.model_path=%s/moe|+distillation.teacher_models.a.key=verlc/addition|"
             "+distillation.teacher_models.b.model_path=%s/model|+distillation.teacher_models.b.key=openai/gsm8k|"
             "distillation.distillation_loss.distillation_loss_coef=0.5|"
             "distillation.distillation_loss.use_policy_gradient=true", dir, dir);
    CHECK_OK(run("dt", 1, extra));
    snprintf(mp, sizeof mp, "%s/dt/metrics.jsonl", dir);
    CHECK_OK(vc_metrics_read(mp, &mt));
    l = mt ? vc_metrics_find(mt, "distillation/loss") : NULL;
    const vc_metric_series *ab = mt ? vc_metrics_find(mt, "distillation/abs_loss") : NULL;
    const vc_metric_series *kl = mt ? vc_metrics_find(mt, "distillation/ppo_kl") : NULL;
    CHECK_MSG(l && ab && kl && ab->y[0] > 0 && isfinite(l->y[0]), "distillation from another model: %g, abs %g",
              l ? l->y[0] : NAN, ab ? ab->y[0] : NAN);
    vc_metrics_free(mt);
    static const struct { const char *keys, *err; vc_status st; } BAD[] = {
        { "distillation.distillation_loss.loss_mode=forward_kl_topk|distillation.distillation_loss.topk=0", "topk=0",
          VC_ERR_ARG },
        { "distillation.distillation_loss.loss_mode=k1", "k1", VC_ERR_ARG },
        { "distillation.distillation_loss.loss_mode=forward_kl_topk|+distillation.distillation_loss.use_chunked_topk=true|"
          "+distillation.distillation_loss.chunked_topk_chunk_size=0", "chunked_topk_chunk_size=0", VC_ERR_ARG },
        { "distillation.teacher_key=ability", "teacher_key", VC_ERR_UNSUPPORTED },
        { "+distillation.teacher_models.x.key=openai/gsm8k|+distillation.teacher_models.x.model_path=MODEL",
          "verlc/addition", VC_ERR_ARG },
        { "+distillation.teacher_models.x.model_path=MODEL", "distillation.teacher_models.x.key", VC_ERR_MISSING },
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char keys[300], *mdl;
        snprintf(keys, sizeof keys, "%s", BAD[i].keys);
        if ((mdl = strstr(keys, "MODEL"))) { /* a named teacher beside the default entry */
            *mdl = 0;
            snprintf(extra, sizeof extra, "algorithm.adv_estimator=grpo|distillation.enabled=true|%s%s/model",
                     keys, dir);
        } else
            snprintf(extra, sizeof extra, "algorithm.adv_estimator=grpo|distillation.enabled=true|"
                     "distillation.teacher_models.teacher_model.model_path=%s/model|%s", dir, keys);
        vc_status st = run("dbad", 1, extra);
        CHECK_MSG(st == BAD[i].st && strstr(vc_last_error(), BAD[i].err), "%s: %s", BAD[i].keys, vc_last_error());
    }
    CHECK(run("dbad", 1, "algorithm.adv_estimator=grpo|distillation.enabled=true") == VC_ERR_MISSING &&
          strstr(vc_last_error(), "model_path"));
}

static double first_metric(const char *run_dir, const char *name) {
    char mp[400];
    snprintf(mp, sizeof mp, "%s/%s/metrics.jsonl", dir, run_dir);
    vc_metrics *mt = NULL;
    double v = NAN;
    if (!vc_metrics_read(mp, &mt)) {
        const vc_metric_series *s = vc_metrics_find(mt, name);
        if (s && s->n) v = s->y[0];
    }
    vc_metrics_free(mt);
    return v;
}

/* later verl's skip.rollout: a listed step's generation is dumped, and read back by a later run in place of
 * generating (so a sampling change does not reach it); repeat reads the nearest dumped step; a damaged dump
 * is an error naming the file */
static void test_rollout_skip(void) {
    char extra[700], keep[700];
    snprintf(keep, sizeof keep, "algorithm.adv_estimator=grpo|skip.rollout.enable=true|skip.rollout.dump_dir=%s/dumps|"
             "skip.rollout.steps=[1]", dir);
    CHECK_OK(run("sk1", 1, keep));
    snprintf(extra, sizeof extra, "%s|actor_rollout_ref.rollout.top_k=1", keep); /* greedy: other samples */
    CHECK_OK(run("sk2", 1, extra));
    CHECK_OK(run("sk3", 1, "algorithm.adv_estimator=grpo|actor_rollout_ref.rollout.top_k=1"));
    double a = first_metric("sk1", "response_length/mean"), b = first_metric("sk2", "response_length/mean");
    double c = first_metric("sk3", "response_length/mean");
    /* the policy's entropy over the responses' positions: a function of the tokens sampled */
    double ga = first_metric("sk1", "actor/entropy"), gb = first_metric("sk2", "actor/entropy");
    double gc = first_metric("sk3", "actor/entropy");
    printf("skip.rollout: entropy %.9g sampled, %.9g read back with top_k=1 set, %.9g greedy (response lengths %g %g "
           "%g)\n", ga, gb, gc, a, b, c);
    CHECK_MSG(a == b && ga == gb && !isnan(ga), "the dumped step was not read back (%g / %g, entropy %g / %g)", a, b,
              ga, gb);
    CHECK_MSG(gc != ga, "greedy sampling gave the sampled step's responses");
    /* repeat: steps 1 and 2 listed, only step 1 dumped: step 2 reads step 1's */
    snprintf(extra, sizeof extra, "%s|skip.rollout.action=repeat|skip.rollout.steps=[1,2]", keep);
    CHECK_OK(run("sk4", 2, extra));
    char p[600];
    snprintf(p, sizeof p, "%s/dumps/gsm8k_verl_examples", dir);
    CHECK(vc_file_exists(p));
    snprintf(extra, sizeof extra, "%s|skip.rollout.action=random", keep);
    CHECK(run("sk5", 1, extra) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "action=random"));
    /* a dump of other prompts (the data changed): refused, not scored against the wrong rows */
    char rows2[512] = "", tp[400];
    for (int i = 0; i < 4; i++)
        snprintf(rows2 + strlen(rows2), sizeof rows2 - strlen(rows2), "{\"data_source\":\"verlc/addition\",\"prompt\":"
                 "[{\"role\":\"user\",\"content\":\"%d+%d=\"}],\"reward_model\":{\"ground_truth\":\"%d\"}}\n",
                 i + 50, i, 2 * i + 50);
    snprintf(tp, sizeof tp, "%s/train2.jsonl", dir);
    CHECK_OK(vc_write_file_atomic(tp, rows2, strlen(rows2)));
    snprintf(extra, sizeof extra, "%s|data.train_files=%s", keep, tp);
    vc_status sd = run("sk7", 1, extra);
    CHECK_MSG(sd == VC_ERR_FORMAT && strstr(vc_last_error(), "data changed"), "%s", vc_last_error());
    /* a damaged dump: the error names it */
    char cmd[900];
    snprintf(cmd, sizeof cmd, "f=$(ls %s/dumps/*/*/1/gen_batch.rank0.vcrows) && head -c 100 $f > $f.x && mv $f.x $f", dir);
    CHECK(system(cmd) == 0);
    vc_status st = run("sk6", 1, keep);
    CHECK_MSG(st == VC_ERR_FORMAT && strstr(vc_last_error(), "gen_batch.rank0.vcrows"), "%s", vc_last_error());
}

/* the prompts' order: verl's data loader (torchdata's RandomSampler; torch 2.15's randperm printed these); each batch
 * of 2 the next rows of the epoch's permutation */
/* the dataset's rows (their source lines), the trainer made from the overrides of order_is */
static vc_status rows_are(const char *extra, const int64_t *lines, size_t n);

static vc_status order_is(const char *extra, const uint32_t want[2][4]) {
    char buf[1024], *argv[16];
    snprintf(buf, sizeof buf, "actor_rollout_ref.model.path=%s/model|data.train_files=%s/train.jsonl|data.val_files=null|"
             "data.train_batch_size=2|data.max_prompt_length=16|data.max_response_length=3|algorithm.adv_estimator=grpo|"
             "actor_rollout_ref.actor.ppo_mini_batch_size=2|trainer.resume_mode=disable|%s", dir, dir, extra);
    int n = 0;
    for (char *x = strtok(buf, "|"); x && n < 16; x = strtok(NULL, "|")) argv[n++] = x;
    vc_config *cfg = NULL;
    vc_rl_trainer *t = NULL;
    vc_status st = vc_config_load_ex(NULL, 0, n, argv, &cfg);
    if (!st) vc_config_set_quiet(cfg, 1), st = vc_rl_trainer_new(cfg, &t);
    int ok = !st;
    if (!want) { /* rows_are's: the lines in ROW_LINES */
        ok = ok && t->train->n == ROW_N;
        for (size_t i = 0; ok && i < ROW_N; i++) ok = t->train->p[i].line == ROW_LINES[i];
        CHECK_MSG(ok || st, "%s: the dataset's rows are not verl's", extra);
    }
    for (int e = 0; ok && want && e < 2; e++)
        for (int b = 0; ok && b < 2; b++) {
            const uint32_t *idx;
            ok = vc_epoch_iter_next(&t->it, &idx) == 2 && !memcmp(idx, want[e] + 2 * b, 2 * sizeof *idx);
        }
    CHECK_MSG(ok || st || !want, "%s: the prompts are not in verl's order", extra);
    vc_rl_trainer_free(t);
    vc_config_free(cfg);
    return st;
}

static vc_status rows_are(const char *extra, const int64_t *lines, size_t n) {
    ROW_LINES = lines, ROW_N = n;
    return order_is(extra, NULL);
}

static void test_data_order(void) {
    static const uint32_t DEFAULT[2][4] = { { 0, 1, 3, 2 }, { 1, 3, 0, 2 } }; /* seed null, 8 workers: 2nd, 4th */
    static const uint32_t SEED7[2][4] = { { 3, 2, 0, 1 }, { 2, 0, 3, 1 } };   /* seed 7, no workers: 1st, 2nd */
    static const uint32_t PLAIN[2][4] = { { 0, 1, 2, 3 }, { 0, 1, 2, 3 } };
    CHECK_OK(order_is("data.seed=null", DEFAULT));
    CHECK_OK(order_is("data.seed=7|data.dataloader_num_workers=0", SEED7));
    CHECK_OK(order_is("data.shuffle=false", PLAIN));
    /* data.train_max_samples: numpy's default_rng(data.seed).choice(4, k) as verl's RLHFDataset draws them (numpy 2.4
     * printed these rows), the first ones with a null seed or without shuffle, all of them at 0 */
    static const int64_t S42[3] = { 4, 1, 3 }, S5[2] = { 4, 3 }, FIRST[3] = { 1, 2, 3 }, ALL[4] = { 1, 2, 3, 4 };
    CHECK_OK(rows_are("data.train_max_samples=3|data.seed=42", S42, 3));
    CHECK_OK(rows_are("data.train_max_samples=2|data.seed=5", S5, 2));
    CHECK_OK(rows_are("data.train_max_samples=3", FIRST, 3));
    CHECK_OK(rows_are("data.train_max_samples=3|data.seed=42|data.shuffle=false", FIRST, 3));
    CHECK_OK(rows_are("data.train_max_samples=0", ALL, 4));
    vc_status st = rows_are("data.train_max_samples=3|data.seed=-1", ALL, 4);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "data.seed=-1"), "%s", vc_last_error());
    st = order_is("data.dataloader_num_workers=-2", PLAIN);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "data.dataloader_num_workers=-2"), "%s", vc_last_error());
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_tckpt_%d", (int)getpid());
    setup();
    test_data_order();
    /* 3 steps straight (2 batches per epoch: the third starts epoch 1) vs 2 steps then resume to 3 */
    CHECK_OK(run("a", 3, ""));
    CHECK_OK(run("b", 2, ""));
    CHECK(exists("b", "global_step_2/rl_state.json") && exists("b", "global_step_2/critic/value_head.bin"));
    CHECK_OK(run("b", 3, ""));
    /* layout and rotation (keep 2) */
    CHECK_MSG(!exists("a", "global_step_1"), "global_step_1 was not rotated away");
    CHECK(exists("a", "global_step_2/actor/model.safetensors") && exists("a", "global_step_3/actor/optim.bin"));
    CHECK(exists("a", "global_step_3/actor/trainer_state.json") && exists("a", "global_step_3/critic/optim.bin"));
    CHECK(exists("a", "global_step_3/rl_state.json") && exists("a", "hf_model/config.json"));
    DIR *d = NULL;
    char rd[400];
    snprintf(rd, sizeof rd, "%s/a", dir);
    if ((d = opendir(rd))) {
        struct dirent *e;
        while ((e = readdir(d))) CHECK_MSG(e->d_name[0] != '.' || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."),
                                           "left behind: %s", e->d_name);
        closedir(d);
    }
    char *text = NULL;
    size_t n = 0;
    snprintf(rd, sizeof rd, "%s/a/latest_checkpointed_iteration.txt", dir);
    CHECK_OK(vc_read_file(rd, &text, &n));
    CHECK(text && atoi(text) == 3);
    free(text);
    /* exact resume */
    same_file("a", "b", "hf_model/model.safetensors");
    same_file("a", "b", "global_step_3/actor/optim.bin");
    same_file("a", "b", "global_step_3/critic/model.safetensors");
    same_file("a", "b", "global_step_3/critic/optim.bin");
    same_file("a", "b", "global_step_3/critic/value_head.bin");
    same_file("a", "b", "global_step_3/rl_state.json");
    /* a corrupt optimiser state is an error naming the file, not a silent fresh start */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -r %s/b %s/c && head -c 100 %s/b/global_step_3/actor/optim.bin > %s/c/global_step_3/actor/optim.bin",
             dir, dir, dir, dir);
    CHECK(system(cmd) == 0);
    vc_status st = run("c", 4, "");
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "optim.bin"), "corrupt optim.bin: %s", vc_last_error());
    test_lora();
    test_lora_experts();
    test_router_replay();
    test_distillation();
    test_rollout_skip();
    /* DAPO's overlong reward shaping: with a buffer as long as max_response_length every response loses
     * factor * length / buffer, and step 1 samples the same responses */
    CHECK_OK(run("oa", 1, "algorithm.adv_estimator=grpo"));
    CHECK_OK(run("ob", 1, "algorithm.adv_estimator=grpo|reward_model.overlong_buffer.enable=true|"
                          "reward_model.overlong_buffer.len=3|reward_model.overlong_buffer.penalty_factor=0.5"));
    {
        char pa[400], pb[400];
        snprintf(pa, sizeof pa, "%s/oa/metrics.jsonl", dir);
        snprintf(pb, sizeof pb, "%s/ob/metrics.jsonl", dir);
        vc_metrics *ma = NULL, *mb = NULL;
        CHECK_OK(vc_metrics_read(pa, &ma));
        CHECK_OK(vc_metrics_read(pb, &mb));
        const vc_metric_series *sa = ma ? vc_metrics_find(ma, "critic/score/mean") : NULL;
        const vc_metric_series *sb = mb ? vc_metrics_find(mb, "critic/score/mean") : NULL;
        const vc_metric_series *la = ma ? vc_metrics_find(ma, "response_length/mean") : NULL;
        CHECK(sa && sb && la && sa->n == 1 && sb->n == 1);
        if (sa && sb && la) {
            printf("overlong buffer: score %g -> %g with response length %g\n", sa->y[0], sb->y[0], la->y[0]);
            CHECK_NEAR(sb->y[0], sa->y[0] - 0.5 * la->y[0] / 3.0, 1e-5);
        }
        vc_metrics_free(ma);
        vc_metrics_free(mb);
    }
    st = run("oc", 1, "reward_model.overlong_buffer.enable=true|reward_model.overlong_buffer.len=9");
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "overlong_buffer.len"), "%s", vc_last_error());
    st = run("d", 1, "actor_rollout_ref.rollout.gpu_memory_utilization=1.5");
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "gpu_memory_utilization"), "%s", vc_last_error());
    if (!vc_t_fail) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    }
    return vc_test_done();
}
