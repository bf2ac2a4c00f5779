# adapted from vllm-project/vllm vllm/distributed/communication_op.py
from .hooks import install_grad_mode_hook
from .communication_op import tensor_model_parallel_all_gather, tensor_model_parallel_all_reduce
