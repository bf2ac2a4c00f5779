# adapted from microsoft/DeepSpeed deepspeed/runtime/zero/__init__.py
# Copyright (c) Microsoft Corporation.
# SPDX-License-Identifier: Apache-2.0

# DeepSpeed Team

from .parameter_offload import DeepSpeedZeRoOffload
from .partitioned_param_coordinator import PartitionedParameterCoordinator

__all__ = ["DeepSpeedZeRoOffload", "PartitionedParameterCoordinator"]
