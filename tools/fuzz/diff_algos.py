#!/usr/bin/env python3
"""Differential check of `verlc algos` against verl's own core algorithm functions (verl/trainer/ppo/core_algos.py at
b178a3cd, run unchanged with the stand-ins tools/fixtures/make_adv_ref.py uses) on random inputs: batch and length
shapes, masks with empty and full rows, groups with singletons, sparse and dense rewards, ratios far from 1, every
loss aggregation mode with and without the global batch info, rollout IS weights, each kl_penalty mode; for the
policy and value losses also their gradients (verl's by autograd, verlc's own backward, `with_grad`). Compared
within a relative 1e-4 (float32 on both sides, different summation orders; 2e-3 after REINFORCE++'s whitening of
near-equal scores); NaN where both give NaN, or where verl divides 0 by 0 over an all-masked batch and verlc gives 0.

usage: diff_algos.py VERL_SRC N [SEED]     (from the repository root; needs torch, numpy and build/verlc; VERL_SRC
holds `git archive b178a3cd verl/trainer/ppo/core_algos.py verl/utils/groupwise.py verl/utils/torch_functional.py`)"""
import ast, json, math, os, random, subprocess, sys, tempfile, types
from types import SimpleNamespace
import numpy as np
import torch

SRC, N = sys.argv[1], int(sys.argv[2])
R = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
torch.manual_seed(R.randint(0, 10 ** 6))


class Cfg(SimpleNamespace):  # verl's ActorConfig as the losses read it
    def get(self, k, d=None):
        return getattr(self, k, d)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import verl_algos  # noqa: E402

ca, _ = verl_algos.load(SRC, actor_config=Cfg, extra_fns=("entropy_from_logits", "clip_by_value"))


def shape():
    B, T = R.randint(1, 8), R.randint(1, 7)
    lens = [R.choice([0, T, R.randint(1, T)]) for _ in range(B)]
    if R.random() < 0.7 and not any(lens):
        lens[0] = T
    m = torch.zeros(B, T)
    for i, n in enumerate(lens):
        m[i, :n] = 1
    return B, T, m


def outcome(B, T, m):
    r = torch.zeros(B, T)
    for i in range(B):
        n = int(m[i].sum())
        r[i, max(n - 1, 0)] = R.choice([0.0, 1.0, -1.0, round(R.gauss(0, 1.5), 3)])
    if R.random() < 0.3:
        r += (torch.rand(B, T) < 0.2) * torch.randn(B, T) * 0.5
    return r


def groups(B):
    k = R.randint(1, max(1, B))
    return np.array([chr(97 + R.randrange(k)) for _ in range(B)], dtype=object)


def L(x):
    return x.tolist() if torch.is_tensor(x) else x


def case():
    B, T, m = shape()
    k = R.random()
    if k < 0.35:
        r, idx = outcome(B, T, m), groups(B)
        fn = R.choice(["grpo_outcome_advantage", "grpo_vectorized_outcome_advantage", "rloo_outcome_advantage",
                       "rloo_vectorized_outcome_advantage", "opo_outcome_advantage", "gpg_outcome_advantage",
                       "reinforce_plus_plus_baseline_outcome_advantage", "grpo_passk_outcome_advantage"])
        kw = {}
        if "grpo" in fn:
            kw["norm_adv_by_std_in_grpo"] = R.random() < 0.5
        if fn == "gpg_outcome_advantage":
            kw["f_norm"] = R.choice([1.0, 0.5])
        args = dict(token_level_rewards=L(r), response_mask=L(m), index=list(idx), **kw)
        ref = getattr(ca, "compute_" + fn)(token_level_rewards=r, response_mask=m, index=idx,
                                          config={"norm_adv_by_std_in_grpo": kw.get("norm_adv_by_std_in_grpo", True)}, **kw)
        return fn, args, ref
    if k < 0.45:
        r, v = outcome(B, T, m), torch.randn(B, T)
        gamma, lam = R.choice([1.0, 0.99]), R.choice([1.0, 0.95])
        ref = ca.compute_gae_advantage_return(r, v, m, torch.tensor(gamma), torch.tensor(lam))
        return "gae_advantage_return", dict(token_level_rewards=L(r), values=L(v), response_mask=L(m), gamma=gamma, lam=lam), ref
    if k < 0.5:
        r, gamma = outcome(B, T, m), R.choice([1.0, 0.9])
        ref = ca.compute_reinforce_plus_plus_outcome_advantage(r, m, config=Cfg(gamma=gamma))
        return "reinforce_plus_plus_outcome_advantage", dict(token_level_rewards=L(r), response_mask=L(m), gamma=gamma), ref
    if k < 0.55:
        r, bl = outcome(B, T, m), torch.randn(B)
        ref = ca.compute_remax_outcome_advantage(r, bl, m)
        return "remax_outcome_advantage", dict(token_level_rewards=L(r), reward_baselines=L(bl), response_mask=L(m)), ref
    mode = R.choice(["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
    gbi = {}
    if R.random() < 0.4:
        gbi = dict(dp_size=R.choice([1, 2]), batch_num_tokens=int(m.sum()) + R.randint(0, 5), global_batch_size=B + R.randint(0, 3))
    if k < 0.65:
        lm = torch.randn(B, T)
        ref = ca.agg_loss(lm, m, mode, **gbi)
        return "agg_loss", dict(loss_mat=L(lm), loss_mask=L(m), loss_agg_mode=mode, **gbi), ref
    if k < 0.85:
        old = -torch.rand(B, T) * 3 - 0.01
        lp = old + torch.randn(B, T) * R.choice([0.05, 0.3, 1.0])
        adv = torch.randn(B, T)
        w = torch.rand(B, T) * 1.5 + 0.25 if R.random() < 0.3 else None
        lo, hi = R.choice([(None, None), (0.2, 0.28), (0.1, 0.3)])
        kind = R.choice(["vanilla", "vanilla", "gspo", "cispo", "sapo", "gpg", "geo_mean", "kl_cov"])
        pl = Cfg(clip_cov_ratio=R.choice([0.0002, 0.2]), clip_cov_lb=1.0, clip_cov_ub=5.0,
                 kl_cov_ratio=R.choice([0.0002, 0.2, 0.5]), ppo_kl_coef=R.choice([0.1, 1.0]))
        c = Cfg(clip_ratio=R.choice([0.2, 0.1]), clip_ratio_low=lo, clip_ratio_high=hi, clip_ratio_c=R.choice([3.0, 10.0]),
                global_batch_info=gbi, loss_agg_mode=mode, tau_pos=R.choice([1.0, 0.5]), tau_neg=R.choice([1.05, 2.0]),
                policy_loss=pl)
        if kind == "kl_cov" and m.sum() < 3:  # two tokens' covariances tie exactly: torch.topk's pick is its own
            kind = "vanilla"
        if kind == "geo_mean":  # b178a3cd's geo_mean takes a plain mean over the rows and ignores the global batch info
            gbi = {}            # (verlc normalizes it as its other losses there); compared without it
            c.global_batch_info = gbi
        lpg = lp.clone().requires_grad_(True)  # the loss's gradient w.r.t. log_prob by autograd, as training takes it
        loss, met = getattr(ca, "compute_policy_loss_" + kind)(old, lpg, adv, m, loss_agg_mode=mode, config=c,
                                                               rollout_is_weights=w)
        loss.backward()
        ref = (loss.detach(), met, lpg.grad if lpg.grad is not None else torch.zeros(B, T))
        args = dict(with_grad=1, old_log_prob=L(old), log_prob=L(lp), advantages=L(adv), response_mask=L(m), loss_agg_mode=mode,
                    clip_ratio=c.clip_ratio, clip_ratio_c=c.clip_ratio_c, tau_pos=c.tau_pos, tau_neg=c.tau_neg,
                    clip_cov_ratio=pl.clip_cov_ratio, kl_cov_ratio=pl.kl_cov_ratio, ppo_kl_coef=pl.ppo_kl_coef, **gbi)
        if lo is not None:
            args.update(clip_ratio_low=lo, clip_ratio_high=hi)
        if w is not None:
            args["rollout_is_weights"] = L(w)
        return "policy_loss_" + kind, args, ref
    if k < 0.93:
        lp, ref_lp = -torch.rand(B, T) * 4, -torch.rand(B, T) * 4
        pen = R.choice(["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"])
        return "kl_penalty", dict(logprob=L(lp), ref_logprob=L(ref_lp), kl_penalty=pen), ca.kl_penalty(lp, ref_lp, pen)
    vp, ret, v = torch.randn(B, T), torch.randn(B, T), torch.randn(B, T)
    clip = R.choice([0.2, 0.5])
    vpg = vp.clone().requires_grad_(True)
    loss, frac = ca.compute_value_loss(vpg, ret, v, m, clip, mode)
    loss.backward()
    ref = (loss.detach(), frac, vpg.grad if vpg.grad is not None else torch.zeros(B, T))
    return "value_loss", dict(with_grad=1, vpreds=L(vp), returns=L(ret), values=L(v), response_mask=L(m), cliprange_value=clip,
                              loss_agg_mode=mode), ref


def plain(x):
    if torch.is_tensor(x):
        return plain(x.tolist())
    if isinstance(x, (tuple, list)):
        return [plain(y) for y in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


TOL = 1e-4


def close(a, b, path="") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                return f"{path}.{k} missing"
            d = close(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: lengths {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = close(x, y, f"{path}[{i}]")
            if d:
                return d
        return ""
    if a is None or b is None:  # NaN (or inf); verl's 0 / 0 of an all-masked batch is verlc's 0 (src/rl/stats.c)
        return "" if (a is None and b is None) or (a is None and b == 0 and EMPTY) else f"{path}: {a} vs {b}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return "" if abs(a - b) <= TOL * max(1.0, abs(a), abs(b)) else f"{path}: {a} vs {b}"
    return "" if a == b else f"{path}: {a!r} vs {b!r}"


cases, refused = [], 0
while len(cases) < N:
    try:
        cases.append(case())
    except (ValueError, AssertionError):  # inputs verl refuses (Pass@k's groups of one): drawn again
        refused += 1
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump({"inputs": {}, "calls": [{"fn": fn, "args": args} for fn, args, _ in cases]}, f)
r = subprocess.run(["build/verlc", "algos", f.name], capture_output=True, text=True)
os.unlink(f.name)
if r.returncode:
    sys.exit("verlc algos failed: " + r.stderr[-500:])
got = json.loads(r.stdout)["results"]
bad = []
for (fn, args, ref), g in zip(cases, got):
    mask = args.get("response_mask", args.get("loss_mask"))
    EMPTY = mask is not None and not any(any(row) for row in mask)
    # whitening over the batch (REINFORCE++): equal scores leave a variance of rounding noise, which 1 / sqrt(var + 1e-8)
    # magnifies to about 1e-3 on either side
    TOL = 2e-3 if fn.startswith("reinforce_plus_plus") else 1e-4
    d = close(plain(ref), g)
    if d:
        bad.append((fn, args, d))
by = {}
for fn, _, _ in cases:
    by[fn] = by.get(fn, 0) + 1
print(f"{N} calls over {len(by)} functions ({refused} drawn again: verl refused them), {len(bad)} differ")
for fn, args, d in bad[:8]:
    print(" ", fn, d, "\n   ", json.dumps({k: v for k, v in args.items()})[:500])
sys.exit(1 if bad else 0)
