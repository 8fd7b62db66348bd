/* Memory plan before the first step: weights, gradients, optimiser state and the activations of the
 * largest micro-batch (measured from the graph arena's peak in one trial step). */
#include "backend/cpu/cpu.h"
#include "trainer_dp.h"
#include "tensor/backend.h"
#include "verlc/cuda.h"
#include "verlc/device.h"
#include "verlc/vision.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status vc_parse_bytes(const char *s, size_t *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0)) return vc_fail(VC_ERR_ARG, "'%s' is not a byte size (e.g. 24G, 512M)", s);
    while (*end == ' ') end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; break;
    case 'M': mul = 1024.0 * 1024; break;
    case 'G': mul = 1024.0 * 1024 * 1024; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; break;
    case 0: break;
    default: return vc_fail(VC_ERR_ARG, "'%s': unknown size suffix (use K, M, G or T)", s);
    }
    if (*end) {
        end++;
        if (toupper((unsigned char)*end) == 'I') end++;
        if (toupper((unsigned char)*end) == 'B') end++;
        if (*end) return vc_fail(VC_ERR_ARG, "'%s': unknown size suffix (use K, M, G or T)", s);
    }
    *out = (size_t)(v * mul);
    return VC_OK;
}

/* the kB value of `key` in a /proc file (0: absent) */
static size_t proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0, n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            kb = strtoull(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb;
}

size_t vc_mem_available(void) { return proc_kb("/proc/meminfo", "MemAvailable") * 1024; }

size_t vc_mem_used_system(void) {
    size_t total = proc_kb("/proc/meminfo", "MemTotal"), free_kb = proc_kb("/proc/meminfo", "MemFree");
    size_t held = free_kb + proc_kb("/proc/meminfo", "Buffers") + proc_kb("/proc/meminfo", "Cached") +
                  proc_kb("/proc/meminfo", "SReclaimable");
    return total > held ? (total - held) * 1024 : 0;
}

size_t vc_mem_peak_rss(void) { return proc_kb("/proc/self/status", "VmHWM") * 1024; }

void vc_mem_metrics(double *allocated_gb, double *reserved_gb, double *cpu_used_gb) {
    size_t used = 0, reserved = 0;
    int gpu = vc_device_is_gpu(), ok = !gpu || vc_cuda_mem_peak(&used, &reserved) == VC_OK;
    if (!gpu) used = reserved = vc_mem_peak_rss();
    *allocated_gb = ok ? used / 1073741824.0 : NAN;
    *reserved_gb = ok ? reserved / 1073741824.0 : NAN;
    *cpu_used_gb = vc_mem_used_system() / 1073741824.0;
}

static double gib(size_t b) { return b / 1073741824.0; }

/* "bf16 weight copies X GiB + " where a step makes them, else "" (one static buffer: the plan's log line) */
static const char *copies_text(const vc_mem_plan *p) {
    static char buf[64];
    if (!p->copies) return "";
    snprintf(buf, sizeof buf, "bf16 weight copies %.3f GiB + ", gib(p->copies));
    return buf;
}

vc_status vc_plan_available(int on_gpu, size_t *out) {
    const char *env = getenv("VERLC_MEMORY_AVAILABLE");
    if (env && *env) {
        vc_status st = vc_parse_bytes(env, out);
        return st ? vc_fail_ctx(st, "VERLC_MEMORY_AVAILABLE") : VC_OK;
    }
    size_t used = 0, gfree = 0, gtotal = 0;
    *out = on_gpu ? 0 : vc_mem_available(); /* 0: unknown, nothing checked */
    if (*out) *out += vc_cpu_bf16_copies_spare(); /* (kept for the next copies: available to them) */
    if (on_gpu && vc_cuda_mem_info(&used, &gfree, &gtotal) == VC_OK) *out = gfree;
    else if (on_gpu) vc_clear_error(); /* the query's failure: planned without the check, not an error */
    return VC_OK;
}

const char *vc_plan_available_source(int on_gpu) {
    const char *env = getenv("VERLC_MEMORY_AVAILABLE");
    return env && *env ? "VERLC_MEMORY_AVAILABLE" : on_gpu ? "free memory of the GPU" : "MemAvailable";
}

vc_status vc_trainer_plan(vc_trainer *t, int64_t max_micro_tokens, size_t max_bytes, FILE *log, vc_mem_plan *plan) {
    return vc_trainer_plan_ex(t, max_micro_tokens, max_micro_tokens, max_bytes, log, plan);
}

vc_status vc_trainer_plan_ex(vc_trainer *t, int64_t max_micro_tokens, int64_t max_seq_len, size_t max_bytes, FILE *log,
                             vc_mem_plan *plan) {
    return vc_trainer_plan_rows(t, max_micro_tokens, max_seq_len, 0, max_bytes, log, plan);
}

/* the trial's loss mask: the last `tail` tokens of each sequence (NULL: every token, or no memory: reported) */
static float *tail_mask(const int64_t *cu, int n_seq, int64_t tail, vc_status *st) {
    if (tail <= 0) return NULL;
    float *mask = vc_malloc(sizeof(float) * (size_t)(cu[n_seq] > 0 ? cu[n_seq] : 1));
    if (!mask) *st = VC_ERR_NOMEM;
    for (int i = 0; mask && i < n_seq; i++)
        for (int64_t k = cu[i]; k < cu[i + 1]; k++) mask[k] = cu[i + 1] - k <= tail ? 1.0f : 0.0f;
    return mask;
}

vc_status vc_trainer_plan_rows(vc_trainer *t, int64_t max_micro_tokens, int64_t max_seq_len, int64_t loss_tail,
                               size_t max_bytes, FILE *log, vc_mem_plan *plan) {
    return vc_trainer_plan_loss(t, max_micro_tokens, max_seq_len, loss_tail, NULL, NULL, max_bytes, log, plan);
}

/* the trial's gradients back to zero: the model's, and a trainer's extra tensors' (a critic's value head) */
static void zero_trial_grads(vc_trainer *t) {
    vc_model_zero_grad(t->model);
    if (t->dp && t->dp->zero2) return; /* its gradients live in its working area, rebuilt each backward */
    for (int i = 0; i < t->n_params; i++)
        if (t->grads[i]) vc_be()->zero(t->grads[i], t->sizes[i] * sizeof(float));
}

vc_status vc_trainer_plan_loss(vc_trainer *t, int64_t max_micro_tokens, int64_t max_seq_len, int64_t loss_tail,
                               vc_token_loss_fn fn, void *ctx, size_t max_bytes, FILE *log, vc_mem_plan *plan) {
    memset(plan, 0, sizeof *plan);
    size_t trained = 0;
    for (int i = 0; i < t->n_params; i++) trained += t->sizes[i];
    size_t wm, ws, wk; /* ZeRO-3: master shard + layer slots + tensors kept whole */
    plan->weights = (t->dp && t->dp->zero3 ? vc_dp_zero3_weight_floats(t, &wm, &ws, &wk)
                                           : (size_t)vc_model_param_count(t->model)) * 4;
    vc_tensor *const *lora = NULL; /* LoRA adapters: weights too (their gradients are among the trained) */
    for (int i = 0, n = vc_model_lora_params(t->model, &lora); i < n; i++) plan->weights += (size_t)lora[i]->n * 4;
    plan->grads = trained * 4; /* ZeRO-2: its shard + working area, set after the trial step below */
    plan->optim = vc_adamw_state_floats(&t->opt) * 4; /* this rank's: the whole model's, or its ZeRO-1 shard's */
    plan->on_gpu = vc_device_is_gpu();
    plan->copies = vc_model_weight_copies_bytes(t->model);
    vc_status s = vc_plan_available(plan->on_gpu, &plan->available);
    if (s) return s;
    /* host staging of one micro-batch: src (8) + ids, targets, masks, weights, -weights (4 each) per token */
    plan->host = (size_t)(max_micro_tokens > 2 ? max_micro_tokens : 2) * 28 + 64;
    plan->host += vc_model_qat_bytes(t->model); /* QAT: the full-precision copy of the quantized weights */
    plan->limit = max_bytes;
    if (max_micro_tokens < 2) max_micro_tokens = 2;
    if (max_seq_len < 2 || max_seq_len > max_micro_tokens) max_seq_len = max_micro_tokens;
    /* the trial micro-batch: sequences of max_seq_len tokens (the last one shorter) packed to the budget, so
     * attention costs what the longest rows cost, not the budget squared */
    int n_seq = (int)((max_micro_tokens + max_seq_len - 1) / max_seq_len);
    int32_t *ids = vc_malloc(sizeof *ids * (size_t)max_micro_tokens);
    int64_t *cu = vc_malloc(sizeof *cu * ((size_t)n_seq + 1));
    if (!ids || !cu) {
        free(ids);
        free(cu);
        return VC_ERR_NOMEM;
    }
    int64_t V = vc_cfg_out_vocab(vc_model_cfg(t->model)); /* inputs and targets */
    for (int64_t k = 0; k < max_micro_tokens; k++) ids[k] = (int32_t)((k * 7919) % V);
    for (int i = 0; i <= n_seq; i++) cu[i] = (int64_t)i * max_seq_len < max_micro_tokens ? (int64_t)i * max_seq_len : max_micro_tokens;
    float *mask = tail_mask(cu, n_seq, loss_tail, &s);
    vc_minibatch b = { n_seq, cu, ids, mask };
    const vc_images **each = NULL; /* every row leads with the images' tokens (the last, shorter one where they fit) */
    int64_t *span = NULL;
    if (!s && t->plan_images && vc_model_vision(t->model)) {
        each = vc_calloc((size_t)n_seq, sizeof *each);
        span = vc_calloc((size_t)n_seq, sizeof *span);
        if (!each || !span) s = VC_ERR_NOMEM;
        for (int q = 0; !s && q < n_seq; q++) {
            int64_t k = vc_images_trial_ids(t->model, t->plan_images, ids + cu[q], cu[q + 1] - cu[q]);
            if (k < 0 && q == 0)
                s = vc_fail(VC_ERR_ARG, "memory plan: the images do not fit a trial row of %lld tokens", (long long)cu[1]);
            else if (k >= 0) each[q] = t->plan_images, span[q] = k;
        }
        b.images = each;
        b.image_span = span;
    }
    vc_trainer_config saved = t->cfg;
    t->cfg.micro_bs = n_seq; /* the rows are one micro-batch, as the updates pack them */
    t->cfg.max_tokens = 0;
    vc_step_stats st;
    zero_trial_grads(t);
    vc_graph_clear_peak(t->g);
    if (log && t->rank == 0) /* (a minute or more on a CPU: said before it starts) */
        fprintf(log, "memory plan: a trial step of one %lld-token micro-batch (forward and backward)\n",
                (long long)max_micro_tokens);
    if (!s) s = vc_trainer_accumulate_ex(t, &b, fn, ctx, &st, 0);
    t->cfg = saved;
    zero_trial_grads(t);
    free(mask);
    free(ids);
    free(cu);
    free(each);
    free(span);
    if (s) return vc_fail_ctx(s, "memory plan trial step of %lld tokens", (long long)max_micro_tokens);
    /* 5% over the trial's peak: a step's gradient buffers are handed back and reused by size during backward, so
     * rows of other lengths or loss masks than the trial's peak a few percent higher or lower (2.1% higher on a
     * tiny SFT model) */
    plan->activations = vc_graph_peak_bytes(t->g) + vc_graph_peak_bytes(t->g) / 20;
    if (t->dp && t->dp->zero2) plan->grads = vc_dp_grad_floats(t) * 4; /* the trial sized the working area */
    plan->total = plan->weights + plan->grads + plan->optim + plan->copies + plan->activations;
    if (log && t->world > 1)
        fprintf(log, "rank %d/%d (%s): ", t->rank, t->world, vc_dp_sharding_name(t->dp));
    if (log)
        fprintf(log,
                "memory plan (device %s): weights %.3f GiB + grads %.3f GiB + %s %.3f GiB + %sactivations %.3f GiB "
                "(micro-batch of %lld tokens) = %.3f GiB of %s memory; %s %.3f GiB; host staging %.3f MiB\n",
                vc_device_name(), gib(plan->weights), gib(plan->grads), vc_adamw_name(&t->opt), gib(plan->optim),
                copies_text(plan), gib(plan->activations),
                (long long)max_micro_tokens, gib(plan->total), plan->on_gpu ? "device" : "backend",
                max_bytes ? "limit" : plan->on_gpu ? "free on the GPU" : "available", gib(max_bytes ? max_bytes : plan->available),
                plan->host / 1048576.0);
    if (max_bytes && plan->total > max_bytes)
        return vc_fail(VC_ERR_NOMEM,
                       "memory plan %.3f GiB (weights %.3f + grads %.3f + AdamW %.3f + activations %.3f) exceeds "
                       "the limit of %.3f GiB",
                       gib(plan->total), gib(plan->weights), gib(plan->grads), gib(plan->optim),
                       gib(plan->activations), gib(max_bytes));
    /* the weights, gradients and AdamW moments are allocated (and zeroed) already: the step adds the rest */
    if (!max_bytes && plan->available && plan->copies + plan->activations > plan->available)
        return vc_fail(VC_ERR_NOMEM, "memory plan needs %.3f GiB more (%sactivations %.3f GiB) but only %.3f GiB is "
                                     "available (%s)",
                       gib(plan->copies + plan->activations), copies_text(plan), gib(plan->activations),
                       gib(plan->available), vc_plan_available_source(plan->on_gpu));
    return VC_OK;
}
