# adapted from volcengine/verl verl/workers/actor/base.py
"""
The base class for Actor
"""

from abc import ABC, abstractmethod

import torch

__all__ = ["BasePPOActor", "DataParallelPPOActor"]


class BasePPOActor(ABC):
    def __init__(self, config):
        """The base class for PPO actor"""
        super().__init__()
        self.config = config

    @abstractmethod
    def compute_log_prob(self, data) -> torch.Tensor:
        """Compute logits given a batch of data."""
        pass

    @abstractmethod
    def update_policy(self, data) -> dict:
        """Update the policy with an iterator of DataProto"""
        pass


from .actor import DataParallelPPOActor  # noqa: E402
