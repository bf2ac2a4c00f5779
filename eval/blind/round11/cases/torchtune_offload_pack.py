# Adapted from pytorch/torchtune torchtune/training/_activation_offloading.py (OffloadActivations.pack_tensor).
import torch
from torch.autograd.graph import saved_tensors_hooks


class OffloadActivations(saved_tensors_hooks):
    def __init__(self, use_pin_memory: bool = True, use_streams: bool = True, min_offload_size: int = 1024,
                 max_fwd_stash_size: int = 5) -> None:
        self.min_tensor_size_bytes = min_offload_size
        self.tracker = {}
        self.tensor_id = 0
        self.is_first_forward_call = True
        self.is_first_backward_call = True
        self.use_pin_memory = use_pin_memory
        self.use_streams = use_streams
        self.s0 = torch.cuda.default_stream()
        if self.use_streams:
            self.s1 = torch.cuda.Stream()
            self.fwd_stash = {}
            self.max_fwd_stash_size = max_fwd_stash_size

        def get_num_bytes_tensor(x: torch.Tensor) -> int:
            return x.element_size() * x.nelement()

        def pack_tensor(activation: torch.Tensor) -> int:
            if self.is_first_forward_call:
                self.is_first_forward_call = False
                self.is_first_backward_call = True
            num_bytes = get_num_bytes_tensor(activation)
            self.tensor_id += 1
            tensor_id = self.tensor_id
            if num_bytes >= self.min_tensor_size_bytes and torch.is_grad_enabled() and (
                not isinstance(activation, torch.nn.Parameter)
                and not isinstance(activation, torch.nn.Buffer)
            ):
                if self.use_streams:
                    self.s1.wait_stream(self.s0)
                stream = self.s1 if self.use_streams else self.s0
                with torch.cuda.stream(stream):
                    cpu_tensor = torch.empty_like(activation, pin_memory=self.use_pin_memory, device="cpu")
                    cpu_tensor.copy_(activation, non_blocking=True)
                    self.tracker[tensor_id] = (cpu_tensor, True)
                if self.use_streams:
                    event = self.s1.record_event()
                    self.fwd_stash[tensor_id] = (activation, event)
            else:
                self.tracker[tensor_id] = (activation, False)
            return tensor_id

        def unpack_tensor(unpack_tensor_id: int) -> torch.Tensor:
            maybe_gpu_tensor, modified = self.tracker.pop(unpack_tensor_id)
            if modified:
                maybe_gpu_tensor = maybe_gpu_tensor.to("cuda", non_blocking=True)
            return maybe_gpu_tensor

        super().__init__(pack_tensor, unpack_tensor)
