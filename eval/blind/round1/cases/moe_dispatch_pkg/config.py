from dataclasses import dataclass


@dataclass
class MoEDispatcherConfig:
    num_experts: int
    topk: int
    hidden_size: int
    capacity_factor: float = 1.25
    eval_capacity_factor: float = 2.0
    min_capacity: int = 4
    drop_tokens: bool = True
    overlap_a2a_with_shared_expert: bool = True
    use_inference_fused_permute: bool = False
    aux_loss_coeff: float = 1e-2
