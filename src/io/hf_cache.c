/* Hugging Face Hub model ids ("Qwen/Qwen2.5-0.5B-Instruct", as verl's command lines give model.path) resolved in
 * the local Hugging Face cache as huggingface_hub lays it out offline: $HF_HUB_CACHE, else $HF_HOME/hub, else
 * $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; the folder models--ORG--NAME, the commit its
 * refs/main names, snapshots/COMMIT (the only snapshot when there is no refs/main); with verl's
 * VERL_USE_MODELSCOPE=true, ModelScope's cache first. verlc downloads nothing. */
#include "verlc/core.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

static int is_dir(const char *p) {
    struct stat s;
    return !stat(p, &s) && S_ISDIR(s.st_mode);
}

/* ORG/NAME (or NAME) with the characters the Hub allows; no path of this machine */
static int hub_like(const char *id) {
    if (!*id || *id == '/' || *id == '.' || *id == '~' || strlen(id) > 200) return 0;
    int slashes = 0;
    for (const char *c = id; *c; c++) {
        if (*c == '/') slashes++;
        else if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                   *c == '-' || *c == '_' || *c == '.'))
            return 0;
    }
    return slashes <= 1 && id[strlen(id) - 1] != '/' && !strstr(id, "..");
}

static void cache_root(char *out, size_t cap) {
    const char *e;
    if ((e = getenv("HF_HUB_CACHE")) && *e) snprintf(out, cap, "%s", e);
    else if ((e = getenv("HUGGINGFACE_HUB_CACHE")) && *e) snprintf(out, cap, "%s", e);
    else if ((e = getenv("HF_HOME")) && *e) snprintf(out, cap, "%s/hub", e);
    else if ((e = getenv("XDG_CACHE_HOME")) && *e) snprintf(out, cap, "%s/huggingface/hub", e);
    else snprintf(out, cap, "%s/.cache/huggingface/hub", getenv("HOME") ? getenv("HOME") : "");
}

/* snapshots/<refs/main>, or the only snapshot; 0 if none */
static int snapshot(const char *repo, char *out, size_t cap) {
    char p[1200], *ref = NULL;
    snprintf(p, sizeof p, "%s/refs/main", repo);
    if (!vc_read_file(p, &ref, NULL)) {
        ref[strcspn(ref, " \r\n")] = 0;
        snprintf(out, cap, "%s/snapshots/%s", repo, ref);
        free(ref);
        if (is_dir(out)) return 1;
    }
    snprintf(p, sizeof p, "%s/snapshots", repo);
    DIR *d = opendir(p);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') n++, snprintf(out, cap, "%s/%s", p, e->d_name);
    if (d) closedir(d);
    return n == 1 && is_dir(out);
}

/* VERL_USE_MODELSCOPE=true: ModelScope's cache ($MODELSCOPE_CACHE, else ~/.cache/modelscope/hub), which holds a
 * model at models/ORG/NAME or ORG/NAME, older releases writing each '.' of the name as "___"; 0 if none */
static int modelscope(const char *id, char *out, size_t cap) {
    const char *use = getenv("VERL_USE_MODELSCOPE"), *env = getenv("MODELSCOPE_CACHE");
    if (!use || strcasecmp(use, "true")) return 0;
    char root[900], esc[700];
    if (env && *env) snprintf(root, sizeof root, "%s", env);
    else snprintf(root, sizeof root, "%s/.cache/modelscope/hub", getenv("HOME") ? getenv("HOME") : "");
    size_t k = 0;
    for (const char *c = id; *c && k + 4 < sizeof esc; c++)
        if (*c == '.') memcpy(esc + k, "___", 3), k += 3;
        else esc[k++] = *c;
    esc[k] = 0;
    static const char *const FMT[] = { "%s/models/%s", "%s/%s" };
    for (int f = 0; f < 2; f++)
        for (int e = 0; e < 2; e++) {
            snprintf(out, cap, FMT[f], root, e ? esc : id);
            if (is_dir(out)) return 1;
        }
    return 0;
}

vc_status vc_hf_resolve(const char *path, char **out) {
    *out = NULL;
    if (!path) return vc_fail(VC_ERR_ARG, "no path given (a model or tokenizer directory)");
    if (vc_file_exists(path) || is_dir(path) || !hub_like(path)) return (*out = vc_strdup(path)) ? VC_OK : VC_ERR_NOMEM;
    char root[900], repo[1100], snap[1400];
    if (modelscope(path, snap, sizeof snap)) {
        vc_info("%s: ModelScope's cache, %s", path, snap);
        return (*out = vc_strdup(snap)) ? VC_OK : VC_ERR_NOMEM;
    }
    cache_root(root, sizeof root);
    snprintf(repo, sizeof repo, "%s/models--%s", root, path);
    for (char *c = repo + strlen(root) + 8; *c; c++)
        if (*c == '/') { /* ORG/NAME -> models--ORG--NAME */
            memmove(c + 2, c + 1, strlen(c + 1) + 1);
            c[0] = c[1] = '-';
            break;
        }
    if (is_dir(repo) && snapshot(repo, snap, sizeof snap)) {
        vc_info("%s: the Hugging Face cache's snapshot %s", path, snap);
        return (*out = vc_strdup(snap)) ? VC_OK : VC_ERR_NOMEM;
    }
    return vc_fail(VC_ERR_IO, "%s: not a local directory, and not in the Hugging Face cache (%s): verlc downloads "
                   "nothing; fetch it first (huggingface-cli download %s) or give its local directory", path, root,
                   path);
}
