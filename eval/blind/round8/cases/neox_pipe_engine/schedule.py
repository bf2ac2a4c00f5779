from deepspeed.runtime.pipe.schedule import InferenceSchedule, TrainSchedule


def make_schedule(micro_batches, stages, stage_id, meta):
    sched_cls = TrainSchedule if meta.is_train else InferenceSchedule
    return sched_cls(micro_batches=micro_batches, stages=stages, stage_id=stage_id)
