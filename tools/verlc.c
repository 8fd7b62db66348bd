/* verlc: the command-line program. Argument dispatch only; every subcommand is a thin layer
 * over libverlc in tools/cmd_<name>.c. */
#include "cli.h"
#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
};

int main(int argc, char **argv) {
    const struct command cmds[] = {
        { "demo", vc_cmd_demo, "run the embedded demo (SFT then GRPO on a tiny model)" },
        { "train", vc_cmd_train, "RL training (PPO/GRPO family) with verl's key=value configuration" },
        { "sft", vc_cmd_sft, "supervised fine-tuning on JSONL data" },
        { "generate", vc_cmd_generate, "batched sampling from a model" },
        { "check", vc_cmd_check, "model compatibility check against Hugging Face references" },
        { "inspect", vc_cmd_inspect, "show how checkpoint tensors map onto model slots" },
        { "init", vc_cmd_init, "write a random-weight checkpoint for a config.json" },
        { "export", vc_cmd_export, "export a checkpoint to a Hugging Face directory" },
        { "tokenize", vc_cmd_tokenize, "JSONL text rows to token ids" },
        { "detokenize", vc_cmd_detokenize, "JSONL id rows to text" },
        { "chat-template", vc_cmd_chat_template, "render a chat template for JSON messages" },
        { "algos", vc_cmd_algos, "evaluate verl's core algorithm functions from JSON" },
        { "data", vc_cmd_data, "dataset conversion (data gsm8k ..., data jsonl / parquet: rows between the formats)" },
        { "model_merger", vc_cmd_model_merger, "merge a verl FSDP checkpoint's ranks into a Hugging Face folder "
                                                 "(verl.model_merger)" },
        { "eval", vc_cmd_eval, "score a file of generated responses per data source (verl's main_eval)" },
        { "report", vc_cmd_report, "write an HTML report for a run directory" },
        { "tools", vc_cmd_tools, "load a multi-turn tool config (MCP servers included) and try a call" },
        { "bench", vc_cmd_bench, "benchmarks (forward, train, generate, tokenize, allreduce)" },
    };
    const int n = (int)(sizeof cmds / sizeof cmds[0]);
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        printf("usage: verlc <command> [options]\n\ncommands:\n");
        for (int i = 0; i < n; i++)
            if (cmds[i].fn) printf("  %-14s %s\n", cmds[i].name, cmds[i].help);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        if (!cmds[i].fn) {
            fprintf(stderr, "verlc: '%s' is not available in this build\n", argv[1]);
            return 2;
        }
        return cmds[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "verlc: unknown command '%s' (see verlc --help)\n", argv[1]);
    return 2;
}
