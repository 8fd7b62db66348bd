#!/usr/bin/env python3
"""Differential check of `verlc sft trainer.use_legacy_worker_impl=enable` against verl b178a3cd's own
FSDPSFTTrainer.training_step and validation_step (verl's code run unchanged on the CPU in f32, on one rank: its trainer
object made without __init__, the model a plain transformers model standing in for the FSDP wrapper, verl's bf16
autocast turned off, torch's AdamW and a cosine schedule without warmup as verl builds them). Each trial draws GSM8K
rows (question -> answer; up to three batches of them), the batch and micro-batch sizes, the learning rate, weight
decay and clip; verlc tokenizes them (`verlc sft --dump-data`), verl's DistributedSampler (seed 0, epoch 0) picks the
first step's rows (verlc draws its own order: the same rows only if it draws verl's), and both train one step on
those token ids and loss masks (verl right-padded, verlc packed), then validate. Compared: train/loss (verl's sum of each micro-batch's token mean over the micro-batch count),
train/grad_norm (before clipping) and val/loss after the step (verl's mean over its loader's batches of
micro_batch_size rows, the partial last one dropped), within a relative 2e-5 (the gradient norm 5e-5: verl's f32
norm over the 151,936-row head lies up to 2.4e-5 from the same loss's gradient recomputed in f64, verlc's within
1e-7 of it, checked on three batches of 12 rows); with $DIFF_SFT_DEFAULT=1 verlc runs its
default (the global token mean) instead, to show where the two differ; $DIFF_SFT_SET=micro=4,batch=12,lr=0.01,wd=0,clip=1,length=160 pins settings.

With $DIFF_SFT_WORLD=2 both run on two ranks: verl's methods in one process per rank joined by torch.distributed over
gloo (verl's DistributedSampler with two replicas picks each rank's rows and validation rows; FSDP's gradient mean
stands in as an all-reduce of the gradients divided by the ranks before verl's clip; verl's all-reduce of the step and
validation losses, which it runs on CUDA only, done by hand; data.balance_dp_token drawn, its all-reduce verl's own),
verlc under mpirun; the batch a multiple of the ranks' micro-batches, as verl's fsdp_sft_trainer asserts.

With $DIFF_SFT_ENGINE=1 verlc's default arithmetic (the global token mean) is compared with b178a3cd's engine-based
`verl.trainer.sft_trainer` (later verl's only SFT trainer) instead, its code run unchanged but for the FSDP wrapper:
SFTTrainer.fit's meta_info over the collator's nested rows, TrainingWorker.train_batch / infer_batch and
_postprocess_output, FSDPEngineWithLMHead's forward_backward_batch, forward_step and optimizer_step, losses.sft_loss,
over a plain model (use_remove_padding off: transformers has no packed rows on the CPU), always through
torch.distributed (one rank or $DIFF_SFT_WORLD); micro-batches of micro_batch_size_per_gpu rows or by
data.use_dynamic_bsz's token budget (drawn), validation in batches of train_batch_size / ranks rows;
$DIFF_SFT_LEGACY=1 runs verlc's legacy arithmetic against it, to show where they differ.

The model is a random Qwen2 of hidden 64 and 2 layers over the tokenizer's whole vocabulary (written once by
transformers into a temporary directory).

usage: diff_sft_loss.py VERL_SRC N [SEED] [TOKENIZER_DIR]   (from the repository root, after make; VERL_SRC holds verl
at b178a3cd, `git archive b178a3cd verl | tar -x -C DIR`; PYTHONPATH must give transformers 4.x, tensordict, torchdata,
codetiming, peft and the rest of fsdp_sft_trainer's imports; TOKENIZER_DIR defaults to the shared qwen3 tokenizer)"""
import contextlib, json, math, os, random, shutil, subprocess, sys, tempfile, warnings

warnings.filterwarnings("ignore")
RANK_MODE = len(sys.argv) > 1 and sys.argv[1] == "--rank"  # (a verl rank started by verl_ranks: --rank SPEC RANK)
WORLD = int(os.environ.get("DIFF_SFT_WORLD", "1"))
VERL, N = (os.environ["DIFF_SFT_VERL"], 0) if RANK_MODE else (sys.argv[1], int(sys.argv[2]))
SEED = int(sys.argv[3]) if len(sys.argv) > 3 and not RANK_MODE else 1
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
shared = os.environ.get("VERLC_SHARED", os.path.join(root, "..", "shared"))
TOKDIR = sys.argv[4] if len(sys.argv) > 4 else os.path.join(shared, "fixtures/tokenizers/qwen3")
VERLC = os.environ.get("VERLC_BIN", os.path.join(root, "build", "verlc"))
DEFAULT = os.environ.get("DIFF_SFT_DEFAULT") == "1"
ENGINE = os.environ.get("DIFF_SFT_ENGINE") == "1"  # against b178a3cd's engine-based sft_trainer (verlc's default)
LEGACY = os.environ.get("DIFF_SFT_LEGACY") == "1"  # (with ENGINE: verlc's legacy arithmetic, to show the two differ)
sys.path.insert(0, VERL)

import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from torch.utils.data import DistributedSampler
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, get_cosine_schedule_with_warmup
import verl.trainer.fsdp_sft_trainer as fst

torch.set_num_threads(2)
R = random.Random(SEED)
ROWS = [json.loads(l) for l in open(os.path.join(shared, "data/gsm8k/train.jsonl"))]


def make_model(d):
    tok = AutoTokenizer.from_pretrained(TOKDIR)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=False, dtype="float32")
    torch.manual_seed(SEED)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(d, safe_serialization=True)
    for f in os.listdir(TOKDIR):
        if f != "config.json": shutil.copy(os.path.join(TOKDIR, f), d)


def dump(model, path, out, max_len):
    p = subprocess.run([VERLC, "sft", "--model", model, "--train", path, "--prompt-key", "question", "--response-key",
                        "answer", f"data.max_length={max_len}", "data.truncation=right", f"dump_data={out}"],
                       capture_output=True, text=True)
    if p.returncode: raise RuntimeError(p.stderr[-2000:])
    return [json.loads(l) for l in open(out)]


def padded(rows, L):
    """verl's SFTDataset tensors of token-aligned rows: right-padded, position ids counting the real tokens"""
    n = len(rows)
    ids, att, pos, mask = *(torch.zeros(n, L, dtype=torch.long) for _ in range(3)), torch.zeros(n, L)
    for i, r in enumerate(rows):
        k = len(r["input_ids"])
        ids[i, :k] = torch.tensor(r["input_ids"])
        att[i, :k] = 1
        pos[i, :k] = torch.arange(k)
        mask[i, :k] = torch.tensor(r["loss_mask"], dtype=torch.float32)
    return TensorDict({"input_ids": ids, "attention_mask": att, "position_ids": pos, "loss_mask": mask}, batch_size=n)


def verl_trainer(model_dir, s):
    """FSDPSFTTrainer's own methods over a plain model (a rank, cpu, f32); on several ranks FSDP's mean of the
    gradients taken before verl clips them"""
    t = fst.FSDPSFTTrainer.__new__(fst.FSDPSFTTrainer)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)

    def clip(max_norm):
        if WORLD > 1:
            for p in model.parameters():
                if p.grad is not None:
                    torch.distributed.all_reduce(p.grad)
                    p.grad /= WORLD
        return torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)

    model.clip_grad_norm_ = clip
    t.config = OmegaConf.create({"data": {"micro_batch_size_per_gpu": s["micro"], "balance_dp_token": s["balance"]},
                                 "ulysses_sequence_parallel_size": 1, "model": {"strategy": "fsdp"},
                                 "optim": {"clip_grad": s["clip"]}})
    t.use_remove_padding, t.device_name, t.model, t.fsdp_model = False, "cpu", model, model
    t.optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"], betas=(0.9, 0.95), weight_decay=s["wd"])
    t.lr_scheduler = get_cosine_schedule_with_warmup(t.optimizer, num_warmup_steps=0, num_training_steps=1)
    return t


def rank_avg(x):
    """verl's all-reduce (AVG) of a rank's loss, which it runs on CUDA only"""
    if WORLD == 1: return x
    x = torch.as_tensor(x, dtype=torch.float32).clone()
    torch.distributed.all_reduce(x)
    return x / WORLD


def verl_side(model_dir, s, train, val, L):
    t = verl_trainer(model_dir, s)
    with mock_autocast():
        m = t.training_step(padded(train, L))
        m["train/loss"] = float(rank_avg(m["train/loss"]))
        m["train/grad_norm"] = float(LAST_NORM[0])
        mb = s["micro"]
        losses = [rank_avg(t.validation_step(padded(val[a:a + mb], L))) for a in range(0, len(val) // mb * mb, mb)]
    if losses: m["val/loss"] = float(torch.mean(torch.stack(losses)))  # (none: verl's torch.stack raises)
    return m


def engine_side(model_dir, s, train, val, L):
    """b178a3cd's engine-based sft_trainer for one step: SFTTrainer.fit's meta_info over the loader's batches (the
    collator's nested rows), TrainingWorker.train_batch / infer_batch and _postprocess_output, FSDPEngineWithLMHead's
    forward_backward_batch (prepare_micro_batches: micro_batch_size_per_gpu chunks or use_dynamic_bsz's token budget),
    forward_step and optimizer_step, losses.sft_loss; over a plain model (use_remove_padding off: transformers on the
    CPU has no packed rows), FSDP's mean of the gradients an all-reduce divided by the ranks before verl's clip"""
    from functools import partial
    from types import SimpleNamespace
    from tensordict.tensorclass import NonTensorData
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.dataset_utils import DatasetPadMode, SFTTensorCollator
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead
    from verl.workers.engine_workers import TrainingWorker
    from verl.workers.utils.losses import sft_loss

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    e = FSDPEngineWithLMHead.__new__(FSDPEngineWithLMHead)
    e.module, e.ulysses_device_mesh, e.ulysses_sequence_parallel_size, e.use_ulysses_sp = model, None, 1, False
    e.optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"], betas=(0.9, 0.95), weight_decay=s["wd"])
    e.lr_scheduler = get_cosine_schedule_with_warmup(e.optimizer, num_warmup_steps=0, num_training_steps=1)
    e.optimizer_config, e.engine_config = SimpleNamespace(clip_grad=s["clip"]), SimpleNamespace(entropy_checkpointing=False)
    e.train_mode = e.eval_mode = lambda **k: contextlib.nullcontext()
    step = e.optimizer_step

    def mean_then_step():
        for p in model.parameters():
            if WORLD > 1 and p.grad is not None:
                torch.distributed.all_reduce(p.grad)
                p.grad /= WORLD
        return step()

    e.optimizer_step = mean_then_step
    w = TrainingWorker.__new__(TrainingWorker)
    w.engine, w.device_name, w.loss_fn = e, "cpu", partial(sft_loss, None)
    w.model_config = SimpleNamespace(use_remove_padding=False)  # (the keys below the meta_info does not set)
    w.engine_config = SimpleNamespace(forward_only=False, use_fused_kernels=False, use_dynamic_bsz=None,
                                      max_token_len_per_gpu=None, micro_batch_size_per_gpu=None,
                                      infer_max_token_len_per_gpu=None, infer_micro_batch_size_per_gpu=None)
    w.flops_counter = SimpleNamespace(estimate_flops=lambda n, t: (0.0, 1.0))
    meta = {"use_remove_padding": False, "use_dynamic_bsz": s["dyn"] > 0, "max_token_len_per_gpu": s["dyn"] or L,
            "micro_batch_size_per_gpu": s["micro"], "temperature": 1.0, "global_batch_size": s["batch"],
            "pad_mode": DatasetPadMode.NO_PADDING, "pad_token_id": 0}
    collate = SFTTensorCollator(DatasetPadMode.NO_PADDING)

    def batch(rows):
        d = collate([{"input_ids": torch.tensor(r["input_ids"]), "position_ids": torch.arange(len(r["input_ids"])),
                      "loss_mask": torch.tensor(r["loss_mask"], dtype=torch.long)} for r in rows])
        d = tu.get_tensordict(tensor_dict=d, non_tensor_dict=meta)
        tu.assign_non_tensor(d, update_lr_scheduler=True,
                             global_token_num=NonTensorData([len(r["input_ids"]) for r in rows]))
        return d

    with mock_autocast():
        out = tu.get(w.train_batch(batch(train)), "metrics")
        m = {"train/loss": float(out["loss"]), "train/grad_norm": float(out["grad_norm"])}
        bs = s["batch"] // WORLD
        losses = [tu.get(w.infer_batch(batch(val[a:a + bs])), "metrics")["loss"] for a in range(0, len(val) // bs * bs, bs)]
    if losses: m["val/loss"] = float(rank_avg(torch.mean(torch.tensor(losses))))
    return m


def sampled(rows, rank, shuffle):
    """a rank's rows as verl's DistributedSampler (seed 0, epoch 0, drop_last) gives them"""
    sampler = DistributedSampler(range(len(rows)), num_replicas=WORLD, rank=rank, shuffle=shuffle, drop_last=True)
    sampler.set_epoch(0)
    return [rows[i] for i in sampler]


def rank_worker(spec_path, rank):
    """one of verl's ranks: its first step's rows and validation rows, the metrics written by rank 0"""
    spec = json.load(open(spec_path))
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(spec["port"]))
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=WORLD)
    s, L = spec["s"], spec["L"]
    first = sampled(spec["train"], rank, True)[:s["batch"] // WORLD]
    m = (engine_side if ENGINE else verl_side)(spec["model"], s, first, sampled(spec["val"], rank, False), L)
    if rank == 0:
        with open(spec_path + ".out", "w") as f: json.dump(m, f)
    torch.distributed.destroy_process_group()


def verl_ranks(tmp, model_dir, s, train, val, L):
    """verl_side on WORLD ranks, each its own process"""
    spec = os.path.join(tmp, "spec.json")
    with open(spec, "w") as f:
        json.dump({"port": 29500 + R.randint(0, 9999), "s": s, "L": L, "model": model_dir, "train": train, "val": val}, f)
    env = dict(os.environ, DIFF_SFT_WORLD=str(WORLD), DIFF_SFT_VERL=VERL, DIFF_SFT_ENGINE=str(int(ENGINE)))
    logs = [open(f"{spec}.{r}.log", "w+") for r in range(WORLD)]
    ps = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", spec, str(r)], env=env,
                           stdout=logs[r], stderr=subprocess.STDOUT) for r in range(WORLD)]
    if any([p.wait() for p in ps]):
        logs[0].seek(0)
        raise RuntimeError("a verl rank failed: " + logs[0].read()[-3000:])
    return json.load(open(spec + ".out"))


LAST_NORM = [None]


@contextlib.contextmanager
def mock_autocast():
    """verl's bf16 autocast off (the comparison is in f32); the pre-clip norm kept for the comparison"""
    saved, clip = torch.autocast, torch.nn.utils.clip_grad_norm_

    def keep(*a, **k):
        LAST_NORM[0] = clip(*a, **k)
        return LAST_NORM[0]

    torch.autocast = lambda *a, **k: contextlib.nullcontext()
    torch.nn.utils.clip_grad_norm_ = keep
    try:
        yield
    finally:
        torch.autocast, torch.nn.utils.clip_grad_norm_ = saved, clip


def verlc_side(model_dir, s, tmp, train_path, val_path, L):
    out = os.path.join(tmp, "run")
    shutil.rmtree(out, ignore_errors=True)
    launch = [] if WORLD == 1 else ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl",
                                    "self,vader", "-np", str(WORLD)]
    cmd = launch + [VERLC, "sft", "--model", model_dir, "--train", train_path, "--val", val_path, "--out", out, "--prompt-key",
           "question", "--response-key", "answer", f"data.max_length={L}", "data.truncation=right",
           f"data.train_batch_size={s['batch']}", f"data.micro_batch_size_per_gpu={s['micro']}", f"optim.lr={s['lr']}",
           f"optim.weight_decay={s['wd']}", f"optim.clip_grad={s['clip']}", "optim.lr_warmup_steps_ratio=0",
           "trainer.total_training_steps=1", "--device", "cpu", f"data.balance_dp_token={str(s['balance']).lower()}"]
    if s.get("dyn"): cmd += ["data.use_dynamic_bsz=true", f"data.max_token_len_per_gpu={s['dyn']}"]
    if (ENGINE and LEGACY) or (not ENGINE and not DEFAULT): cmd.append("trainer.use_legacy_worker_impl=enable")
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode: raise RuntimeError(p.stderr[-2000:])
    m = {}
    for l in open(os.path.join(out, "metrics.jsonl")):
        m.update({k: v for k, v in json.loads(l).items() if isinstance(v, (int, float))})
    return m


def main():
    fails = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = os.path.join(tmp, "model")
        make_model(model_dir)
        for trial in range(N):
            s = {"micro": R.choice([1, 2, 3, 4]), "lr": R.choice([1e-4, 1e-3, 1e-2]), "wd": R.choice([0.0, 0.01, 0.1]),
                 "clip": R.choice([1e-3, 1.0, 100.0])}
            s["batch"] = s["micro"] * R.randint(1, 4) + R.choice([0, 0, R.randint(1, s["micro"])]) % s["micro"]
            s["balance"] = WORLD > 1 and R.random() < 0.5
            if WORLD > 1: s["batch"] = s["micro"] * WORLD * R.randint(1, 2)
            s["dyn"] = 0
            L, nval = R.choice([96, 160, 256]), R.randint(1, 9)
            if ENGINE:  # the engine: a rank's rows whole micro-batches (verl's chunk_tensordict asserts it), or any
                s["balance"], s["dyn"] = False, R.choice([0, 0, R.randint(L, 4 * L)])  # count under a token budget
                s["batch"] = WORLD * (R.randint(1, 9) if s["dyn"] else s["micro"] * R.randint(1, 3))
            for kv in filter(None, os.environ.get("DIFF_SFT_SET", "").split(",")):  # pinned: micro=4,batch=12,...
                k, v = kv.split("=")
                if k == "length": L = int(v)
                elif k == "balance": s[k] = v == "1"
                else: s[k] = type(s[k])(float(v)) if k in s else int(v)
            ntrain = s["batch"] + R.choice([0, R.randint(1, 2 * s["batch"])])
            pick = R.sample(ROWS, ntrain + nval)
            tp, vp = os.path.join(tmp, "train.jsonl"), os.path.join(tmp, "val.jsonl")
            for path, rows in ((tp, pick[:ntrain]), (vp, pick[ntrain:])):
                with open(path, "w") as f: f.writelines(json.dumps(r) + "\n" for r in rows)
            try:
                train, val = dump(model_dir, tp, os.path.join(tmp, "t.jsonl"), L), dump(model_dir, vp, os.path.join(tmp, "v.jsonl"), L)
            except RuntimeError as e:  # every row of a file cut before its answer (verl's dataset has nothing either)
                if "no usable rows" not in str(e): raise
                skipped += 1
                continue
            if WORLD > 1 and len(train) < s["batch"]:  # (verl's loader has no batch; verlc trains on the rows it has)
                skipped += 1
                continue
            # the first step's rows: verl's DistributedSampler (seed 0, epoch 0) over the train rows
            if WORLD == 1 and not ENGINE: v = verl_side(model_dir, s, sampled(train, 0, True)[:s["batch"]], val, L)
            else: v = verl_ranks(tmp, model_dir, s, train, val, L)
            c = verlc_side(model_dir, s, tmp, tp, vp, L)
            bad = []
            for k in ("train/loss", "train/grad_norm", "val/loss"):
                if k not in v: continue  # fewer val rows than a batch: verl has none (verlc: their token mean)
                a, b = v[k], c.get(k, float("nan"))
                tol = 5e-5 if k == "train/grad_norm" else 2e-5
                if not abs(a - b) <= tol * max(abs(a), 1e-6): bad.append(f"{k} verl {a:.9g} verlc {b:.9g}")
            if bad:
                fails += 1
                print(f"trial {trial} {s} length {L}, {len(val)} val rows: " + "; ".join(bad), flush=True)
    print(f"{N - fails - skipped}/{N - skipped} trials agree ({skipped} without a usable row{', or on several ranks fewer than a batch,' if WORLD > 1 else ''} left out; {'verlc default vs ' if DEFAULT and not ENGINE else 'verlc legacy vs ' if LEGACY and ENGINE else ''}verl b178a3cd {'sft_trainer (engine)' if ENGINE else 'fsdp_sft_trainer'}, {WORLD} rank(s), seed {SEED})")


if __name__ == "__main__":
    if RANK_MODE: rank_worker(sys.argv[2], int(sys.argv[3]))
    else: main()
