/* verl-style command lines: `[--config FILE.yaml] [--print-config] key=value ...`, plus Hydra's
 * `--config-path DIR --config-name NAME` spelling of the same file. */
#include "config/cfg_internal.h"
#include <stdlib.h>
#include <string.h>

/* Value of "--opt VALUE" or "--opt=VALUE"; advances *i past a separate value. NULL if argv[*i] is not opt. */
static const char *opt_value(int argc, char **argv, int *i, const char *opt, vc_status *st) {
    size_t ol = strlen(opt);
    const char *a = argv[*i];
    if (strncmp(a, opt, ol)) return NULL;
    if (a[ol] == '=') return a + ol + 1;
    if (a[ol]) return NULL;
    if (*i + 1 >= argc) { *st = vc_fail(VC_ERR_ARG, "%s needs a value", opt); return NULL; }
    return argv[++*i];
}

static vc_status hydra_file(const char *dir, const char *name, char **out, int *engine) {
    *out = NULL;
    if (!name) return dir ? vc_fail(VC_ERR_ARG, "--config-path needs --config-name") : VC_OK;
    size_t nl = strlen(name);
    int has_ext = nl > 5 && !strcmp(name + nl - 5, ".yaml");
    char *file = malloc(nl + 6);
    if (!file) return vc_fail(VC_ERR_NOMEM, "out of memory");
    memcpy(file, name, nl + 1);
    if (!has_ext) memcpy(file + nl, ".yaml", 6);
    *out = dir ? vc_path_join(dir, file) : NULL;
    if (*out && vc_file_exists(*out)) { free(file); return VC_OK; }
    free(*out);
    *out = NULL;
    int builtin = !strcmp(file, "ppo_trainer.yaml");
    int megatron = !strcmp(file, "ppo_megatron_trainer.yaml");
    free(file);
    if (megatron) *engine = VC_ENGINE_MEGATRON; /* (ppo_trainer keeps a model_engine=... given beside it) */
    if (builtin || megatron) return VC_OK; /* verl's own defaults are the embedded ones */
    return vc_fail(VC_ERR_IO, "--config-name %s: no such file in %s", name, dir ? dir : "(no --config-path)");
}

/* `-m MODULE` (verl's `python3 -m MODULE` kept on the command line): the trainers verlc runs, and the module's
 * directory, against which Hydra resolves a relative --config-path; *dflt_path / *dflt_name: its @hydra.main()
 * defaults (NULL: verl's built-in ppo_trainer). The module file is read as Python finds it from the current
 * directory. */
static vc_status module_defaults(const char *mod, char **dir, char **dflt_path, char **dflt_name) {
    *dir = *dflt_path = *dflt_name = NULL;
    if (!strcmp(mod, "verl.trainer.main_ppo")) return (*dir = strdup("verl/trainer")) ? VC_OK : VC_ERR_NOMEM;
    if (strcmp(mod, "recipe.dapo.main_dapo"))
        return vc_fail(VC_ERR_UNSUPPORTED, "-m %s: that module runs a trainer of its own (Python); verlc train runs "
                       "verl.trainer.main_ppo's and recipe.dapo.main_dapo's", mod);
    size_t n = strlen(mod);
    char *file = malloc(n + 4), *text = NULL;
    if (!file) return VC_ERR_NOMEM;
    for (size_t i = 0; i <= n; i++) file[i] = mod[i] == '.' ? '/' : mod[i];
    memcpy(file + n, ".py", 4);
    size_t len = 0;
    vc_status st = vc_read_file(file, &text, &len);
    if (st) {
        st = vc_fail(VC_ERR_IO, "-m %s: no %s here (run verlc from the directory python -m would run from, where the "
                     "recipe's files are)", mod, file);
        free(file);
        return st;
    }
    *strrchr(file, '/') = 0;
    *dir = file;
    const char *at = strstr(text, "@hydra.main(");
    static const char *const KEYS[2] = { "config_path=\"", "config_name=\"" };
    char **outs[2] = { dflt_path, dflt_name };
    for (int k = 0; at && k < 2; k++) { /* (the decorator's string arguments) */
        const char *v = strstr(at, KEYS[k]), *close = strchr(at, ')');
        if (!v || (close && v > close)) continue;
        v += strlen(KEYS[k]);
        const char *e = strchr(v, '"');
        if (e && !(*outs[k] = strndup(v, (size_t)(e - v)))) st = VC_ERR_NOMEM;
    }
    free(text);
    return st;
}

/* later verl's engine group (`model_engine=dp|megatron|veomni|...`, applied before any key, as Hydra applies
 * groups) */
static vc_status model_engine(const char *v, int *engine) {
    if (!strcmp(v, "megatron")) *engine = VC_ENGINE_MEGATRON;
    else if (!strcmp(v, "veomni")) *engine = VC_ENGINE_VEOMNI;
    else if (!strcmp(v, "dp") || !strcmp(v, "fsdp")) *engine = VC_ENGINE_DP;
    else return vc_fail(VC_ERR_UNSUPPORTED, "model_engine=%s: verlc trains with its own engine and reads verl's dp (FSDP), "
                        "megatron and veomni configurations", v);
    return VC_OK;
}

vc_status vc_config_load_argv(int argc, char **argv, int *print_config, vc_config **out) {
    const char *file = NULL, *cpath = NULL, *cname = NULL, *module = NULL;
    int engine = VC_ENGINE_DP, groups = 0;
    char **ov = calloc(argc > 0 ? (size_t)argc : 1, sizeof *ov);
    int n = 0;
    vc_status st = VC_OK;
    char *hfile = NULL;
    *out = NULL;
    if (print_config) *print_config = 0;
    if (!ov) return vc_fail(VC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < argc && st == VC_OK; i++) {
        const char *v;
        if ((v = opt_value(argc, argv, &i, "--config", &st))) file = v;
        else if ((v = opt_value(argc, argv, &i, "--config-path", &st))) cpath = v;
        else if ((v = opt_value(argc, argv, &i, "--config-name", &st))) cname = v;
        else if ((v = opt_value(argc, argv, &i, "-m", &st)) || (v = opt_value(argc, argv, &i, "--module", &st))) {
            if (!*v || *v == '-') st = vc_fail(VC_ERR_ARG, "-m needs a module name (verl.trainer.main_ppo, recipe.dapo.main_dapo)");
            else if (strchr(v, '=')) /* (Hydra's -m, --multirun, takes sweeps of key=values) */
                st = vc_fail(VC_ERR_UNSUPPORTED, "-m %s: Hydra's multirun is not built in; run each setting apart", v);
            module = v;
        } else if (st != VC_OK) break;
        else if (!strcmp(argv[i], "--print-config") || !strcmp(argv[i], "--cfg=job") || !strcmp(argv[i], "--cfg"))
            { if (print_config) *print_config = 1; if (!strcmp(argv[i], "--cfg") && i + 1 < argc) i++; }
        else if (argv[i][0] == '-' && argv[i][1] == '-') st = vc_fail(VC_ERR_ARG, "unknown option '%s'", argv[i]);
        else if (!strchr(argv[i], '=') && argv[i][0] != '~')
            st = vc_fail(VC_ERR_ARG, "'%s' is not a key=value override", argv[i]);
        else if (!strncmp(argv[i], "model_engine=", 13)) st = model_engine(argv[i] + 13, &engine);
        else if (!strcmp(argv[i], "actor@actor_rollout_ref.actor=mlite_actor")) groups |= VC_GROUP_MLITE_ACTOR;
        else if (strchr(argv[i], '@') && strchr(argv[i], '@') < strchr(argv[i], '=')) /* group@package=option */
            st = vc_fail(VC_ERR_UNSUPPORTED, "'%s' selects an option of one of verl's config groups: verlc has "
                         "verl's ppo_trainer and ppo_megatron_trainer defaults built in (model_engine=dp|megatron|veomni) "
                         "and Megatron-lite's actor group (actor@actor_rollout_ref.actor=mlite_actor), not verl's group "
                         "files; set that option's keys instead", argv[i]);
        else ov[n++] = argv[i];
    }
    if (st == VC_OK && file && cname) st = vc_fail(VC_ERR_ARG, "give either --config or --config-name, not both");
    char *mdir = NULL, *mpath = NULL, *mname = NULL, *rel = NULL;
    if (st == VC_OK && module && !file) { /* Hydra: a relative config path is the module's */
        st = module_defaults(module, &mdir, &mpath, &mname);
        const char *p = cpath ? cpath : mpath;
        if (!st && p && p[0] != '/') {
            if (!(rel = vc_path_join(mdir, p))) st = VC_ERR_NOMEM;
            cpath = rel;
        } else if (!st && p) cpath = p;
        if (!cname) cname = mname;
    }
    if (st == VC_OK && !file) {
        st = hydra_file(cpath, cname, &hfile, &engine);
        file = hfile;
    }
    free(mdir);
    free(mpath);
    free(mname);
    if (st == VC_OK) st = vc_config_load_ex(file, engine | groups, n, ov, out);
    free(rel);
    free(hfile);
    free(ov);
    return st;
}
