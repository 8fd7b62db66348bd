#!/usr/bin/env python3
"""Differential check of verlc's hermes and gpt-oss tool-call parsers against verl's (verl/experimental/agent_loop/
tool_parser.py at b178a3cd, HermesToolParser / GptOssToolParser.extract_tool_calls after their decode: the same
regexes, json.loads, the content with the calls removed; FunctionCall's str name; gpt-oss's pad token removed and its
arguments left as text) on random responses built from each format's pieces.

usage: diff_tools.py N [OUT.json]     (from the repository root; needs build/libverlc.a). Compares content, call names
and arguments (as values: cJSON keeps no int / float distinction in what the driver prints; gpt-oss's text arguments
against verlc's JSON where they parse). Not drawn: a name with
an escaped NUL (\\u0000), which verlc's C strings end at (Python keeps "f\\x00", verlc "f")."""
import json, random, re, subprocess, sys
from drv_build import build_driver

drv = build_driver("tool_drv")

CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def verl_hermes(text):
    if "<tool_call>" not in text or "</tool_call>" not in text:
        return text, []
    calls = []
    for m in CALL.findall(text):
        try:
            fc = json.loads(m)
            name, args = fc["name"], fc["arguments"]
            if not isinstance(name, str):  # FunctionCall(name: str) refuses another type
                raise TypeError
            calls.append({"name": name, "arguments": json.loads(json.dumps(args, ensure_ascii=False))})
        except Exception:
            pass
    return CALL.sub("", text), calls


COT = re.compile(r"<\|start\|>assistant<\|channel\|>analysis<\|message\|>.*?<\|end\|>", re.DOTALL)
PCOT = re.compile(r"<\|channel\|>analysis<\|message\|>(.*?)<\|end\|>", re.DOTALL)
OSS = re.compile(r"<\|start\|>assistant<\|channel\|>[^<]* to=functions\.([^<]+) <\|constrain\|>json<\|message\|>(.*?)<\|call\|>",
                 re.DOTALL)


def verl_gpt_oss(text):
    text = COT.sub("", text.replace("<pad>", ""))
    text = PCOT.sub("", text)
    matches = OSS.findall(text)
    if not matches:
        return text, []
    calls = []
    for name, args in matches:
        try:
            calls.append({"name": name, "arguments": json.loads(args)})
        except Exception:
            calls.append({"name": name, "arguments": args})  # (verl keeps the text; verlc a JSON string of it)
    return OSS.sub("", text), calls


R = random.Random(11)
BODIES = ['{"name": "calc", "arguments": {"x": 1}}', '{"name": "calc", "arguments": {}}', '{"arguments": {"x": 1}}',
          '{"name": 3, "arguments": {}}', '{"name": "f", "arguments": "text"}', '{"name": "f", "arguments": [1, 2.5]}',
          '{"name": "f"}', '{"name": "f", "arguments": null}', '[1, 2]', '"s"', '{"name": "f", "arguments": {"a": {"b": [true, null]}}}',
          '{"name": "é中", "arguments": {"q": "é中😀"}}', '{"name": "f", "arguments": {}} trailing', '{bad json',
          '\n{"name": "f", "arguments": {"x": -0.0, "y": 1e5}}\n', '{"name": "f", "arguments": {"x": 1}, "name": "g"}',
          '{"name": "", "arguments": {}}', '  ']
PIECES = ["<tool_call>", "</tool_call>", "\n", " ", "text", "<think>", "</think>", "<|im_end|>", "é", "<tool_call", "tool_call>"]


OSS_PIECES = ["<|start|>assistant<|channel|>commentary to=functions.calc <|constrain|>json<|message|>", "<|call|>",
              "<|start|>assistant<|channel|>analysis<|message|>", "<|channel|>analysis<|message|>", "<|end|>", "<pad>",
              "<|start|>assistant<|channel|>commentary to=functions.f.g <|constrain|>json<|message|>", "<|start|>",
              "<|channel|>final<|message|>", "to=functions.x ", "<|constrain|>json<|message|>"]


def oss_response():
    out = []
    for _ in range(R.randint(0, 7)):
        k = R.random()
        out.append(OSS_PIECES[0] + R.choice(BODIES) + "<|call|>" if k < 0.3 else R.choice(OSS_PIECES) if k < 0.75
                   else R.choice(BODIES + PIECES))
    return "".join(out)


def response():
    out = []
    for _ in range(R.randint(0, 6)):
        k = R.random()
        out.append("<tool_call>" + R.choice(BODIES) + "</tool_call>" if k < 0.45 else R.choice(BODIES) if k < 0.55
                   else R.choice(PIECES))
    return "".join(out)


n = int(sys.argv[1])
cases = [("hermes", response()) for _ in range(n)] + [("gpt-oss", oss_response()) for _ in range(n)]
lines = "".join(f"{f}\t{t.encode().hex()}\n" for f, t in cases)
out = subprocess.run([drv], input=lines, capture_output=True, text=True, check=True).stdout.split("\n")
bad = []
for (f, t), o in zip(cases, out):
    content, calls = (verl_hermes if f == "hermes" else verl_gpt_oss)(t)
    ours = json.loads(o) if o != "ERR" else None
    if ours is None or ours["content"] != content or ours["calls"] != calls:
        bad.append([f, t, {"content": content, "calls": calls}, ours])
print(f"{n} responses a format (hermes, gpt-oss): {sum(b[0] == 'hermes' for b in bad)} and "
      f"{sum(b[0] == 'gpt-oss' for b in bad)} differ")
if len(sys.argv) > 2:
    json.dump(bad, open(sys.argv[2], "w"), ensure_ascii=False, indent=0)
sys.exit(1 if bad else 0)
