#!/usr/bin/env python3
"""Differential check of verlc's chat templates against Jinja2 as transformers runs them (apply_chat_template's
sandboxed environment: trim_blocks, lstrip_blocks, loopcontrols, tojson with ensure_ascii=False, raise_exception,
strftime_now; the tokenizer's special tokens as variables) on the chat fuzzer's corpus (build-fuzz/corpus/chat after
scripts/fuzz.sh chat: a byte picking template, add_generation_prompt and enable_thinking as tests/tokenizer/fuzz_chat.c
does, then the JSON).

usage: diff_chat.py CORPUS_DIR|--random N [OUT.json]     (from the repository root; $VERLC_SHARED, default ../shared;
needs jinja2 and build/libverlc.a). --random N: N message lists drawn at random instead (roles, text with the
templates' own markers, content lists, tool calls with object or string arguments, reasoning_content, tools; seed 7),
each template taking every len(templates)-th. With $VC_CHAT_TEMPLATES=DIR the templates are DIR's *.jinja files (e.g. a
corpus of models' templates; rendered with bos <s> and eos </s>) instead of the fixtures'; one that verlc cannot load
renders as a failure on its side (tools/fuzz/chat_template_sources.tsv lists a corpus of 155 models' templates by
repository, path and commit: 2026-12-06, 12,400 renderings, 0 differ; before that day's call, filter and with blocks,
f(*args), str.format, Markup joins and false values through selectattr / map, 4 of them failed to load and 376
renderings differed). $VC_DRV_VERBOSE=1: verlc's error for each of its failures on stderr. Prints how many renderings differ (a text against a text, or one side failing alone),
and with --random how many per template."""
import datetime, glob, json, os, random, subprocess, sys
from drv_build import build_driver

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

sh = os.environ.get("VERLC_SHARED", "../shared")
TEMPLATES = [f"{sh}/fixtures/tokenizers/qwen3", f"{sh}/fixtures/tokenizers/llama3", f"{sh}/fixtures/tokenizers/deepseek_v3",
             "tests/fixtures/spm_slow/chatglm3", "tests/fixtures/vision/glm4v/chat_template.jinja",
             "tests/fixtures/vision/dataset/chat_template_tools.jinja"]
if os.environ.get("VC_CHAT_TEMPLATES"):
    TEMPLATES = sorted(glob.glob(os.path.join(os.environ["VC_CHAT_TEMPLATES"], "*.jinja")))
drv = build_driver("chat_drv")


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class Generation(jinja2.ext.Extension):
    """transformers' AssistantTracker without the mask it records: {% generation %}...{% endgeneration %} renders its
    body"""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.datetime.now().strftime(f)


def token(v):
    return v.get("content") if isinstance(v, dict) else v


def load(path):
    if path.endswith(".jinja"):
        try:
            return env.from_string(open(path).read()), {"bos_token": "<s>", "eos_token": "</s>"}
        except Exception as e:  # Jinja2 cannot compile it either: every rendering fails on its side
            print(f"{path}: Jinja2: {e}", file=sys.stderr)
            return None, {}
    cfg = json.load(open(os.path.join(path, "tokenizer_config.json")))
    t = cfg.get("chat_template")
    if isinstance(t, list):
        t = next(x["template"] for x in t if x["name"] == "default")
    j = os.path.join(path, "chat_template.jinja")
    if os.path.exists(j):
        t = open(j).read()
    toks = {k: token(cfg[k]) for k in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                                        "mask_token") if cfg.get(k) is not None}
    return env.from_string(t), toks


tm = [load(p) for p in TEMPLATES]
R = random.Random(7)
WORDS = ["hi", "", " ", "\n", "<think>", "</think>", "<tool_call>", "{\"a\": 1}", "é中😀", "{{ x }}", "{% if %}", "\\", "'",
         '"', "<|im_start|>", "<|eot_id|>", "[INST]", "  spaced  ", "\t", "null", "<image>", "1 < 2 & 3 > 2"]


def rtext():
    return "".join(R.choice(WORDS) for _ in range(R.randint(0, 4)))


def value():
    return R.choice([1.0, 0.1, -0.0, 1e20, 1e-7, 2.5e300, 123456789.125, 2 ** 53 + 1, -17, True, False, None, [], [1.5, "x"],
                     {"k": [None, {"z": 0.5}]}, "\u00e9\u4e2d", "\u2028", "a\u0000b"[:1], "\x7f"])


def message():
    m = {"role": R.choice(["system", "user", "user", "assistant", "assistant", "tool", "observation", "developer"])}
    k = R.random()
    if k < 0.7:
        m["content"] = rtext()
    elif k < 0.85:
        m["content"] = [R.choice([{"type": "text", "text": rtext()}, {"type": "image"}, {"type": "image_url"}])
                        for _ in range(R.randint(0, 3))]
    elif k < 0.9:
        m["content"] = None
    if m["role"] == "assistant" and R.random() < 0.4:
        args = R.choice([{"x": rtext(), "n": R.randint(-3, 3)}, rtext(), {}, {"nested": {"a": [1, 2]}}, {"v": value()},
                         {"b": value(), "a": value()}])
        m["tool_calls"] = [{"type": "function", "function": {"name": R.choice(["calc", "search", "f_1"]),
                                                             "arguments": args}} for _ in range(R.randint(1, 2))]
    if m["role"] == "assistant" and R.random() < 0.2:
        m["reasoning_content"] = rtext()
    if m["role"] == "tool" and R.random() < 0.5:
        m["tool_call_id"] = "call_0"
    return m


def conversation():
    """a well-formed one (most templates refuse others): an optional system message, then user and assistant turns
    alternating, an assistant's tool calls answered by tool messages"""
    msgs = [dict(message(), role="system")] if R.random() < 0.4 else []
    for t in range(R.randint(1, 3)):
        msgs.append(dict(message(), role="user"))
        if t or R.random() < 0.7:
            a = message()
            a["role"] = "assistant"
            msgs.append(a)
            for _ in a.get("tool_calls", []):
                msgs.append({"role": "tool", "content": rtext()})
    if msgs[-1]["role"] != "user" and R.random() < 0.5:
        msgs.append(dict(message(), role="user"))
    for m in msgs:  # text content mostly, as chat data has it
        if m["role"] != "assistant" and not isinstance(m.get("content"), str) and R.random() < 0.8:
            m["content"] = rtext()
    return msgs


def random_cases(n):
    for i in range(n):
        msgs = conversation() if R.random() < 0.6 else [message() for _ in range(R.randint(0, 5))]
        obj = {"messages": msgs}
        if R.random() < 0.3:
            obj["tools"] = [{"type": "function", "function": {"name": "calc", "description": rtext(), "parameters": {
                "type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}]
        yield f"random#{i}", bytes([R.randrange(256)]) + json.dumps(obj, ensure_ascii=False).encode(), i % len(TEMPLATES)


def corpus(d):
    for f in sorted(glob.glob(os.path.join(d, "*"))):
        b = open(f, "rb").read()
        yield f, b, (b[0] >> 3) % len(TEMPLATES) if b else 0


refs, lines = [], []
cases = random_cases(int(sys.argv[2])) if sys.argv[1] == "--random" else corpus(sys.argv[1])
out_json = sys.argv[3] if sys.argv[1] == "--random" and len(sys.argv) > 3 else None
if sys.argv[1] != "--random" and len(sys.argv) > 2:
    out_json = sys.argv[2]
for f, b, ti in cases:
    if not b:
        continue
    try:  # cJSON takes the first value and ignores what follows; both sides then get the same value
        text = b[1:].decode()
        j = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))[0]
        json.dumps(j, allow_nan=False)
    except Exception:
        continue
    msgs = j.get("messages") if isinstance(j, dict) else j
    if msgs is None:
        continue
    gen, think = b[0] & 1, (b[0] >> 1) % 3 - 1
    kw = dict(tm[ti][1], messages=msgs, tools=None, documents=None, add_generation_prompt=bool(gen))  # as transformers
    if isinstance(j, dict) and j.get("tools") is not None:
        kw["tools"] = j["tools"]
    if think >= 0:
        kw["enable_thinking"] = bool(think)
    try:
        r = tm[ti][0].render(**kw) if tm[ti][0] else None
    except Exception:
        r = None
    refs.append((f, ti, r))
    obj = {"messages": msgs, "tools": kw.get("tools")}
    lines.append(f"{ti}\t{gen}\t{think}\t{json.dumps(obj, ensure_ascii=False).encode().hex()}")
out = subprocess.run([drv] + TEMPLATES, input="\n".join(lines) + "\n", stdout=subprocess.PIPE, text=True,
                     check=True).stdout.split("\n")  # its stderr passes through ($VC_DRV_VERBOSE: each failure's error)
bad = []
for k, ((f, ti, r), o) in enumerate(zip(refs, out)):
    ours = None if o == "ERR" else bytes.fromhex(o).decode("utf-8", "replace")
    if ours != r:
        bad.append([f, TEMPLATES[ti], r, ours, json.loads(bytes.fromhex(lines[k].split("\t")[3])), f"line {k}"])
failed = sum(r is None for _, _, r in refs)
print(f"{len(refs)} renderings ({failed} raising in Jinja2), {len(bad)} differ")
if sys.argv[1] == "--random" and bad:
    per = {}
    for _, t, *_ in bad:
        per[t] = per.get(t, 0) + 1
    for t, k in sorted(per.items(), key=lambda x: -x[1]):
        print(f"  {k:5d}  {t}")
if out_json:
    json.dump(bad, open(out_json, "w"), ensure_ascii=False, indent=0)
sys.exit(1 if bad else 0)
