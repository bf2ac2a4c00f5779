from .actor import DataParallelPPOActor
from .meta import MicroBatchMeta, build_meta

__all__ = ["DataParallelPPOActor", "MicroBatchMeta", "build_meta"]
