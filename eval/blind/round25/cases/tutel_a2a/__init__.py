# adapted from microsoft/tutel tutel/impls/communicate.py
from .state import grad_mode_scope
from .communicate import all_to_all, a2a_ffn_overlap_forward
