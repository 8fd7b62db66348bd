/* `verlc train --print-config`: the configuration a training run would use, as YAML (verl's
 * `--cfg job`). vc_cmd_train (elsewhere) calls this when it sees --print-config; for a real run it
 * builds its config the same way:
 *     int print; vc_config *cfg;
 *     if (vc_config_load_argv(argc - 1, argv + 1, &print, &cfg) != VC_OK) -> report vc_last_error(), exit 2
 * (argv[0] is the subcommand name; the arguments are --config FILE / --config-path D --config-name N,
 * --print-config, and verl's key=value overrides). */
#include "verlc/config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vc_train_print_config(int argc, char **argv);

/* argv[0] is the subcommand name; `--json` prints JSON instead of YAML. */
int vc_train_print_config(int argc, char **argv) {
    char *args[argc > 0 ? argc : 1];
    int n = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else args[n++] = argv[i];
    }
    vc_config *cfg = NULL;
    if (vc_config_load_argv(n, args, NULL, &cfg) != VC_OK) {
        fprintf(stderr, "verlc %s: %s\n", argc > 0 ? argv[0] : "train", vc_last_error());
        return 2;
    }
    int rc = 0;
    if (json) {
        char *s = vc_config_to_json(cfg, NULL, 1);
        if (s) printf("%s\n", s);
        else rc = 1;
        free(s);
    } else if (vc_config_write_yaml(cfg, NULL, stdout) != VC_OK) {
        rc = 1;
    }
    if (rc) fprintf(stderr, "verlc %s: %s\n", argc > 0 ? argv[0] : "train", vc_last_error());
    vc_config_free(cfg);
    return rc;
}
