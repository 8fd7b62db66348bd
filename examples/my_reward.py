"""A verl custom reward function: `verlc train custom_reward_function.path=examples/my_reward.py` (and, as in verl,
custom_reward_function.name=compute_score, the default). 1.0 when the ground truth appears in the answer."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    print("scoring", data_source)  # verlc sends the function's prints to stderr
    return 1.0 if str(ground_truth) in solution_str else 0.0
