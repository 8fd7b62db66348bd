#!/usr/bin/env python3
"""A custom reward program (verlc's JSON-lines protocol, any language), given as a command line:
`verlc train 'custom_reward_function.path=python3 examples/reward_program.py'` (a bare FILE.py path is a
verl reward function module instead: see examples/my_reward.py and docs/rewards.md).

verlc starts it once and keeps it alive: one JSON object per line on stdin
  {"data_source": ..., "solution_str": ..., "ground_truth": ..., "extra_info": ...}
and one line {"score": x} per request on stdout (flush after each). A row that takes longer than
custom_reward_function.timeout_s (add it with +custom_reward_function.timeout_s=N; default 60) or a
crash scores 0 and the program is restarted; more than half of a batch failing stops training."""
import json
import re
import sys

for line in sys.stdin:
    row = json.loads(line)
    nums = re.findall(r"-?\d+(?:\.\d+)?", row["solution_str"].replace(",", ""))
    score = 1.0 if nums and nums[-1] == str(row.get("ground_truth")) else 0.0
    print(json.dumps({"score": score}), flush=True)
