# adapted from sgl-project/sglang python/sglang/srt/layers/logits_processor.py
from .logits_metadata import LogitsMetadata
from .logits_processor import LogitsProcessor, LogitsProcessorOutput

__all__ = ["LogitsMetadata", "LogitsProcessor", "LogitsProcessorOutput"]
