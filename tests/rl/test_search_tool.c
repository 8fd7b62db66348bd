/* verl's SearchTool (the Search-R1 example's `search`, verl.tools.search_tool.SearchTool) against
 * tests/rl/retrieval_server.py, a stand-in retrieval service: loaded from verl's tool config, each call's text must
 * be the one verl's own tool gave against the same service (tests/fixtures/rl/search_reference.json,
 * tools/fixtures/make_search_ref.py): passages laid out per query, several queries, bad query lists, empty and odd
 * answers, a 404, a 503 retried; then a failed connection (retried, then verl's "Search error"), and the calls of
 * many responses sent together (a turn's prefetch). */
#include "../../src/rl/agent_internal.h"
#include "../../src/rl/http_batch.h"
#include "../../src/rl/py_text.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "verlc/reward.h"
#include "py_server_util.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE "tests/fixtures/rl/search_reference.json"

static char url[128], cfg_path[160], peak_path[160];

static vc_status load(const char *u, rl_tool **tools, int *n, cJSON **schemas) {
    FILE *f = fopen(cfg_path, "w");
    if (!f) return VC_ERR_IO;
    fprintf(f, "tools:\n  - class_name: verl.tools.search_tool.SearchTool\n    config:\n"
               "      retrieval_service_url: %s\n      num_workers: 120\n      rate_limit: 120\n      timeout: 30\n"
               "      verlc_retry_delay: 0.01\n      type: native\n    tool_schema:\n      type: function\n"
               "      function:\n        name: search\n        description: Searches the web for relevant information.\n"
               "        parameters:\n          type: object\n          properties:\n            query_list:\n"
               "              type: array\n              item:\n                type: string\n"
               "              description: A list of fully-formed semantic queries.\n          required:\n"
               "            - query_list\n", u);
    fclose(f);
    return rl_tools_load(cfg_path, tools, n, schemas);
}

static char *call(rl_tool *tools, int n, const char *args) {
    rl_tool_call c = { "search", pt_json_loads((pt_span){ args, strlen(args) }), NULL };
    char *text = NULL;
    double r = 1;
    CHECK_OK(rl_tool_run(tools, n, &c, NULL, "row", &text, &r, &(vc_image){ 0 }));
    CHECK(r == 0);
    cJSON_Delete(c.args);
    return text;
}

/* text with the service's URL written as "URL" (the fixture's port was another) */
static char *unurl(const char *text) {
    size_t n = strlen(text) + 8, k = 0, ul = strlen(url);
    char *o = vc_malloc(n);
    for (const char *p = text; o && *p;)
        if (!strncmp(p, url, ul)) memcpy(o + k, "URL", 3), k += 3, p += ul;
        else o[k++] = *p++;
    if (o) o[k] = 0;
    return o;
}

static void golden(const cJSON *calls) {
    rl_tool *tools = NULL;
    cJSON *schemas = NULL;
    int n = 0, same = 0, k = 0;
    CHECK_OK(load(url, &tools, &n, &schemas));
    for (const cJSON *c = calls ? calls->child : NULL; n == 1 && c; c = c->next, k++) {
        const char *args = cJSON_GetArrayItem(c, 0)->valuestring, *want = cJSON_GetArrayItem(c, 1)->valuestring;
        char *text = call(tools, n, args), *got = text ? unurl(text) : NULL;
        same += got && !strcmp(got, want);
        CHECK_MSG(got && !strcmp(got, want), "search %s:\n%s\nverl:\n%s", args, got ? got : "(null)", want);
        free(text), free(got);
    }
    fprintf(stderr, "SearchTool: %d of %d calls as verl's\n", same, k);
    CHECK(k >= 12);
    /* the schema verl renders for the model */
    char *sj = cJSON_PrintUnformatted(schemas);
    CHECK_MSG(sj && strstr(sj, "\"name\":\"search\"") && strstr(sj, "query_list"), "%s", sj ? sj : "");
    free(sj);
    /* many calls at once (a turn's responses): each gets its own answer, all in flight together */
    enum { N = 8 };
    rl_tool_call many[N], *ptr[N];
    char args[N][160];
    for (int i = 0; i < N; i++) {
        snprintf(args[i], sizeof args[i], "{\"query_list\": [\"SB_SLOW %s\"]}", i % 2 ? "berlin germany" : "everest mountain");
        many[i] = (rl_tool_call){ "search", pt_json_loads((pt_span){ args[i], strlen(args[i]) }), NULL };
        ptr[i] = &many[i];
    }
    CHECK_OK(rl_tools_prefetch(tools, n, ptr, NULL, N));
    int right = 0;
    for (int i = 0; i < N; i++) {
        const char *want = i % 2 ? "{\"result\": \"Doc 1 (Title: \\\"Berlin\\\")"
                                 : "{\"result\": \"Doc 1 (Title: \\\"Mount Everest\\\")";
        right += many[i].text && !strncmp(many[i].text, want, strlen(want));
        cJSON_Delete(many[i].args), free(many[i].text);
    }
    CHECK_MSG(right == N, "%d of %d prefetched calls got their own first passage", right, N);
    FILE *pk = fopen(peak_path, "r");
    int peak = 0;
    if (pk) {
        if (fscanf(pk, "%d", &peak) != 1) peak = 0;
        fclose(pk);
    }
    CHECK_MSG(peak >= 4, "at most %d searches were in progress at once", peak);
    fprintf(stderr, "SearchTool prefetch: %d calls, %d searches at once at most\n", N, peak);
    rl_tools_free(tools, n);
    cJSON_Delete(schemas);
}

static void faults(void) {
    rl_tool *tools = NULL;
    cJSON *schemas = NULL;
    int n = 0;
    /* nothing listens: retried 10 times, then verl's "Search error: API Call Failed: Connection Error: ..." */
    CHECK_OK(load("http://127.0.0.1:9/retrieve", &tools, &n, &schemas));
    char *text = n == 1 ? call(tools, n, "{\"query_list\": [\"a\"]}") : NULL;
    CHECK_MSG(text && !strncmp(text, "{\"result\": \"Search error: API Call Failed: Connection Error: ", 60), "%s",
              text ? text : "");
    free(text);
    rl_tools_free(tools, n);
    cJSON_Delete(schemas);
    /* without its service's url the config is refused, as verl asserts */
    CHECK(load("", &tools, &n, &schemas) != VC_OK);
    CHECK_MSG(strstr(vc_last_error(), "retrieval_service_url"), "%s", vc_last_error());
}

int main(void) {
    if (!vc_http_available() || system("python3 -c 'import json' > /dev/null 2>&1") != 0) {
        printf("skipping: %s\n", vc_http_available() ? "no python3" : "built without libcurl");
        return vc_test_done();
    }
    snprintf(cfg_path, sizeof cfg_path, "/tmp/verlc_search_%d.yaml", (int)getpid());
    snprintf(peak_path, sizeof peak_path, "/tmp/verlc_search_peak_%d", (int)getpid());
    setenv("SB_PEAK", peak_path, 1);
    vc_reward_proc *srv = test_py_server("tests/rl/retrieval_server.py", "/retrieve", url, sizeof url);
    cJSON *ref = NULL;
    CHECK_OK(vc_json_load_file(FIXTURE, &ref));
    golden(cJSON_GetObjectItem(ref, "calls"));
    cJSON_Delete(ref);
    faults();
    vc_reward_proc_close(srv);
    unlink(cfg_path), unlink(peak_path);
    return vc_test_done();
}
