# Adapted from hpcaitech/ColossalAI colossalai/shardformer/layer/linear.py (Linear1D_Row.forward).
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, is_grad_enabled

from colossalai.shardformer.layer._operation import reduce_forward, split_forward_gather_backward
from colossalai.shardformer.layer.utils import divide


def _split_last_dim(input_: Tensor, process_group) -> Tensor:
    world_size = dist.get_world_size(process_group)
    rank = dist.get_rank(process_group)
    return torch.chunk(input_, world_size, dim=-1)[rank].contiguous()


class Linear1D_Row(torch.nn.Module):
    def chunk_weight(self):
        self.weight_list = torch.chunk(self.weight, self.stream_chunk_num, dim=0)

    def forward(self, input_: Tensor) -> Tensor:
        if self.parallel_input:
            assert input_.shape[-1] == self.weight.shape[-1]
        else:
            assert divide(input_.shape[-1], self.num_partitions) == self.weight.shape[-1]
            if is_grad_enabled():
                input_ = split_forward_gather_backward(input_, dim=-1, process_group=self.process_group)
            else:
                input_ = _split_last_dim(input_, self.process_group)

        if self.stream_chunk_num > 1 and not is_grad_enabled():
            if self.training:
                raise RuntimeError("use stream_chunk_num=1 in Linear1D_Row for training!")
            output_parallel_list = [None for _ in range(self.stream_chunk_num)]
            handle_list = []
            for i in range(self.stream_chunk_num):
                output_parallel_list[i] = F.linear(input_, self.weight_list[i])
                handle = torch.distributed.all_reduce(output_parallel_list[i], group=self.process_group,
                                                      async_op=True)
                handle_list.append(handle)
            for handle in handle_list:
                handle.wait()
            output = torch.cat(output_parallel_list, dim=-1)
        else:
            output_parallel = F.linear(input_, self.weight)
            output = reduce_forward(output_parallel, self.process_group)

        if not self.skip_bias_add:
            if self.bias is not None:
                output = output + self.bias
            return output
        return output, self.bias
