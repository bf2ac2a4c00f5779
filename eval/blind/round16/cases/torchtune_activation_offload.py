# adapted from pytorch/torchtune torchtune/training/_activation_offloading.py
from typing import Optional
from warnings import warn

import torch
from torch.autograd.graph import saved_tensors_hooks


class OffloadActivations(saved_tensors_hooks):
    """Context manager under which activation tensors created in the forward pass will be offloaded."""

    def __init__(
        self,
        use_pin_memory: bool = True,
        use_streams: Optional[bool] = None,
        max_fwd_stash_size: int = 5,
        min_offload_size: int = 1024,
    ) -> None:
        self.use_streams = torch.__version__ >= "2.5.0.dev20240907" if use_streams is None else use_streams
        self.min_tensor_size_bytes = min_offload_size
        self.tracker = {}
        self.tensor_id: int = 0
        self.is_first_forward_call = True
        self.is_first_backward_call = True
        self.use_pin_memory: bool = use_pin_memory
        self.s0 = torch.cuda.default_stream()
        if self.use_streams:
            self.s1 = torch.cuda.Stream()
            self.fwd_stash = {}
            self.max_fwd_stash_size = max_fwd_stash_size

        def get_tensor_id() -> int:
            self.tensor_id += 1
            return self.tensor_id

        def pack_tensor(activation: torch.Tensor) -> int:
            if self.is_first_forward_call:
                assert len(self.tracker) == 0, "backward pass should have cleared tracker of all tensors"
                self.is_first_forward_call = False
                self.is_first_backward_call = True

            num_bytes = activation.element_size() * activation.nelement()
            tensor_id = get_tensor_id()

            # only offload hefty activations that will be consumed by a backward
            if torch.is_grad_enabled() and num_bytes >= self.min_tensor_size_bytes and (
                not isinstance(activation, torch.nn.Parameter)
                and not isinstance(activation, torch.nn.Buffer)
            ):
                if self.use_streams:
                    for id in [k for k in self.fwd_stash.keys()]:
                        if id <= tensor_id - self.max_fwd_stash_size:
                            _, ev = self.fwd_stash[id]
                            self.s0.wait_event(ev)
                            del self.fwd_stash[id]
                        else:
                            break
                    self.s1.wait_stream(self.s0)
                stream = self.s1 if self.use_streams else self.s0
                with torch.cuda.stream(stream):
                    cpu_tensor = torch.empty_like(activation, pin_memory=self.use_pin_memory, device="cpu")
                    cpu_tensor.copy_(activation, non_blocking=True)
                    self.tracker[tensor_id] = (cpu_tensor, True)
                if self.use_streams:
                    self.fwd_stash[tensor_id] = (activation, self.s1.record_event())
            else:
                self.tracker[tensor_id] = (activation, False)
            return tensor_id

        def unpack_tensor(unpack_tensor_id: int) -> torch.Tensor:
            if self.is_first_backward_call:
                self.is_first_backward_call = False
                self.is_first_forward_call = True
            maybe_gpu_tensor, modified = self.tracker.pop(unpack_tensor_id)
            if modified:
                maybe_gpu_tensor = maybe_gpu_tensor.to("cuda", non_blocking=True)
            return maybe_gpu_tensor

        super().__init__(pack_tensor, unpack_tensor)

    def __enter__(self):
        if not torch.is_grad_enabled():
            warn("OffloadActivations entered under no_grad: nothing will be saved, so nothing is offloaded")
        return super().__enter__()
