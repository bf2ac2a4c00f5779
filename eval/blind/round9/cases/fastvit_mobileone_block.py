from typing import Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class SEBlock(nn.Module):
    def __init__(self, in_channels: int, rd_ratio: float = 0.0625) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(in_channels, int(in_channels * rd_ratio), kernel_size=1, bias=True)
        self.expand = nn.Conv2d(int(in_channels * rd_ratio), in_channels, kernel_size=1, bias=True)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        b, c, h, w = inputs.size()
        x = F.avg_pool2d(inputs, kernel_size=[h, w])
        x = torch.sigmoid(self.expand(F.relu(self.reduce(x))))
        return inputs * x.view(-1, c, 1, 1)


class MobileOneBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, groups: int = 1, inference_mode: bool = False,
                 use_se: bool = False, num_conv_branches: int = 1, drop_rate: float = 0.0) -> None:
        super().__init__()
        self.inference_mode = inference_mode
        self.groups = groups
        self.stride = stride
        self.padding = padding
        self.kernel_size = kernel_size
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.num_conv_branches = num_conv_branches
        self.drop_rate = drop_rate
        self.se = SEBlock(out_channels) if use_se else nn.Identity()
        self.activation = nn.GELU()
        if inference_mode:
            self.reparam_conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                                          padding=padding, groups=groups, bias=True)
        else:
            self.rbr_skip = (nn.BatchNorm2d(in_channels)
                             if out_channels == in_channels and stride == 1 else None)
            self.rbr_conv = nn.ModuleList([
                self._conv_bn(kernel_size=kernel_size, padding=padding)
                for _ in range(self.num_conv_branches)
            ])
            self.rbr_scale = self._conv_bn(kernel_size=1, padding=0) if kernel_size > 1 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inference_mode:
            return self.activation(self.se(self.reparam_conv(x)))
        identity_out = self.rbr_skip(x) if self.rbr_skip is not None else 0
        scale_out = self.rbr_scale(x) if self.rbr_scale is not None else 0
        out = scale_out + identity_out
        for ix in range(self.num_conv_branches):
            out = out + self.rbr_conv[ix](x)
        if self.training and self.drop_rate > 0.0:
            out = F.dropout(out, p=self.drop_rate, training=self.training)
        return self.activation(self.se(out))

    def reparameterize(self) -> None:
        if self.inference_mode:
            return
        kernel, bias = self._get_kernel_bias()
        self.reparam_conv = nn.Conv2d(self.in_channels, self.out_channels, self.kernel_size,
                                      stride=self.stride, padding=self.padding,
                                      groups=self.groups, bias=True)
        self.reparam_conv.weight.data = kernel
        self.reparam_conv.bias.data = bias
        for para in self.parameters():
            para.detach_()
        del self.rbr_conv
        del self.rbr_scale
        if hasattr(self, "rbr_skip"):
            del self.rbr_skip
        self.inference_mode = True

    def _get_kernel_bias(self) -> Tuple[torch.Tensor, torch.Tensor]:
        kernel = 0
        bias = 0
        for branch in self.rbr_conv:
            k, b = self._fuse_bn_tensor(branch)
            kernel = kernel + k
            bias = bias + b
        return kernel, bias

    def _fuse_bn_tensor(self, branch) -> Tuple[torch.Tensor, torch.Tensor]:
        kernel = branch.conv.weight
        bn = branch.bn
        std = (bn.running_var + bn.eps).sqrt()
        t = (bn.weight / std).reshape(-1, 1, 1, 1)
        return kernel * t, bn.bias - bn.running_mean * bn.weight / std

    def _conv_bn(self, kernel_size: int, padding: int) -> nn.Sequential:
        mod = nn.Sequential()
        mod.add_module("conv", nn.Conv2d(self.in_channels, self.out_channels, kernel_size,
                                         stride=self.stride, padding=padding,
                                         groups=self.groups, bias=False))
        mod.add_module("bn", nn.BatchNorm2d(self.out_channels))
        return mod


def maybe_freeze_for_export(model: nn.Module, x: torch.Tensor) -> nn.Module:
    if not x.requires_grad and not model.training:
        for module in model.modules():
            if hasattr(module, "reparameterize"):
                module.reparameterize()
    return model
