import torch.distributed as dist


def send_activation(tensor, dst, group, meta):
    if meta.is_train:
        return dist.isend(tensor.contiguous(), dst=dst, group=group)
    dist.send(tensor.contiguous(), dst=dst, group=group)
    return None


def recv_activation(buffer, src, group):
    dist.recv(buffer, src=src, group=group)
    return buffer
