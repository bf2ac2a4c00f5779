from .one_f_one_b import OneForwardOneBackwardSchedule
from .p2p import PipelineP2PCommunication
