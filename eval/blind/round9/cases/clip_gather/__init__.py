from .loss import ClipLoss
from .operations import gather_features

__all__ = ["ClipLoss", "gather_features"]
