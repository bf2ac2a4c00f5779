# adapted from volcengine/verl verl/utils/ulysses.py
from .factory import build_overlap_predicate, all_to_all_4d
from .attention import UlyssesAttention
