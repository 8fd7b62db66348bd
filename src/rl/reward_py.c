/* verl's Python objects served over the reward-program channel (reward_proc.c).
 *
 * Custom reward functions: custom_reward_function.path naming a Python file (or pkg:// module) and .name
 * a function in it, called as verl's reward managers call it. A Python interpreter ($VERLC_PYTHON, default
 * python3) runs the small server below over the reward-program channel (reward_proc.c): it loads the module as
 * verl's load_module does, answers a hello with {"ready": true} (or {"error": ...} when loading failed), then
 * per request calls the function with keyword arguments and verl's extra keyword arguments taking precedence:
 *   row mode   {"data_source", "solution_str", "ground_truth", "extra_info"} -> {"score": x} or the dict result
 *   batch mode {"data_sources", "solution_strs", "ground_truths", "extra_infos"} -> [one answer per row]
 * (verl's BatchRewardManager). An exception answers {"error": "..."} (the row fails; traceback on stderr).
 * The function's prints go to stderr: stdout carries the protocol. */
#include "verlc/reward.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* what every server starts with: imports, the protocol stream on a copy of fd 1 (fd 1 itself becomes stderr, so
 * prints, Python's or a native library's, cannot reach the protocol), one event loop */
#define PY_PRELUDE \
    "import asyncio, importlib, importlib.util, inspect, json, math, os, sys, traceback\n" \
    "out = os.fdopen(os.dup(1), 'w'); os.dup2(2, 1); sys.stdout = sys.stderr\n" \
    "loop = asyncio.new_event_loop()\n" \
    "def send(o):\n" \
    "    out.write(json.dumps(o, allow_nan=False) + '\\n'); out.flush()\n" \
    "def run(x):\n" \
    "    return loop.run_until_complete(x) if inspect.isawaitable(x) else x\n" \
    "async def aw(x):\n" \
    "    return (await x) if inspect.isawaitable(x) else x\n" \
    "def many(reqs, t, one):\n" \
    "    async def timed(k, r):\n" \
    "        try: a = await asyncio.wait_for(one(r), t)\n" \
    "        except asyncio.TimeoutError: a = {'text': f'Error when executing tool: timed out after {t:g} s', 'reward': 0.0}\n" \
    "        a['i'] = k; send(a)\n" \
    "    async def every():\n" \
    "        await asyncio.gather(*[timed(k, r) for k, r in enumerate(reqs)])\n" \
    "    loop.run_until_complete(every())\n"

/* after load(): obj (or the error), the request loop and the hello answer; each server's body follows */
#define PY_SERVE \
    "try:\n" \
    "    obj, err = load(), None\n" \
    "except BaseException as e:\n" \
    "    traceback.print_exc(); obj, err = None, f'{type(e).__name__}: {e}'\n" \
    "for line in sys.stdin:\n" \
    "    req = json.loads(line)\n" \
    "    if 'hello' in req:\n" \
    "        send({'ready': True} if obj else {'error': err})\n" \
    "        if not obj: sys.exit(1)\n" \
    "        continue\n"

static const char SERVER[] =
    PY_PRELUDE
    "path, name, kw, mode = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]\n"
    "def load():\n"
    "    if path.startswith('pkg://'):\n"
    "        mod = importlib.import_module(path[6:].replace('/', '.'))\n"
    "    else:\n"
    "        p = path[7:] if path.startswith('file://') else path\n"
    "        if not os.path.exists(p): raise FileNotFoundError(f'Custom module file not found: {p}')\n"
    "        spec = importlib.util.spec_from_file_location('custom_module_%d' % (hash(os.path.abspath(p)) & 0xffffffff), p)\n"
    "        if spec is None or spec.loader is None: raise ImportError(f'Could not load module from {p}')\n"
    "        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
    "    if not hasattr(mod, name): raise AttributeError(f'{path} has no {name}')\n"
    "    return getattr(mod, name)\n"
    "def plain(v):\n"
    "    if v is None or isinstance(v, (bool, str)): return v\n"
    "    if isinstance(v, (int, float)): return v if math.isfinite(v) else str(v)\n"
    "    if isinstance(v, dict): return {str(k): plain(x) for k, x in v.items()}\n"
    "    if isinstance(v, (list, tuple)): return [plain(x) for x in v]\n"
    "    if hasattr(v, 'item'):\n"
    "        try: return plain(v.item())\n"
    "        except Exception: pass\n"
    "    return str(v)\n"
    "def answer(r):\n"
    "    if isinstance(r, dict):\n"
    "        if 'score' not in r: raise KeyError(\"the function's dict result has no 'score'\")\n"
    "        r = dict(r); s = r['score']\n"
    "        r['score'] = float(s.item() if hasattr(s, 'item') else s)\n"
    "        return plain(r)\n"
    "    return {'score': float(r.item() if hasattr(r, 'item') else r)}\n"
    "def call(fn, args):\n"
    "    return run(fn(**{**args, **kw}))\n"
    PY_SERVE
    "    try:\n"
    "        if mode == 'batch':\n"
    "            req['extra_infos'] = [e if isinstance(e, dict) else {} for e in req['extra_infos']]\n"
    "            for e in req['extra_infos']: e.setdefault('rollout_reward_scores', {})\n"
    "            rs = call(obj, req)\n"
    "            if len(rs) != len(req['solution_strs']): raise ValueError(f'{name} returned {len(rs)} scores for {len(req[\"solution_strs\"])} rows')\n"
    "            send([answer(r) for r in rs])\n"
    "        else:\n"
    "            if not isinstance(req.get('extra_info'), dict): req['extra_info'] = {}\n"
    "            req['extra_info'].setdefault('rollout_reward_scores', {})\n"
    "            send(answer(call(obj, req)))\n"
    "    except Exception as e:\n"
    "        traceback.print_exc(); send({'error': f'{type(e).__name__}: {e}'})\n";

int vc_reward_path_is_python(const char *path) {
    if (!path) return 0;
    if (!strncmp(path, "pkg://", 6) || !strncmp(path, "file://", 7)) return 1;
    size_t n = strlen(path);
    if (strpbrk(path, " \t")) return 0; /* a command line: the program protocol */
    return n > 3 && !strcmp(path + n - 3, ".py");
}

/* a Python interpreter running src with args, after its hello answered {"ready": true} */
static vc_status py_serve(const char *src, char *const *args, int n_args, const char *what, int timeout_ms,
                          vc_reward_proc **out) {
    *out = NULL;
    const char *py = getenv("VERLC_PYTHON");
    if (!py || !*py) py = "python3";
    char *argv[12] = { (char *)py, "-c", (char *)src };
    for (int i = 0; i < n_args && i < 8; i++) argv[3 + i] = args[i];
    vc_status st = vc_reward_proc_start(argv, timeout_ms, out);
    if (st) return vc_fail_ctx(st, "needs a Python interpreter (%s; set VERLC_PYTHON)", py);
    cJSON *ans = NULL;
    st = vc_reward_proc_call(*out, "{\"hello\": 1}\n", &ans);
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(ans, "error");
    if (!st && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ans, "ready")))
        st = vc_fail(VC_ERR_ARG, "cannot load %s: %s", what, cJSON_IsString(err) ? err->valuestring : "no answer");
    else if (st) st = vc_fail_ctx(VC_ERR_IO, "loading %s with %s (see its messages above)", what, py);
    cJSON_Delete(ans);
    if (st) {
        vc_reward_proc_close(*out);
        *out = NULL;
    }
    return st;
}

vc_status vc_reward_py_start(const char *path, const char *name, const char *kwargs_json, int batch, int timeout_ms,
                             vc_reward_proc **out) {
    char what[600];
    if (!name) name = "compute_score";
    snprintf(what, sizeof what, "%s from %s", name, path);
    char *args[] = { (char *)path, (char *)name, (char *)(kwargs_json ? kwargs_json : "{}"), batch ? "batch" : "row" };
    return py_serve(SERVER, args, 4, what, timeout_ms, out);
}

/* verl's tools (BaseTool subclasses): built as verl's initialize_tools_from_config builds them, and per
 * request {"name", "arguments", "create_kwargs", ...} run as verl's ToolAgentLoop._call_tool runs them:
 * create(create_kwargs=...), execute(instance_id, arguments, agent_data=None), release(instance_id);
 * answered {"text", "reward"}, an exception as verl's "Error when executing tool: ..." text. {"op": "many",
 * "calls": [...], "timeout": s} runs the calls concurrently in one event loop (asyncio.gather, as verl's loop runs a
 * turn's calls), each within the timeout, and answers each {"i": k, "text", "reward"} as it finishes. */
static const char TOOL_SERVER[] =
    PY_PRELUDE
    "cls_path, cfg, schema = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])\n"
    "def load():\n"
    "    mod, _, name = cls_path.rpartition('.')\n"
    "    cls = getattr(importlib.import_module(mod), name)\n"
    "    try:\n"
    "        from verl.tools.schemas import OpenAIFunctionToolSchema\n"
    "        sch = OpenAIFunctionToolSchema.model_validate(schema)\n"
    "    except ImportError:\n"
    "        sch = schema\n"
    "    return cls(config=cfg, tool_schema=sch)\n"
    "async def one(req):\n"
    "    iid = None\n"
    "    try:\n"
    "        r = await aw(obj.create(create_kwargs=req.get('create_kwargs') or {}))\n"
    "        iid = r[0] if isinstance(r, tuple) else r\n"
    "        resp, reward, _ = await aw(obj.execute(iid, req['arguments'], agent_data=None))\n"
    "        text = resp.text if hasattr(resp, 'text') else resp\n"
    "        return {'text': '' if text is None else str(text), 'reward': float(reward or 0.0)}\n"
    "    except Exception as e:\n"
    "        traceback.print_exc(); return {'text': f'Error when executing tool: {e}', 'reward': 0.0}\n"
    "    finally:\n"
    "        if iid:\n"
    "            try: await aw(obj.release(iid))\n"
    "            except Exception: traceback.print_exc()\n"
    PY_SERVE
    "    if req.get('op') == 'many': many(req['calls'], req['timeout'], one); continue\n"
    "    send(run(one(req)))\n";

vc_status vc_tool_py_start(const char *class_name, const char *config_json, const char *schema_json, int timeout_ms,
                           vc_reward_proc **out) {
    char *args[] = { (char *)class_name, (char *)(config_json ? config_json : "{}"),
                     (char *)(schema_json ? schema_json : "{}") };
    return py_serve(TOOL_SERVER, args, 3, class_name, timeout_ms, out);
}

/* later verl's function tools (multi_turn.function_tool_path): the file's @function_tool functions, through
 * verl's verl.tools.function_tool when verl is installed, else a stand-in module with its decorator (schemas
 * by transformers' get_json_schema, or the decorator's schema=) and ToolResponse. {"op": "list"} ->
 * {"tools": [{"name", "schema"}]}; a call {"name", "arguments", ...} -> fn(**arguments), its return value
 * read as verl's normalize_function_tool_return -> {"text", "reward"}; an exception gives verl's
 * "Error executing tool 'NAME': ..." text. A plain function runs in a thread (asyncio.to_thread) as verl's
 * FunctionTool.call runs it; {"op": "many", ...} as the tool server's. */
static const char FUNCTION_SERVER[] =
    PY_PRELUDE
    "path = sys.argv[1]\n"
    "def standin():\n"
    "    import types\n"
    "    ft, sc, reg = types.ModuleType('verl.tools.function_tool'), types.ModuleType('verl.tools.schemas'), {}\n"
    "    class ToolResponse:\n"
    "        def __init__(self, text=None, **kw): self.text = text\n"
    "    def infer(fn, name):\n"
    "        sig = inspect.signature(fn)\n"
    "        var = [k for k, p in sig.parameters.items() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]\n"
    "        if var: raise ValueError(f\"@function_tool '{name}' declares variadic parameter(s) {var}\")\n"
    "        from transformers.utils import get_json_schema\n"
    "        raw = get_json_schema(fn); raw['function']['name'] = name; return raw\n"
    "    def function_tool(name=None, *, schema=None):\n"
    "        def make(over):\n"
    "            def deco(fn):\n"
    "                n = over or fn.__name__\n"
    "                s = schema if isinstance(schema, dict) else schema.model_dump(exclude_none=True) if schema is not None else infer(fn, n)\n"
    "                reg[n] = (fn, s); return fn\n"
    "            return deco\n"
    "        return make(None)(name) if callable(name) and schema is None else make(name)\n"
    "    ft.function_tool, ft.ToolResponse, ft.FUNCTION_TOOL_REGISTRY, sc.ToolResponse = function_tool, ToolResponse, reg, ToolResponse\n"
    "    for k in ('verl', 'verl.tools'): sys.modules.setdefault(k, types.ModuleType(k))\n"
    "    sys.modules['verl.tools.function_tool'], sys.modules['verl.tools.schemas'] = ft, sc\n"
    "    return reg\n"
    "def load():\n"
    "    if not os.path.isfile(path): raise FileNotFoundError(f'function_tool_path does not exist: {path}')\n"
    "    try:\n"
    "        import verl.tools.function_tool as ft\n"
    "        tools = {t.name: (t.fn, t.tool_schema.model_dump(exclude_unset=True, exclude_none=True))\n"
    "                 for t in ft.load_function_tools_from_path(path)}\n"
    "    except ImportError:\n"
    "        reg = standin()\n"
    "        spec = importlib.util.spec_from_file_location('_verl_function_tools', os.path.abspath(path))\n"
    "        mod = importlib.util.module_from_spec(spec); sys.modules['_verl_function_tools'] = mod\n"
    "        spec.loader.exec_module(mod); tools = dict(reg)\n"
    "    if not tools: raise ValueError(f'{path} defines no @function_tool function')\n"
    "    return tools\n"
    "def coerce(v):\n"
    "    if isinstance(v, str): return v\n"
    "    if isinstance(v, dict): return json.dumps(v, ensure_ascii=False)\n"
    "    if type(v).__name__ == 'ToolResponse': return '' if v.text is None else str(v.text)\n"
    "    return str(v)\n"
    "def normalize(r):\n"
    "    if isinstance(r, tuple):\n"
    "        if not 1 <= len(r) <= 3: raise TypeError(f'@function_tool return tuple must have length 1, 2, or 3 (got length {len(r)}: {r!r})')\n"
    "        return coerce(r[0]), 0.0 if len(r) < 2 or r[1] is None else float(r[1])\n"
    "    return coerce(r), 0.0\n"
    "async def one(req):\n"
    "    try:\n"
    "        fn, args = obj[req['name']][0], req['arguments']\n"
    "        r = await (fn(**args) if inspect.iscoroutinefunction(fn) else asyncio.to_thread(fn, **args))\n"
    "        text, reward = normalize(await aw(r))\n"
    "        return {'text': text, 'reward': reward}\n"
    "    except Exception as e:\n"
    "        traceback.print_exc(); return {'text': f\"Error executing tool '{req['name']}': {e}\", 'reward': 0.0}\n"
    PY_SERVE
    "    if req.get('op') == 'list':\n"
    "        send({'tools': [{'name': n, 'schema': s} for n, (f, s) in obj.items()]}); continue\n"
    "    if req.get('op') == 'many': many(req['calls'], req['timeout'], one); continue\n"
    "    send(run(one(req)))\n";

vc_status vc_function_tools_py_start(const char *path, int timeout_ms, vc_reward_proc **out) {
    char *args[] = { (char *)path };
    return py_serve(FUNCTION_SERVER, args, 1, path, timeout_ms, out);
}

/* verl's interactions (BaseInteraction subclasses): built with their config (name included) as verl's
 * initialize_interactions_from_config builds them; requests {"op": "start", "id", "kwargs"} ->
 * start_interaction(id, **kwargs) -> {"ok": true}, and {"op": "respond", "id", "messages", "kwargs"} ->
 * generate_response(id, messages, **kwargs) -> {"terminate", "content", "score"}; an exception answers
 * {"error": ...}. */
static const char INTERACTION_SERVER[] =
    PY_PRELUDE
    "cls_path, cfg = sys.argv[1], json.loads(sys.argv[2])\n"
    "def load():\n"
    "    mod, _, name = cls_path.rpartition('.')\n"
    "    return getattr(importlib.import_module(mod), name)(config=cfg)\n"
    PY_SERVE
    "    try:\n"
    "        kw = req.get('kwargs') or {}\n"
    "        if req['op'] == 'start':\n"
    "            run(obj.start_interaction(req['id'], **kw)); send({'ok': True})\n"
    "        else:\n"
    "            t, content, score, _ = run(obj.generate_response(req['id'], req['messages'], **kw))\n"
    "            send({'terminate': bool(t), 'content': '' if content is None else str(content),\n"
    "                  'score': None if score is None else float(score)})\n"
    "    except Exception as e:\n"
    "        traceback.print_exc(); send({'error': f'{type(e).__name__}: {e}'})\n";

vc_status vc_interaction_py_start(const char *class_name, const char *config_json, int timeout_ms, vc_reward_proc **out) {
    char *args[] = { (char *)class_name, (char *)(config_json ? config_json : "{}") };
    return py_serve(INTERACTION_SERVER, args, 2, class_name, timeout_ms, out);
}
