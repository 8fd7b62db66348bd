#!/usr/bin/env python3
"""Differential check of verlc's SFT multi-turn rows against verl's own MultiTurnSFTDataset (verl b178a3cd's code run
unchanged, its imports of verl's other modules stubbed): random conversations (an optional system message, one to three
user / assistant rounds, contents with line breaks, spaces, Unicode and template-looking text) rendered with a chat
template and tokenized by both, compared token for token: input_ids and loss_mask (verlc sft --dump-data).

verl renders each message alone and concatenates; its sanity check raises when that differs from rendering the whole
conversation (a template that renders a turn differently as history, e.g. Qwen3's <think> on the last turn). verlc
renders the whole conversation; rows where verl raises are counted apart ("verl refuses"), not compared.

usage: diff_sft.py VERL_SRC TOKENIZER_DIR N [SEED] [--templates DIR] [--ignore-mismatch]   (from the repository root; needs torch,
transformers, pandas, pyarrow and build/verlc; VERL_SRC holds verl/ from `git archive b178a3cd verl/utils`; MODEL_DIR for
verlc sft is $DIFF_SFT_MODEL, default ../shared/fixtures/models/qwen3). With --templates, each *.jinja in DIR in turn
is the tokenizer's chat template (data.chat_template for verlc). --ignore-mismatch: both with
data.ignore_input_ids_mismatch (every row compared); without it verlc must refuse a file where verl raises on a row.
verl b178a3cd's probes of the template need transformers 4 (5's apply_chat_template returns a dict there): run with
PYTHONPATH holding transformers 4.57 (pip install --target DIR transformers==4.57.6 "tokenizers<0.23")."""
import enum, glob, json, os, random, subprocess, sys, tempfile

args = [a for a in sys.argv[1:] if not a.startswith("--")]
TPL_DIR = sys.argv[sys.argv.index("--templates") + 1] if "--templates" in sys.argv else None
IGNORE = "--ignore-mismatch" in sys.argv
if TPL_DIR: args = [a for a in args if a != TPL_DIR]
VERL_SRC, TOKDIR, N = args[0], args[1], int(args[2])
R = random.Random(int(args[3]) if len(args) > 3 else 1)
MODEL = os.environ.get("DIFF_SFT_MODEL", "../shared/fixtures/models/qwen3")

import pandas as pd
from transformers import AutoTokenizer
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from verl_algos import module, run_file


def load_verl_dataset():
    """verl's multiturn_sft_dataset module with the modules it imports stubbed (images, HDFS, the rope index) but its
    chat_template helper, which decides the system prompt and generation prompt, run as it is"""
    for p in ("verl", "verl.models", "verl.models.transformers", "verl.utils.dataset"):
        module(p)
    module("verl.models.transformers.qwen2_vl", get_rope_index=None)
    module("verl.utils", hf_tokenizer=lambda *a, **k: None)

    class DatasetPadMode(str, enum.Enum):
        RIGHT = "right"
        LEFT_RIGHT = "left_right"
        NO_PADDING = "no_padding"
    module("verl.utils.dataset.dataset_utils", DatasetPadMode=DatasetPadMode)
    module("verl.utils.dataset.vision_utils", process_image=None, process_video=None)
    module("verl.utils.fs", copy_local_path_from_hdfs=lambda p, verbose=False: p)
    run_file(os.path.join(VERL_SRC, "verl/utils/chat_template.py"), "verl.utils.chat_template")
    path = os.path.join(VERL_SRC, "verl/utils/dataset/multiturn_sft_dataset.py")
    module("verl.utils.dataset.multiturn_sft_dataset", __file__=path)
    return run_file(path, "verl.utils.dataset.multiturn_sft_dataset").MultiTurnSFTDataset


TEXT = ["Hi", "What is 2+2?", "4", "The answer is 42.", "Let me think.\nStep 1: add.\nStep 2: done.", "  leading spaces",
        "trailing spaces  ", "中文回答", "naïve café", "emoji 👍", "a\n\nb", "x = [1, 2, 3]\nprint(x)", "#### 18",
        "<|im_end|> looks special", "[INST] not a tag [/INST]", "{{ braces }}", "tab\there", ""]


def conversation():
    msgs = []
    if R.random() < 0.4:
        msgs.append({"role": "system", "content": R.choice(["Be brief.", "You are a math tutor.\nShow work.", "系统提示"])})
    for _ in range(R.randint(1, 3)):
        msgs.append({"role": "user", "content": " ".join(R.choice(TEXT) for _ in range(R.randint(1, 3))).strip() or "?"})
        msgs.append({"role": "assistant", "content": " ".join(R.choice(TEXT) for _ in range(R.randint(1, 3))).strip() or "ok"})
    return msgs


def run(template, tmp, Dataset, counts, shown):
    tok = AutoTokenizer.from_pretrained(TOKDIR)
    if template is not None:
        tok.chat_template = open(template).read()
    rows = [{"messages": conversation()} for _ in range(N)]
    pq, jl, dump = (os.path.join(tmp, n) for n in ("d.parquet", "d.jsonl", "dump.jsonl"))
    pd.DataFrame(rows).to_parquet(pq)
    with open(jl, "w") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    try:
        ds = Dataset(pq, tok, {"pad_mode": "no_padding", "max_length": 1 << 20, "truncation": "error",
                               "ignore_input_ids_mismatch": IGNORE})
    except Exception as e:  # the template fails on verl's probe conversations
        counts["verl cannot load"] = counts.get("verl cannot load", 0) + 1
        return
    cmd = ["build/verlc", "sft", "--model", MODEL, "--tokenizer", TOKDIR, "--train", jl, "--dump-data", dump,
           "data.max_length=1048576", "data.ignore_input_ids_mismatch=" + ("true" if IGNORE else "false")]
    if template is not None:
        cmd.append("data.chat_template=" + open(template).read())
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        if "data.ignore_input_ids_mismatch" in r.stderr:  # verlc stops on a row whose turns differ: so must verl
            raised = False
            for i in range(len(rows)):
                try: ds[i]
                except Exception: raised = True; break  # its check, or its check's rendering of the row as read
            key = "files both stop on" if raised else "files verlc alone stops on"
            counts[key] = counts.get(key, 0) + 1
            if raised: return
        counts["verlc fails"] = counts.get("verlc fails", 0) + 1
        if shown[0] < 5:
            shown[0] += 1
            print("verlc fails", os.path.basename(template or TOKDIR), (r.stderr.strip().splitlines() or ["?"])[-1][:300])
        return
    mine = [json.loads(l) for l in open(dump)]
    if len(mine) != len(rows):  # verlc skipped rows (its bad-row policy): verl must fail on each of them
        skipped = len(rows) - len(mine)
        failed = 0
        for i in range(len(rows)):
            try: ds[i]
            except Exception: failed += 1
        key = "files with rows both fail on" if failed >= skipped else "files with rows verlc alone skips"
        counts[key] = counts.get(key, 0) + 1
        if failed < skipped and shown[0] < 40:
            shown[0] += 1
            print("verlc skips", os.path.basename(template or TOKDIR), (r.stderr.strip().splitlines() or ["?"])[-1][:300])
        return
    for i, row in enumerate(rows):
        try:
            item = ds[i]
        except AssertionError:  # verl's per-turn tokens differ from the whole conversation's
            counts["verl refuses"] = counts.get("verl refuses", 0) + 1
            continue
        except Exception as e:
            counts["verl fails"] = counts.get("verl fails", 0) + 1
            continue
        want_ids, want_mask = item["input_ids"].tolist(), item["loss_mask"].tolist()
        got_ids, got_mask = mine[i]["input_ids"], [int(x) for x in mine[i]["loss_mask"]]
        if want_ids == got_ids and want_mask == got_mask:
            counts["agree"] = counts.get("agree", 0) + 1
            continue
        what = "ids" if want_ids != got_ids else "loss_mask"
        counts["differ (" + what + ")"] = counts.get("differ (" + what + ")", 0) + 1
        if shown.setdefault(what + os.path.basename(template or TOKDIR), 0) < 1 and shown[0] < 40:
            shown[what + os.path.basename(template or TOKDIR)] = 1
            shown[0] += 1
            print("differ", what, os.path.basename(template or TOKDIR), json.dumps(row["messages"], ensure_ascii=False)[:300])
            k = next((j for j in range(min(len(want_ids), len(got_ids)))
                      if want_ids[j] != got_ids[j] or (what == "loss_mask" and want_mask[j] != got_mask[j])),
                     min(len(want_ids), len(got_ids)))
            show = lambda ids, m: [(tok.convert_ids_to_tokens(i), b) for i, b in list(zip(ids, m))[max(0, k - 3):k + 5]]
            print("   at token", k, "verl", show(want_ids, want_mask), "\n   verlc", show(got_ids, got_mask))


Dataset = load_verl_dataset()
counts, shown = {}, {0: 0}
with tempfile.TemporaryDirectory() as tmp:
    for t in (sorted(glob.glob(os.path.join(TPL_DIR, "*.jinja"))) if TPL_DIR else [None]):
        run(t, tmp, Dataset, counts, shown)
print("rows:", ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
sys.exit(1 if any(k.startswith("differ") for k in counts) else 0)
