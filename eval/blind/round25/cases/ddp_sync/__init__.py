# adapted from Ace1928/eidosian_forge archive_forge/code/func__delayed_all_reduce_hook.py
from .module import DistributedDataParallel
