#!/usr/bin/env python3
"""Differential check of verlc's RL actor update against verl's own DataParallelPPOActor.update_policy (verl b178a3cd,
run unchanged on the CPU in f32 with torch's AdamW as verl's build_optimizer makes it): for each trial a random batch
(rows of random prompt and response lengths and tokens, response masks with holes as multi-turn rows have them,
advantages, old and reference log-probs near the model's own) and random actor settings (rollout.n, mini- and
micro-batch sizes or use_dynamic_bsz's token budget, PPO epochs, loss_agg_mode, the policy loss modes, clip ratios,
entropy_coeff, the KL loss and its estimators, grad_clip, temperature, lr, weight decay), the update run by verl's
actor and by verlc (tools/fuzz/actor_drv.c: the trainer's settings read from the same verl keys, rl_update_actor);
then the metrics both report (pg_loss, kl_loss, entropy, grad_norm, pg_clipfrac, ppo_kl, ...) and every updated
weight compared. The batch runs through verl's padded path (use_remove_padding false: left-padded prompts,
right-padded responses), verlc's through its packed rows.

verl's legacy workers (b178a3cd's default, trainer.use_legacy_worker_impl=auto) aggregate each micro-batch's losses
by that micro-batch's own tokens or rows and scale them by 1 / (mini-batch / micro-batch) (or rows / mini-batch with
use_dynamic_bsz); its engine workers and later verl normalise by the whole mini-batch. verlc does the latter unless
trainer.use_legacy_worker_impl=enable; each trial passes verlc the setting matching the verl code it is compared
with (here the legacy actor: `enable`) unless $DIFF_ACTOR_VERLC_DEFAULT=1, which shows where the two differ.

With $DIFF_ACTOR_ROLE=critic the same for the critic: verl's DataParallelPPOCritic.update_critic (its bf16 autocast
turned off: the comparison is in f32) on a Qwen2ForTokenClassification made from MODEL_DIR (num_labels 1, the score
head random) against verlc's critic update on that checkpoint (its score head as the value head), with random
returns, old values, cliprange_value and the same batch settings; the value head is compared with the weights.

With $DIFF_ACTOR_WORLD=2 both run on two ranks: verl's actor (or critic) in one process per rank joined by
torch.distributed over gloo, each given its block of the batch's rows as verl's dispatch chunks it, a mini-batch's share
(ppo_mini_batch_size x rollout.n / ranks rows) and its own micro-batches, FSDP's mean of the gradients standing in as an
all-reduce divided by the ranks before verl's clip, the metrics reduced as verl's trainer reduces them (every rank's
lists concatenated, then the mean); verlc's update under mpirun (actor_drv as one rank each); rank 0's weights compared.

$DIFF_ACTOR_VERL=engine compares verlc's default arithmetic with the engine workers' own loss
(verl.workers.utils.losses.ppo_loss on each micro-batch with the mini-batch's normalisers, in their loop; see
engine_update). $DIFF_ACTOR_LORA=1 puts PEFT LoRA adapters on the actor (rank 4, alpha 8, all-linear, random A and
nonzero B, saved once and loaded by both: verlc through actor_rollout_ref.model.lora_adapter_path) and compares the
adapters after the update. $DIFF_ACTOR_SET=k=v,... pins settings, $DIFF_ACTOR_ONLY=i,j runs those trials alone.

usage: diff_actor.py VERL_SRC N [SEED] [MODEL_DIR]   (from the repository root, after make)
VERL_SRC holds verl at b178a3cd (`git archive b178a3cd verl | tar -x -C DIR`); PYTHONPATH must give transformers
4.x (verl b178a3cd imports AutoModelForVision2Seq), ray, tensordict and codetiming (the engine comparison: datasets
3.x and pillow; LoRA: peft 0.17 and accelerate); MODEL_DIR defaults to the
shared fixtures' qwen2 (f32). Prints one line per trial that differs and a summary."""
import contextlib, io, json, math, os, random, subprocess, sys, tempfile, warnings

warnings.filterwarnings("ignore")
WORLD = int(os.environ.get("DIFF_ACTOR_WORLD", "1"))
RANK = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[1] == "--rank" else None  # a verl rank: --rank SPEC RANK
SPEC = json.load(open(sys.argv[2])) if RANK is not None else None
VERL, N = (SPEC["verl"], 0) if SPEC else (sys.argv[1], int(sys.argv[2]))
SEED = SPEC["seed"] if SPEC else int(sys.argv[3]) if len(sys.argv) > 3 else 1
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
shared = os.environ.get("VERLC_SHARED", os.path.join(root, "..", "shared"))
MODEL = SPEC["model"] if SPEC else sys.argv[4] if len(sys.argv) > 4 else os.path.join(shared, "fixtures/models/qwen2")
sys.path.insert(0, VERL)
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ["MASTER_PORT"] = str(SPEC["port"]) if SPEC else os.environ.get("MASTER_PORT", str(29500 + os.getpid() % 1000))

import numpy as np
import torch
from drv_build import build_driver
import torch.distributed as dist
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification
from verl import DataProto
from verl.base_config import BaseConfig
from verl.workers.actor.dp_actor import DataParallelPPOActor
from verl.workers.critic.dp_critic import DataParallelPPOCritic
from verl.workers.config import FSDPActorConfig, FSDPCriticConfig, FSDPEngineConfig, FSDPOptimizerConfig
from verl.workers.config.actor import PolicyLossConfig
from verl.workers.config.optimizer import build_optimizer

torch.set_num_threads(1)
dist.init_process_group("gloo", rank=RANK or 0, world_size=WORLD if SPEC else 1)

drv = "/tmp/vc_actor_drv" if SPEC else build_driver("actor_drv")

R = random.Random(SEED)
LOSS_MODES = ["vanilla", "vanilla", "vanilla", "gspo", "gpg", "clip_cov", "kl_cov", "geo_mean", "sapo", "cispo"]
# clip_cov picks its tokens at random (torch.randperm) among those in its band unless all are taken: its trials take
# clip_cov_ratio 1 (every token in the band). kl_cov takes the top covariances: two valid tokens tie exactly (their
# centred products are equal), so its rows keep at least three.
KL_TYPES = ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "k3+", "low_var_kl+"]
AGGS = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


ROLE = os.environ.get("DIFF_ACTOR_ROLE", "actor")
LORA = os.environ.get("DIFF_ACTOR_LORA") == "1"  # the actor with PEFT LoRA adapters (rank 4, alpha 8, all-linear)
ENGINE = os.environ.get("DIFF_ACTOR_VERL") == "engine"  # against the engine workers' loss, verlc's default
if SPEC:  # a verl rank: the parent's checkpoint
    CKPT = SPEC["ckpt"]
elif ROLE == "critic":  # a critic checkpoint: the LM's backbone and a random score head, as a trained RM would bring
    torch.manual_seed(SEED)
    CKPT = tempfile.mkdtemp(prefix="diff_critic_")
    from transformers import AutoConfig
    ccfg = AutoConfig.from_pretrained(MODEL, num_labels=1)
    ccfg.classifier_dropout = 0.0  # as verl's fsdp_workers build the critic
    AutoModelForTokenClassification.from_pretrained(MODEL, config=ccfg, dtype=torch.float32).save_pretrained(CKPT)
else:
    CKPT = MODEL


def load_model():
    cls = AutoModelForTokenClassification if ROLE == "critic" else AutoModelForCausalLM
    return cls.from_pretrained(CKPT, dtype=torch.float32, attn_implementation="eager")


ADAPTER = SPEC["adapter"] if SPEC else None
if LORA:
    from peft import LoraConfig, PeftModel, get_peft_model
if LORA and not SPEC:  # PEFT's adapters with random A and B (B nonzero, so the first step's gradients reach A too), saved once
    torch.manual_seed(SEED)
    ADAPTER = tempfile.mkdtemp(prefix="diff_lora_")
    pm = get_peft_model(load_model(), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0))
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    pm.save_pretrained(ADAPTER)


def lora_state(sd):
    """the adapters of a PEFT state dict under the names PEFT's files use"""
    return {k.replace(".default", ""): v for k, v in sd.items() if "lora_" in k}


def settings():
    s = settings_drawn()
    for kv in os.environ.get("DIFF_ACTOR_SET", "").split(","):  # k=v,... pins settings (for bisecting a finding)
        if kv:
            k, v = kv.split("=", 1)
            s[k] = type(s[k])(v) if s[k] is not None and not isinstance(s[k], bool) else (v == "True" if v in ("True", "False") else v)
    return s


def settings_drawn():
    n = R.choice([1, 2, 4])
    prompts = R.choice([1, 2, 3, 4])
    mini = R.choice([d for d in range(1, prompts + 1) if prompts % d == 0])
    rows_mini = mini * n
    s = {"n": n, "prompts": prompts, "mini": mini,
         "micro": R.choice([d for d in range(1, rows_mini + 1) if rows_mini % d == 0]),
         "dyn": R.random() < 0.25, "max_tok": R.choice([24, 40, 64, 200]),
         "epochs": R.choice([1, 1, 2]), "agg": R.choice(AGGS), "mode": R.choice(LOSS_MODES),
         "clip": R.choice([0.2, 0.1, 0.3]), "clip_low": R.choice([None, 0.1, 0.2]),
         "clip_high": R.choice([None, 0.28, 0.2]), "clip_c": R.choice([3.0, 10.0]),
         "ent": R.choice([0.0, 0.0, 0.01]), "kl": R.random() < 0.5, "kl_type": R.choice(KL_TYPES),
         "kl_coef": R.choice([0.001, 0.1]), "grad_clip": R.choice([1.0, 1.0, 0.05]),
         "temp": R.choice([1.0, 1.0, 0.7]), "lr": R.choice([1e-3, 1e-2]), "wd": R.choice([0.01, 0.0]),
         "tmax": R.choice([3, 6, 10])}
    s["cov_ratio"] = 1.0 if s["mode"] == "clip_cov" else R.choice([0.0002, 0.2, 0.5])
    s["lsf"] = R.choice([None, None, 7])  # actor.loss_scale_factor: the legacy workers do not read it
    s["cliprange_value"] = R.choice([0.5, 0.2])
    s["shuffle"] = R.random() < 0.3  # actor.shuffle: the legacy workers take the mini-batches in order anyway
    s["isw"] = R.random() < 0.3  # rollout-correction importance weights in the batch (verl's rollout_is_weights)
    # algorithm.rollout_correction.bypass_mode: the old log-probs are the rollout's, verl's bypass_mode loss (ppo_clip
    # or reinforce) with its own IS weights and rejection masks per micro-batch
    s["bypass"] = R.random() < 0.15
    s["bp_loss"] = R.choice(["ppo_clip", "reinforce"])
    s["bp_is"] = R.choice([None, "token", "sequence"])
    s["bp_is_thr"] = R.choice([2.0, 1.2])
    s["bp_rs"] = R.choice([None, None, "token_k2", "seq_mean_k3", "seq_max_k2"])
    s["bp_rs_thr"] = R.choice([0.05, 1.0])
    if s["bypass"]:
        s["isw"], s["mode"] = False, "vanilla"
    if WORLD > 1:  # each rank a whole share of every mini-batch (verl asserts it), its micro-batches dividing it
        if s["mini"] * s["n"] % WORLD:
            s["n"] *= WORLD
        per = s["mini"] * s["n"] // WORLD
        s["micro"] = R.choice([d for d in range(1, per + 1) if per % d == 0])
    return s


def batch(s, model, vocab):
    B = s["prompts"] * s["n"]
    T = s["tmax"]
    rows = []
    for i in range(B):
        least = 3 if s["mode"] == "kl_cov" else 1
        p = [R.randrange(3, vocab) for _ in range(R.randint(2, 8))]
        rl = R.randint(least, max(least, T))
        r = [R.randrange(3, vocab) for _ in range(rl)]
        mask = [1.0] * rl
        if rl > 2 and R.random() < 0.3:  # a tool's tokens inside the response
            a = R.randrange(1, rl - 1)
            for j in range(a, R.randint(a + 1, rl - 1)):
                mask[j] = 0.0
            if sum(mask) < least:
                mask = [1.0] * rl
        rows.append((p, r, mask))
    if ROLE == "critic":  # returns, old values, an unread column
        f32 = lambda v: float(np.float32(v))
        return [(p, r, mask, [f32(R.gauss(0, 1)) for _ in r], [f32(R.gauss(0, 0.5)) for _ in r], [0.0] * len(r))
                for p, r, mask in rows], T
    with torch.no_grad():  # the model's own log-probs at temperature 1, for realistic old / ref values
        own = []
        for p, r, _ in rows:
            ids = torch.tensor([p + r])
            lp = torch.log_softmax(model(ids).logits[0].float(), -1)
            own.append([lp[len(p) - 1 + j, r[j]].item() for j in range(len(r))])
    out = []
    for (p, r, mask), lp in zip(rows, own):
        f32 = lambda v: float(np.float32(v))
        adv = [f32(R.gauss(0, 1)) for _ in r]
        old = [f32(v + R.gauss(0, 0.1)) for v in lp]
        ref = [f32(v + R.gauss(0, 0.3)) for v in lp]
        isw = [f32(min(2.0, math.exp(R.gauss(0, 0.3)))) for _ in r]
        out.append((p, r, mask, adv, old, ref) + ((isw,) if s["isw"] else ()))
    return out, T


class LeftOut(Exception):
    """a setting left out: verl's use_dynamic_bsz micro-batches are ceil(tokens / budget) balanced groups, one of them
    past the budget here, where verlc takes one more group until every one fits (its memory plan counts on the
    budget), so the micro-batches differ, and with them the legacy workers' per-micro-batch normalisation and the
    micro-batch means; or bypass mode on policy (one mini-batch, one epoch), where the legacy actor's shortcut puts
    its own log-probs in place of the rollout's old ones (use_rollout_log_probs is false there), so its bypass loss
    sees ratio 1, no importance weight and no rejection, where verlc keeps the rollout's"""


def verl_data(s, rows, T, names):
    """verl's padded batch: prompts left-padded, responses right-padded, the row columns under names"""
    B = len(rows)
    P = max(len(r[0]) for r in rows)
    ids = torch.zeros(B, P + T, dtype=torch.long)
    att = torch.zeros(B, P + T, dtype=torch.long)
    resp = torch.zeros(B, T, dtype=torch.long)
    tens = {k: torch.zeros(B, T) for k in names}
    for i, (p, r, *cols) in enumerate(rows):
        ids[i, P - len(p):P] = torch.tensor(p)
        ids[i, P:P + len(r)] = torch.tensor(r)
        att[i, P - len(p):P + len(r)] = 1
        resp[i, :len(r)] = torch.tensor(r)
        for k, v in zip(names, cols):
            tens[k][i, :len(r)] = torch.tensor(v)
    pos = torch.clamp(torch.cumsum(att, 1) - 1, min=0)
    data = DataProto.from_dict(tensors={"input_ids": ids, "attention_mask": att, "position_ids": pos,
                                        "responses": resp, **tens},
                               meta_info={"temperature": s["temp"], "pad_token_id": 0})
    if s["dyn"]:  # verl's micro-batches: ceil(tokens / budget) of them, balanced, past the budget if need be
        from verl.utils.seqlen_balancing import prepare_dynamic_batch
        over = torch.tensor(0)
        for mini in data.split(mini_rows(s)):
            for mb in prepare_dynamic_batch(mini, max_token_len=s["max_tok"])[0]:
                over |= int(mb.batch["attention_mask"].sum().item() > s["max_tok"])
        dist.all_reduce(over, op=dist.ReduceOp.MAX)  # (every rank leaves it out together)
        if over:
            raise LeftOut("verl's micro-batch past its budget")
    return data


def mini_rows(s):
    """a rank's rows of a mini-batch (verl's workers divide ppo_mini_batch_size * rollout.n by the ranks)"""
    return s["mini"] * s["n"] // (WORLD if SPEC else 1)


def metrics_of(met):
    return {k: (float(np.mean(v)) if isinstance(v, list) else float(v)) for k, v in met.items()}


def verl_critic_update(s, rows, T, model, raw=False):
    cfg = FSDPCriticConfig(
        strategy="fsdp", rollout_n=s["n"], ppo_mini_batch_size=mini_rows(s),
        ppo_micro_batch_size_per_gpu=None if s["dyn"] else s["micro"], use_dynamic_bsz=s["dyn"],
        ppo_max_token_len_per_gpu=s["max_tok"], ppo_epochs=s["epochs"], cliprange_value=s["cliprange_value"],
        loss_agg_mode=s["agg"], grad_clip=s["grad_clip"], optim=FSDPOptimizerConfig(lr=s["lr"], weight_decay=s["wd"]),
        model_config=BaseConfig())  # (not read by the update; the default would load a model by its hub name)
    opt = build_optimizer(model.parameters(), cfg.optim)
    with contextlib.redirect_stdout(io.StringIO()):
        critic = DataParallelPPOCritic(cfg, model, opt)
    data = verl_data(s, rows, T, ("response_mask", "returns", "values", "unused"))
    autocast = torch.autocast
    torch.autocast = lambda *a, **k: contextlib.nullcontext()  # its forward autocasts to bf16 on any device
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            met = critic.update_critic(data)
    finally:
        torch.autocast = autocast
    return met if raw else metrics_of(met)


def sum_norm_with_dp_size():
    """b178a3cd's agg_loss divides seq-mean-token-sum-norm by T without the dp_size factor its other modes take, so on
    W ranks FSDP's mean of the gradients leaves 1 / W of one rank's loss (later verl redefined the mode, invariant to
    the ranks); verlc keeps one rank's value on any number of ranks: the comparison on several ranks gives verl's that
    factor (everything else as verl computes it)"""
    import verl.trainer.ppo.core_algos as ca
    import verl.workers.utils.losses as lo
    agg = ca.agg_loss

    def agg_dp(loss_mat, loss_mask, loss_agg_mode, dp_size=1, **k):
        loss = agg(loss_mat, loss_mask, loss_agg_mode, dp_size=dp_size, **k)
        return loss * dp_size if loss_agg_mode == "seq-mean-token-sum-norm" else loss

    ca.agg_loss = lo.agg_loss = agg_dp


def engine_update(cfg, s, data, model, opt):
    """b178a3cd's engine workers' actor update (use_legacy_worker_impl=disable; later verl's only one): its own loss,
    verl.workers.utils.losses.ppo_loss, on each micro-batch of each mini-batch with the mini-batch's normalisers
    (dp_size, batch_num_tokens, global_batch_size), the micro-batch losses' gradients summed, grad_clip and the step;
    the loop as its train_mini_batch / forward_backward_batch run it (mini-batches from verl's own
    tensordict_utils.make_iterator, shuffled with actor.shuffle; micro-batches by count or verl's rearrange_micro_batches), the forward a padded one (its log-probs and entropies laid out packed, as
    its no-padding forward hands them to ppo_loss)"""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.utils.seqlen_balancing import prepare_dynamic_batch
    from verl.workers.utils.losses import ppo_loss
    W, rank = (WORLD, RANK) if SPEC else (1, 0)
    if W > 1:  # (see sum_norm_with_dp_size)
        sum_norm_with_dp_size()
    rows_mini = s["mini"] * s["n"]  # (the global mini-batch: a rank draws rows_mini / W of its own rows)
    ent_on = s["ent"] != 0
    sums, means, grad_norms = {}, {}, []
    # the mini-batches as train_mini_batch draws them: tu.make_iterator over the rank's rows, seed data_loader_seed (42)
    # + rank
    rows = TensorDict({"row": torch.arange(len(data))}, batch_size=[len(data)])
    it = tu.make_iterator(rows, rows_mini // W, s["epochs"], seed=42 + rank, dataloader_kwargs={"shuffle": s["shuffle"]})
    for pick in it:
        mini = data.select_idxs(pick["row"])
        n_tok = torch.tensor(float(mini.batch["response_mask"].sum().item()))
        dist.all_reduce(n_tok)  # (forward_backward_batch's global token count)
        n_tok = n_tok.item()
        micros = (prepare_dynamic_batch(mini, max_token_len=s["max_tok"])[0] if s["dyn"]
                  else mini.split(s["micro"]))
        opt.zero_grad()
        mini_sum = {}
        for mb in micros:
            b = mb.batch
            logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                           position_ids=b["position_ids"]).logits.float() / s["temp"]
            lp_all = torch.log_softmax(logits, -1)
            nxt = torch.roll(b["input_ids"], -1, 1)
            tok_lp = lp_all.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
            tok_ent = -(lp_all.exp() * lp_all).sum(-1)
            att = b["attention_mask"].bool()
            out = {"log_probs": tok_lp[att]}
            if ent_on:
                out["entropy"] = tok_ent[att]
            P = b["input_ids"].shape[1] - T_of(b)
            d = {"prompts": b["input_ids"][:, :P], "responses": b["responses"], "attention_mask": b["attention_mask"],
                 "response_mask": b["response_mask"], "old_log_probs": b["old_log_probs"],
                 "advantages": b["advantages"], "ref_log_prob": b["ref_log_prob"], "dp_size": W,
                 "batch_num_tokens": n_tok, "global_batch_size": rows_mini}
            if "rollout_is_weights" in b.keys():
                d["rollout_is_weights"] = b["rollout_is_weights"]
            loss, met = ppo_loss(cfg, out, d)
            loss.backward()
            for k, v in met.items():
                v = v.aggregate() if hasattr(v, "aggregate") else float(v)
                k = "actor/" + k.split("/")[-1]
                if k in ("actor/pg_loss", "actor/kl_loss", "actor/entropy_loss"):
                    mini_sum[k] = mini_sum.get(k, 0.0) + v
                else:
                    means.setdefault(k, []).append(v)
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=s["grad_clip"])
        if torch.isfinite(gn):
            opt.step()
        else:
            opt.zero_grad()
        grad_norms.append(gn.item())
        for k, v in mini_sum.items():
            sums.setdefault(k, []).append(v)
    met = {k: float(np.mean(v)) for k, v in {**sums, **means}.items()}
    met["actor/grad_norm"] = float(np.mean(grad_norms))
    if "actor/entropy_loss" in met:
        met["actor/entropy"] = met.pop("actor/entropy_loss")
    return met


def T_of(b):
    return b["responses"].shape[1]


def verl_update(s, rows, T, model, raw=False):
    """the update's metrics (raw: as the actor or critic returns them, lists and all)"""
    if ROLE == "critic":
        return verl_critic_update(s, rows, T, model, raw)
    cfg = FSDPActorConfig(
        strategy="fsdp", rollout_n=s["n"], ppo_mini_batch_size=mini_rows(s),
        ppo_micro_batch_size_per_gpu=None if s["dyn"] else s["micro"], use_dynamic_bsz=s["dyn"],
        ppo_max_token_len_per_gpu=s["max_tok"], clip_ratio=s["clip"],
        clip_ratio_low=s["clip_low"] if s["clip_low"] is not None else 0.2,
        clip_ratio_high=s["clip_high"] if s["clip_high"] is not None else 0.2, clip_ratio_c=s["clip_c"],
        loss_agg_mode=s["agg"], entropy_coeff=s["ent"], use_kl_loss=s["kl"], kl_loss_coef=s["kl_coef"],
        kl_loss_type=s["kl_type"], ppo_epochs=s["epochs"], loss_scale_factor=s["lsf"], shuffle=s["shuffle"],
        policy_loss=PolicyLossConfig(loss_mode=s["mode"], clip_cov_ratio=s["cov_ratio"], kl_cov_ratio=s["cov_ratio"]),
        use_torch_compile=False, grad_clip=s["grad_clip"], fsdp_config=FSDPEngineConfig(dtype="float32"),
        optim=FSDPOptimizerConfig(lr=s["lr"], weight_decay=s["wd"]))
    if s["bypass"] and not ENGINE and s["epochs"] == 1 and s["mini"] == s["prompts"]:
        raise LeftOut("on-policy bypass")
    if s["bypass"]:  # as verl's apply_bypass_mode sets the actor's policy_loss (a frozen field: set around it)
        object.__setattr__(cfg, "policy_loss", {"loss_mode": "bypass_mode", "rollout_correction": {
            "loss_type": s["bp_loss"], "rollout_is": s["bp_is"], "rollout_is_threshold": s["bp_is_thr"],
            "rollout_is_batch_normalize": False, "rollout_rs": s["bp_rs"],
            "rollout_rs_threshold": s["bp_rs_thr"] if s["bp_rs"] else None}})
    opt = build_optimizer(model.parameters(), cfg.optim)
    with contextlib.redirect_stdout(io.StringIO()):
        actor = DataParallelPPOActor(cfg, model, opt)
    data = verl_data(s, rows, T, ("response_mask", "advantages", "old_log_probs", "ref_log_prob")
                     + (("rollout_is_weights",) if s["isw"] and ROLE == "actor" else ()))
    if s["bypass"]:
        data.batch["rollout_log_probs"] = data.batch["old_log_probs"].clone()
    if ENGINE:
        return engine_update(cfg, s, data, model, opt)
    with contextlib.redirect_stdout(io.StringIO()):
        met = actor.update_policy(data)
    return met if raw else metrics_of(met)


def verlc_update(s, rows, T, out_dir, legacy):
    # the engine workers take the batch's old log-probs always (their trainer computed them); so does verlc then
    on_policy = s["epochs"] == 1 and s["mini"] == s["prompts"] and not ENGINE and not s["bypass"]
    with tempfile.NamedTemporaryFile("w", suffix=".batch", delete=False) as f:
        f.write(f"{len(rows)} {T} {int(on_policy)} {len(rows[0]) - 2}\n")
        for p, r, *cols in rows:
            f.write(f"{len(p)} {len(r)}\n{' '.join(map(str, p + r))}\n")
            for v in cols:
                f.write(" ".join(float(x).hex() for x in v) + "\n")
        path = f.name
    if ROLE == "critic":
        C = "critic."
        ov = [f"actor_rollout_ref.rollout.n={s['n']}", f"data.train_batch_size={s['prompts']}",
              f"{C}ppo_mini_batch_size={s['mini']}", f"{C}ppo_epochs={s['epochs']}", f"{C}loss_agg_mode={s['agg']}",
              f"{C}cliprange_value={s['cliprange_value']}", f"{C}grad_clip={s['grad_clip']}", f"{C}optim.lr={s['lr']}",
              f"{C}optim.weight_decay={s['wd']}", f"{C}use_dynamic_bsz={str(s['dyn']).lower()}",
              f"{C}ppo_max_token_len_per_gpu={s['max_tok']}", f"data.max_response_length={T}"]
        if not s["dyn"]:
            ov.append(f"{C}ppo_micro_batch_size_per_gpu={s['micro']}")
        return run_drv(ov, path, out_dir, legacy)
    A = "actor_rollout_ref.actor."
    ov = [f"actor_rollout_ref.rollout.n={s['n']}", f"data.train_batch_size={s['prompts']}",
          f"{A}ppo_mini_batch_size={s['mini']}", f"{A}ppo_epochs={s['epochs']}", f"{A}loss_agg_mode={s['agg']}",
          f"{A}policy_loss.loss_mode={s['mode']}", f"{A}clip_ratio={s['clip']}", f"{A}clip_ratio_c={s['clip_c']}",
          f"{A}entropy_coeff={s['ent']}", f"{A}use_kl_loss={str(s['kl']).lower()}", f"{A}kl_loss_coef={s['kl_coef']}",
          f"{A}kl_loss_type={s['kl_type']}", f"{A}grad_clip={s['grad_clip']}", f"{A}optim.lr={s['lr']}",
          f"{A}optim.weight_decay={s['wd']}", f"actor_rollout_ref.rollout.temperature={s['temp']}",
          f"{A}use_dynamic_bsz={str(s['dyn']).lower()}", f"{A}ppo_max_token_len_per_gpu={s['max_tok']}",
          f"{A}policy_loss.clip_cov_ratio={s['cov_ratio']}", f"{A}policy_loss.kl_cov_ratio={s['cov_ratio']}",
          f"data.max_response_length={T}",  # verl's responses are padded to it (here the batch is)
          f"{A}shuffle={str(s['shuffle']).lower()}"]
    if s["lsf"] is not None:
        ov.append(f"{A}loss_scale_factor={s['lsf']}")
    if s["bypass"]:
        RC = "algorithm.rollout_correction."
        ov += [f"{RC}bypass_mode=true", f"{RC}loss_type={s['bp_loss']}", "actor_rollout_ref.rollout.calculate_log_probs=true",
               f"{RC}rollout_is={s['bp_is'] or 'null'}", f"{RC}rollout_is_threshold={s['bp_is_thr']}",
               f"{RC}rollout_rs={s['bp_rs'] or 'null'}"]
        if s["bp_rs"]:
            ov.append(f"{RC}rollout_rs_threshold={s['bp_rs_thr']}")
    if LORA:
        M = "actor_rollout_ref.model."
        ov += [f"{M}lora_rank=4", f"{M}lora_alpha=8", f"{M}target_modules=all-linear", f"{M}lora_adapter_path={ADAPTER}"]
    if not s["dyn"]:
        ov.append(f"{A}ppo_micro_batch_size_per_gpu={s['micro']}")
    if s["clip_low"] is not None:
        ov.append(f"{A}clip_ratio_low={s['clip_low']}")
    if s["clip_high"] is not None:
        ov.append(f"{A}clip_ratio_high={s['clip_high']}")
    return run_drv(ov, path, out_dir, legacy)


def run_drv(ov, path, out_dir, legacy):
    if legacy:
        ov.append("trainer.use_legacy_worker_impl=enable")
    launch = [] if WORLD == 1 else ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--mca", "btl",
                                    "self,vader", "-np", str(WORLD)]
    p = subprocess.run(launch + [drv, ROLE, CKPT, path, out_dir] + ov, capture_output=True, text=True)
    os.unlink(path)
    if p.returncode:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
    met = {}
    for line in p.stdout.splitlines():
        k, v = line.rsplit(" ", 1)
        met[k] = float(v)
    return met, None


METRICS = ["actor/pg_loss", "actor/kl_loss", "actor/entropy", "actor/grad_norm", "actor/pg_clipfrac",
           "actor/ppo_kl", "actor/pg_clipfrac_lower", "critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean",
           "critic/grad_norm"]


def close(a, b, tol):
    return abs(a - b) <= tol * (1 + abs(b))


def grads_mean_then_clip():
    """FSDP's mean of the ranks' gradients, which verl's clip then sees: the clip verl calls on a plain module (the
    reduction at its first call in a step, as FSDP's backward would have made it)"""
    clip = torch.nn.utils.clip_grad_norm_

    def mean_clip(params, max_norm, *a, **k):
        params = list(params)
        for p in params:
            if p.grad is not None:
                dist.all_reduce(p.grad)
                p.grad /= WORLD
        return clip(params, max_norm, *a, **k)

    torch.nn.utils.clip_grad_norm_ = mean_clip


def rank_worker():
    """one of verl's ranks: its block of the batch's rows (verl's dispatch chunks it), the update, its metrics' lists
    and (rank 0) the weights written beside the spec"""
    s, rows, T = SPEC["s"], SPEC["rows"], SPEC["T"]
    per = len(rows) // WORLD
    rows = [tuple(r) for r in rows[RANK * per:(RANK + 1) * per]]
    model = load_model()
    if LORA:
        model = PeftModel.from_pretrained(model, ADAPTER, is_trainable=True)
    grads_mean_then_clip()
    out = SPEC["out"]
    try:
        met = verl_update(s, rows, T, model, raw=True)
    except LeftOut:
        met = {"left_out": 1.0}
    with open(f"{out}.{RANK}.json", "w") as f:
        json.dump({k: (v if isinstance(v, list) else [v]) for k, v in met.items()}, f, default=float)
    if RANK == 0:
        sd = lora_state(model.state_dict()) if LORA else model.state_dict()
        torch.save({k: v.detach().clone() for k, v in sd.items()}, f"{out}.pt")
    dist.destroy_process_group()


def verl_ranks(s, rows, T):
    """verl's update on WORLD ranks, a process each joined over gloo: the metrics as verl's trainer reduces them (the
    ranks' lists concatenated, then their mean) and rank 0's weights"""
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "spec.json")
        with open(spec, "w") as f:
            json.dump({"verl": VERL, "seed": SEED, "model": MODEL, "ckpt": CKPT, "adapter": ADAPTER, "s": s, "rows": rows,
                       "T": T, "out": os.path.join(d, "out"), "port": 29500 + R.randint(1000, 9999)}, f)
        errs = [open(os.path.join(d, f"err.{r}"), "w+") for r in range(WORLD)]
        ps = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", spec, str(r)], stderr=errs[r])
              for r in range(WORLD)]
        try:
            codes = [p.wait(timeout=600) for p in ps]
        except subprocess.TimeoutExpired:
            for p in ps: p.kill()
            raise RuntimeError("verl's ranks timed out")
        if any(codes):  # (verl's own error: the last line a rank wrote)
            last = [l for e in errs for l in (e.seek(0) or e.read()).splitlines() if l.strip()]
            raise RuntimeError(f"a verl rank failed ({last[-1][-200:] if last else codes})")
        merged = {}
        for r in range(WORLD):
            for k, v in json.load(open(os.path.join(d, f"out.{r}.json"))).items():
                merged.setdefault(k, []).extend(v)
        if "left_out" in merged: raise LeftOut("verl's micro-batch past its budget")
        return {k: float(np.mean(v)) for k, v in merged.items()}, torch.load(os.path.join(d, "out.pt"))


def main():
    legacy = os.environ.get("DIFF_ACTOR_VERLC_DEFAULT") != "1" and not ENGINE
    ONLY = {int(x) for x in os.environ.get("DIFF_ACTOR_ONLY", "").split(",") if x}  # trials to run (the others drawn)
    base = load_model()
    vocab = base.config.vocab_size
    w0 = {k: v.detach().clone() for k, v in base.state_dict().items()}
    LORA0 = load_file(os.path.join(ADAPTER, "adapter_model.safetensors")) if LORA else None
    n_ok = n_bad = n_skip = n_over = n_nan = 0
    for trial in range(N):
        s = settings()
        base.load_state_dict(w0)
        rows, T = batch(s, base, vocab)
        if ONLY and trial not in ONLY:
            continue
        model = load_model()
        if LORA:
            model = PeftModel.from_pretrained(model, ADAPTER, is_trainable=True)
        try:
            vm, sd_ranks = verl_ranks(s, rows, T) if WORLD > 1 else (verl_update(s, rows, T, model), None)
        except LeftOut:
            n_over += 1
            continue
        except Exception as e:  # verl refuses the setting (e.g. a micro-batch size its checks reject)
            n_skip += 1
            print(f"trial {trial}: verl raised {type(e).__name__}: {str(e)[:120]} ({s})")
            continue
        with tempfile.TemporaryDirectory() as d:
            cm, err = verlc_update(s, rows, T, d, legacy)
            if cm is None:
                n_bad += 1
                print(f"trial {trial}: verlc failed: {err} ({s})")
                continue
            new = load_file(os.path.join(d, "model.safetensors"))
            if LORA:  # the adapters, against PEFT's; the base weights stay
                base_new = new
                new = load_file(os.path.join(d, "adapter_model.safetensors"))
            if ROLE == "critic":  # the value head beside the checkpoint
                head = [float.fromhex(x) for x in open(os.path.join(d, "head.txt")).read().split()]
                new["score.weight"] = torch.tensor(head[:-1]).reshape(1, -1)
                new["score.bias"] = torch.tensor(head[-1:])
        if any(math.isnan(v) for v in vm.values()):  # torch's 0 / 0 of a micro-batch rejection sampling emptied; verlc's 0
            n_nan += 1
            continue
        bad = []
        # after a first optimizer step the weights carry Adam's rounding-sized differences (see below), which later
        # mini-batches' log-probs see: the metrics are compared to 1e-3 then, 2e-3 past three steps
        steps = s["epochs"] * (s["prompts"] // s["mini"])
        tol = 2e-4 if steps == 1 else 1e-3 if steps <= 3 else 2e-3
        for k in METRICS:
            if k in vm and not (k == "actor/kl_loss" and not s["kl"]):
                if k not in cm:
                    bad.append(f"{k}: verl {vm[k]:.6g}, verlc none")
                elif not close(cm[k], vm[k], tol if not k.endswith("/grad_norm") else 1e-3):
                    bad.append(f"{k}: verl {vm[k]:.7g}, verlc {cm[k]:.7g}")
        sd, ref0 = (lora_state(model.state_dict()), LORA0) if LORA else (model.state_dict(), w0)
        if sd_ranks is not None:
            sd = sd_ranks
        if LORA and any(not torch.equal(v, w0[k]) for k, v in base_new.items() if k in w0):
            bad.append("base weights moved under LoRA")
        if LORA and set(new) != set(sd):
            bad.append(f"adapter tensors: verlc {len(new)}, PEFT {len(sd)} ({sorted(set(new) ^ set(sd))[:3]})")
        worst, n_off, n_all = 0.0, 0, 0
        for k, v in new.items():
            if k in sd:
                e = ((v - ref0[k]) - (sd[k] - ref0[k])).abs() / s["lr"]
                worst = max(worst, e.max().item())
                n_off += int((e > 0.05).sum())
                n_all += e.numel()
        # Adam's first steps move a weight by about lr whatever its gradient's size, so a gradient within rounding of 0
        # may move it differently (by up to 2 lr when its sign flips): a few such weights are allowed
        if n_off > 1e-3 * n_all:
            bad.append(f"weights: {n_off} of {n_all} updates differ by more than 0.05 lr, the largest by {worst:.3g} lr")
        if bad:
            n_bad += 1
            print(f"trial {trial}: " + "; ".join(bad) + f"  ({s})")
        else:
            n_ok += 1
    print(f"{n_ok} agree, {n_bad} differ, {n_skip} refused by verl, {n_over} left out (verl's dynamic micro-batch past "
          f"its token budget, or its on-policy shortcut in bypass mode), {n_nan} where verl's metrics are NaN (0 / 0 over a "
          f"micro-batch whose tokens rejection sampling all took out), of {N}")


if __name__ == "__main__":
    if SPEC:
        rank_worker()
    else:
        main()
