#!/usr/bin/env python3
"""PyTorch + transformers on this machine's GPU: issue 7's three peer figures for one config.

The settings are issue 7's: random weights of the config's shape, bf16; a training step of 16 x 512 tokens
(f32 weights under bf16 autocast, as FSDP's mixed precision computes, fused AdamW), a log-prob forward of
16 x 1,024 tokens (bf16 weights; the log-probs of the next tokens in f32, as verl's logprobs_from_logits) and
HF `generate` at batch 256, prompt 128, 256 new tokens (bf16 weights, greedy, every row decoding all 256).
gpu-check.sh runs it where the GPU is not the H200 that issue 7's figures came from, so that verlc's benches
compare with PyTorch on the same card.

  usage: peer_torch.py --config CFG.json [--out F.env] [--device cuda] [--what train,logprob,generate]
                       [--batch 16 --seq 512 --lp-seq 1024 --gen-batch 256 --prompt 128 --new 256 --iters 3]
                       [--dtype bf16|f32]

--dtype f32 (for a CPU peer: verlc's CPU path computes in f32) keeps weights and arithmetic in f32 throughout: no
autocast in training, f32 weights for log-probs and generate.

Prints one line per figure and, with --out, writes TRAIN=, LOGPROB=, GENERATE= (tokens/s) and PEER= (what ran)
as shell assignments. Exit status 2 when torch / transformers are missing or the config cannot be read.
"""
import argparse
import json
import sys
import time

PEAK_BF16 = 989e12  # H100 / H200 SXM dense bf16 (issue 7's MFU: 6 x parameters x tokens/s over this)


def fail(msg):
    print(f"peer_torch: {msg}", file=sys.stderr)
    sys.exit(2)


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--out")
    p.add_argument("--device", default="cuda")
    p.add_argument("--what", default="train,logprob,generate")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--lp-seq", type=int, default=1024)
    p.add_argument("--gen-batch", type=int, default=256)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--dtype", default="bf16", choices=("bf16", "f32"))
    a = p.parse_args()
    for k in ("batch", "seq", "lp_seq", "gen_batch", "prompt", "new", "iters"):
        if getattr(a, k) < 1:
            fail(f"--{k.replace('_', '-')} must be at least 1")
    bad = set(a.what.split(",")) - {"train", "logprob", "generate"}
    if bad:
        fail(f"--what: unknown figure {sorted(bad)[0]!r} (train, logprob, generate)")
    return a


def load_config(path, transformers):
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(d, dict) or "model_type" not in d:
        fail(f"{path}: no model_type")
    mt = d.pop("model_type")
    for k in ("architectures", "torch_dtype", "dtype", "transformers_version"):
        d.pop(k, None)
    try:
        return transformers.AutoConfig.for_model(mt, **d)
    except (ValueError, KeyError, TypeError) as e:
        fail(f"{path}: transformers cannot build model_type {mt!r}: {e}")


class Clock:
    def __init__(self, torch, dev):
        self.torch, self.cuda = torch, dev.startswith("cuda")

    def now(self):
        if self.cuda:
            self.torch.cuda.synchronize()
        return time.perf_counter()

    def per_call(self, fn, warm, iters):
        """seconds per call of fn over iters calls, after warm untimed ones"""
        for _ in range(warm):
            fn()
        t = self.now()
        for _ in range(iters):
            fn()
        return (self.now() - t) / iters


def make_model(torch, transformers, cfg, dev, dtype):
    torch.manual_seed(0)
    with torch.device(dev):  # (the random init on the device itself: seconds less than on the CPU)
        m = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    return m.to(dev)


def wdtype(torch, a):
    """the weights' dtype where no optimizer keeps f32 masters (log-probs, generate)"""
    return torch.bfloat16 if a.dtype == "bf16" else torch.float32


def bench_train(torch, transformers, cfg, a, clk, nparams):
    m = make_model(torch, transformers, cfg, a.device, torch.float32)
    m.train()
    fused = a.device.startswith("cuda")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-6, fused=fused)
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.seq), device=a.device)

    def step():
        with torch.autocast(device_type=a.device.split(":")[0], dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    dt = clk.per_call(step, 2, a.iters)  # (warm-up: allocator, kernels' autotuning, the optimizer state)
    tps = a.batch * a.seq / dt
    mfu = (f", MFU {6 * nparams * tps / PEAK_BF16 * 100:.1f}% (6 x {nparams / 1e6:.0f} M params)"
           if a.device.startswith("cuda") else f", {6 * nparams * tps / 1e9:.1f} GFLOP/s (6 x {nparams / 1e6:.0f} M params)")
    print(f"peer train: {a.batch} x {a.seq} tokens, {dt * 1e3:.1f} ms/step, {tps:,.0f} tokens/s{mfu}")
    del m, opt
    return tps


def bench_logprob(torch, transformers, cfg, a, clk):
    m = make_model(torch, transformers, cfg, a.device, wdtype(torch, a))
    m.eval()
    ids = torch.randint(0, cfg.vocab_size, (a.batch, a.lp_seq), device=a.device)

    @torch.no_grad()
    def run():
        logits = m(input_ids=ids).logits[:, :-1].float()
        lp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        return lp.sum()

    dt = clk.per_call(run, 1, a.iters)
    tps = a.batch * a.lp_seq / dt
    print(f"peer logprob: {a.batch} x {a.lp_seq} tokens, {dt * 1e3:.1f} ms/pass, {tps:,.0f} tokens/s")
    del m
    return tps


def bench_generate(torch, transformers, cfg, a, clk):
    m = make_model(torch, transformers, cfg, a.device, wdtype(torch, a))
    m.eval()
    ids = torch.randint(0, cfg.vocab_size, (a.gen_batch, a.prompt), device=a.device)
    mask = torch.ones_like(ids)

    def gen(n):
        return m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                          pad_token_id=0)

    gen(min(4, a.new))
    t = clk.now()
    out = gen(a.new)
    dt = clk.now() - t
    made = (out.shape[1] - a.prompt) * a.gen_batch
    tps = made / dt
    print(f"peer generate: batch {a.gen_batch}, {a.prompt} + {out.shape[1] - a.prompt}, {dt:.2f} s, "
          f"{tps:,.0f} tokens/s (whole call)")
    del m
    return tps


def main():
    a = parse()
    try:
        import torch
        import transformers
    except ImportError as e:
        fail(f"{e} (PyTorch and transformers are needed for the peer figures)")
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        fail("torch.cuda.is_available() is false")
    cfg = load_config(a.config, transformers)
    clk = Clock(torch, a.device)
    name = torch.cuda.get_device_name(a.device) if a.device.startswith("cuda") else "cpu"
    peer = f"PyTorch {torch.__version__} + transformers {transformers.__version__} on this {name}, {a.dtype}"
    if a.device == "cpu":
        peer += f", {torch.get_num_threads()} threads"
    print(peer)
    with torch.device("meta"):
        nparams = sum(p.numel() for p in transformers.AutoModelForCausalLM.from_config(cfg).parameters())
    res = {}
    what = a.what.split(",")
    if "train" in what:
        res["TRAIN"] = bench_train(torch, transformers, cfg, a, clk, nparams)
    if "logprob" in what:
        res["LOGPROB"] = bench_logprob(torch, transformers, cfg, a, clk)
    if "generate" in what:
        res["GENERATE"] = bench_generate(torch, transformers, cfg, a, clk)
    if a.out:
        with open(a.out, "w") as f:
            for k, v in res.items():
                f.write(f"{k}={v:.0f}\n")
            f.write("PEER='" + peer.replace("'", "") + "'\n")


if __name__ == "__main__":
    main()
