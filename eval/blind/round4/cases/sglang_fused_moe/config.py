from typing import NamedTuple, Optional


class MoeRunnerConfig(NamedTuple):
    activation: str = "silu"
    inplace: bool = True
    no_combine: bool = False
    routed_scaling_factor: Optional[float] = None
    autograd_possible: bool = False
