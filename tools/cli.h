/* Subcommand entry points of the verlc program; each lives in tools/cmd_<name>.c. */
#ifndef VC_CLI_H
#define VC_CLI_H
#define VC_CMD(fn) int fn(int argc, char **argv) __attribute__((weak))
VC_CMD(vc_cmd_check);
VC_CMD(vc_cmd_inspect);
VC_CMD(vc_cmd_init);
VC_CMD(vc_cmd_bench);
VC_CMD(vc_cmd_tokenize);
VC_CMD(vc_cmd_detokenize);
VC_CMD(vc_cmd_chat_template);
VC_CMD(vc_cmd_algos);
VC_CMD(vc_cmd_generate);
VC_CMD(vc_cmd_sft);
VC_CMD(vc_cmd_export);
VC_CMD(vc_cmd_train);
VC_CMD(vc_cmd_data);
VC_CMD(vc_cmd_report);
VC_CMD(vc_cmd_demo);
VC_CMD(vc_cmd_tools);
VC_CMD(vc_cmd_eval);
VC_CMD(vc_cmd_model_merger);
/* `verlc bench <name>` entry points (tools/bench_<name>.c) */
VC_CMD(vc_bench_forward);
VC_CMD(vc_bench_train);
VC_CMD(vc_bench_generate);
VC_CMD(vc_bench_tokenize);
VC_CMD(vc_bench_allreduce);
VC_CMD(vc_bench_logprob);
VC_CMD(vc_bench_gdn);
VC_CMD(vc_bench_gemm);
/* the config printer used by `verlc train --print-config` */
VC_CMD(vc_train_print_config);
#undef VC_CMD
/* argv[1..] of a command taking verl's key=value overrides, with --device D / --precision P turned into
 * trainer.device=D / the actor's mixed_precision.param_dtype=P (cmd_train.c); 1 on failure (printed for `cmd`) */
int vc_cli_verl_args(const char *cmd, int argc, char **argv, char ***out, int *n);
void vc_cli_free_args(char **a, int n);
#endif
