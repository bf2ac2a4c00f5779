# v2 carriers the engine gets wrong today (kept out of tests/fixtures so the suite stays
# green). Same format: lines ending in "# GG001" must be reported, and no other line.
import torch
import torch.distributed as dist
from dataclasses import dataclass
from typing import NamedTuple


# -- issue 11, 1: "dataclass and NamedTuple fields" ------------------------------------

@dataclass
class ReduceOptions:
    use_async: bool
    will_record: bool


def dataclass_field(x, use_async):
    opts = ReduceOptions(use_async=use_async, will_record=torch.is_grad_enabled())
    return _dataclass_use(x, opts)


def _dataclass_use(x, opts):
    use_async = opts.use_async and opts.will_record  # GG001
    return dist.all_reduce(x, async_op=use_async)


class GatherSpec(NamedTuple):
    process_group: object
    needs_backward: bool


def namedtuple_positional(x, out, process_group):
    spec = GatherSpec(process_group, torch.is_grad_enabled())
    return _namedtuple_use(x, out, spec)


def _namedtuple_use(x, out, spec):
    if spec.needs_backward:  # GG001
        dist.all_gather_into_tensor(out, x, group=spec.process_group)
    return out


class ScatterSpec(NamedTuple):
    pg: object
    keep_graph: bool


def namedtuple_keyword(x, out, pg):
    spec = ScatterSpec(pg=pg, keep_graph=torch.is_grad_enabled())
    return _namedtuple_kw_use(x, out, spec)


def _namedtuple_kw_use(x, out, spec):
    return dist.reduce_scatter_tensor(out, x, group=spec.pg, async_op=spec.keep_graph)  # GG001


# -- issue 11, 1: "kwargs.get(...)" and "helper parameters through any number of hops":
# one decision, one finding (at the read in the decision); the engine adds a second
# finding at the call that only passes grad mode on

def _kwargs_reduce(x, use_async, **kwargs):
    use_async = use_async and kwargs.get("record", False)  # GG001
    return dist.all_reduce(x, async_op=use_async)


def kwargs_caller(x, use_async):
    return _kwargs_reduce(x, use_async, record=torch.is_grad_enabled())


def _hop3(x, sync_group, needs_backward):
    if needs_backward:  # GG001
        dist.all_reduce(x, group=sync_group)
    return x


def _hop2(x, sync_group, will_backward):
    return _hop3(x, sync_group, needs_backward=will_backward)


def hop1(x, sync_group):
    return _hop2(x, sync_group, torch.is_grad_enabled())


# -- issue 11, 1: "reaching definitions, so a later `g = cfg.grad_enabled` ends it" -----

def local_reassigned(x, use_async, cfg):
    g = torch.is_grad_enabled()
    print("grad", g)
    g = cfg.grad_enabled
    use_async = use_async and g
    return dist.all_reduce(x, async_op=use_async)


# -- issue 11, 1: "attributes (`self.x`, also set in `__init__` from an argument that
# receives grad mode)": attributes belong to their class, not to their name

class GradSync:
    def __init__(self, sync_group, will_sync):
        self.sync_group = sync_group
        self.will_sync = will_sync

    def run(self, x):
        if self.will_sync:  # GG001
            dist.all_reduce(x, group=self.sync_group)
        return x


def build_grad_sync(sync_group):
    return GradSync(sync_group, torch.is_grad_enabled())


class ConfigSync:
    # another class with an attribute of the same name, from a config flag
    def __init__(self, sync_group, will_sync):
        self.sync_group = sync_group
        self.will_sync = will_sync


def build_config_sync(sync_group, cfg):
    return ConfigSync(sync_group, cfg.sync_each_step)


class Recorder:
    def forward(self, x):
        self.recording = torch.is_grad_enabled()
        return x


@dataclass
class BucketOptions:
    overlap_comm: bool
    recording: bool


def config_field_same_name(x, overlap_comm, cfg):
    # `recording` here is a config flag; only Recorder.recording is grad mode
    opts = BucketOptions(overlap_comm=overlap_comm, recording=cfg.recording)
    return _bucket_use(x, opts)


def _bucket_use(x, opts):
    overlap_comm = opts.overlap_comm and opts.recording
    return dist.all_reduce(x, async_op=overlap_comm)
