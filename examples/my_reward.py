"""An example custom reward for examples/reward_wrapper.py: 1.0 when the ground truth appears in the answer."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    print("scoring", data_source)  # goes to stderr through the wrapper
    return 1.0 if str(ground_truth) in solution_str else 0.0
