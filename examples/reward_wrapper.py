#!/usr/bin/env python3
"""Serves a verl-style compute_score(data_source, solution_str, ground_truth, extra_info) to verlc as JSON lines.
Usage: python3 reward_wrapper.py my_reward.py [function_name]   (custom_reward_function.path / .name in verl)"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("user_reward", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
fn = getattr(mod, sys.argv[2] if len(sys.argv) > 2 else "compute_score")
out, sys.stdout = sys.stdout, sys.stderr  # the user's prints must not reach the protocol stream
for line in sys.stdin:
    r = json.loads(line)
    s = fn(r["data_source"], r["solution_str"], r["ground_truth"], r.get("extra_info"))
    out.write(json.dumps({"score": s["score"] if isinstance(s, dict) else s}) + "\n"); out.flush()
