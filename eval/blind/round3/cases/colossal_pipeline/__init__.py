# Modelled on colossalai/pipeline/ (ColossalAI v0.3.6-0.4.x): p2p.py and schedule/one_f_one_b.py.
from .p2p import PipelineP2PCommunication
from .one_f_one_b import OneForwardOneBackwardSchedule

__all__ = ["PipelineP2PCommunication", "OneForwardOneBackwardSchedule"]
