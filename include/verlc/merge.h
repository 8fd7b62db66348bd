/* verl's model merger (`python -m verl.model_merger merge|test --backend fsdp`): a verl FSDP checkpoint's ranks
 * (global_step_N/actor: model_world_size_W_rank_R.pt, fsdp_config.json, huggingface/) into one Hugging Face folder. */
#ifndef VERLC_MERGE_H
#define VERLC_MERGE_H
#include "verlc/core.h"
#include <stdio.h>

typedef struct vc_verl_merge_opts {
    const char *local_dir;     /* the checkpoint's folder */
    const char *target_dir;    /* merge: the Hugging Face folder written (weights in bfloat16, config, tokenizer) */
    const char *test_hf_dir;   /* test: a Hugging Face folder the merged weights are compared with (nothing written) */
    const char *hf_config_dir; /* NULL: local_dir/huggingface */
    FILE *log;                 /* progress lines (NULL: none) */
} vc_verl_merge_opts;

/* Each rank's sharded state dict (DTensors) joined by its placements along the mesh's fsdp dimension; LoRA adapters
 * written apart into target_dir/lora_adapter (PEFT's layout), as verl's merger does. Errors name the file and tensor. */
vc_status vc_verl_merge(const vc_verl_merge_opts *o);
#endif
