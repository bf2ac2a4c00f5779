# adapted from pytorch/torchtitan torchtitan/models/moe/moe.py
import torch


def maybe_accumulate_tokens(moe, num_tokens_per_expert):
    if getattr(moe, "_last_grad", False) and moe.load_balance_coeff is not None:
        with torch.no_grad():
            moe.tokens_per_expert.add_(num_tokens_per_expert)


def update_expert_bias(moe):
    # runs before optimizer.step(); the router of the next forward reads moe.expert_bias
    with torch.no_grad():
        delta = moe.tokens_per_expert.mean() - moe.tokens_per_expert
        moe.expert_bias.add_(moe.load_balance_coeff * torch.sign(delta))
        moe.tokens_per_expert.zero_()
