/* `verlc model_merger merge|test --backend fsdp --local_dir DIR [--target_dir OUT | --test_hf_dir REF]`: verl's
 * `python -m verl.model_merger` for FSDP checkpoints (include/verlc/merge.h). Its other flags are taken as verl's
 * FSDP backend takes them (--tie-word-embedding, --is-value-model: Megatron's only; --trust-remote-code,
 * --use_cpu_initialization: nothing to do here); uploading (--hf_upload_path) is refused. */
#include "cli.h"
#include "verlc/merge.h"
#include <stdio.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: verlc model_merger merge --backend fsdp --local_dir DIR [--target_dir OUT (tmp)]\n"
                    "       verlc model_merger test --backend fsdp --local_dir DIR --test_hf_dir REF\n"
                    "  DIR: a verl FSDP checkpoint (global_step_N/actor: model_world_size_W_rank_R.pt, fsdp_config.json,\n"
                    "  huggingface/); OUT gets its weights joined in bfloat16 with the config and tokenizer files\n"
                    "  (LoRA adapters apart in OUT/lora_adapter); test compares them with REF instead\n");
    return 2;
}

int vc_cmd_model_merger(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "merge") && strcmp(argv[1], "test"))) return usage();
    int test = !strcmp(argv[1], "test");
    const char *backend = NULL;
    vc_verl_merge_opts o = { .target_dir = test ? NULL : "tmp", .log = stderr };
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--tie-word-embedding") || !strcmp(k, "--trust-remote-code") || !strcmp(k, "--is-value-model") ||
            !strcmp(k, "--use_cpu_initialization") || !strcmp(k, "--private"))
            continue;
        if (!v) return usage();
        i++;
        if (!strcmp(k, "--backend")) backend = v;
        else if (!strcmp(k, "--local_dir")) o.local_dir = v;
        else if (!strcmp(k, "--target_dir") && !test) o.target_dir = v;
        else if (!strcmp(k, "--test_hf_dir") && test) o.test_hf_dir = v;
        else if (!strcmp(k, "--hf_upload_path")) {
            fprintf(stderr, "verlc model_merger: --hf_upload_path: uploading to the Hugging Face Hub is not done by "
                            "verlc (upload the merged folder with huggingface-cli)\n");
            return 2;
        } else {
            fprintf(stderr, "verlc model_merger: unknown argument '%s'\n", k);
            return usage();
        }
    }
    if (!backend || !o.local_dir || (test && !o.test_hf_dir)) return usage();
    if (strcmp(backend, "fsdp")) {
        fprintf(stderr, "verlc model_merger: --backend %s: only fsdp checkpoints are merged (verlc reads no Megatron "
                        "distributed checkpoint)\n", backend);
        return 2;
    }
    if (vc_verl_merge(&o)) {
        fprintf(stderr, "verlc model_merger: %s\n", vc_last_error());
        return 1;
    }
    if (!test) fprintf(stderr, "model_merger: %s -> %s\n", o.local_dir, o.target_dir);
    return 0;
}
