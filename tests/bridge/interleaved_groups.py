"""Which steps Megatron-Core's pipeline schedules refuse for their microbatch groups.

Input (stdin): a JSON list of cases [PP, VP or null, microbatch_group_size_per_vp_stage or null,
microbatches]. Output (stdout): a JSON list, one object per case: the schedule
`get_forward_backward_func` (megatron/core/pipeline_parallel/schedules.py) picks for PP and VP,
the group `ModelParallelConfig.__post_init__` leaves (PP when unset), and, for the interleaved
schedule, whether `forward_backward_pipelining_with_interleaving` accepts the step or raises
(the exception's class). The interleaved function is run for real with stand-ins for what it
needs from a running job (a communicator and process groups reporting the sizes, a model chunk
holding the config, `torch.zeros` on the CPU) and stopped where it goes on to count the warm-up
microbatches (`get_pp_rank_microbatches`), after its checks of the groups. The plan's rule
(`resolve::layout::microbatch_groups_refusal`) is held to this by tests/it/pipeline_split.rs.

    python tests/bridge/interleaved_groups.py < cases.json
"""

import json
import sys
from types import SimpleNamespace


class Reached(Exception):
    """The schedule got past its checks."""


def run_case(pp, vp, group, microbatches):
    import torch
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.pipeline_parallel import schedules

    cfg = ModelParallelConfig(
        pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vp,
        microbatch_group_size_per_vp_stage=group,
        pipeline_dtype=torch.bfloat16,
    )
    row = {"group": cfg.microbatch_group_size_per_vp_stage}
    picked = schedules.get_forward_backward_func(pp_size=pp, vp_size=vp)
    row["schedule"] = picked.__name__
    if picked is not schedules.forward_backward_pipelining_with_interleaving:
        return row
    cfg.hidden_size = 8
    chunk = torch.nn.Module()
    chunk.config = cfg
    chunk.model_type = None
    single = SimpleNamespace(size=lambda: 1, rank=lambda: 0)
    p2p = SimpleNamespace(
        config=cfg,
        pp_group=SimpleNamespace(size=lambda: pp, rank=lambda: 0),
        virtual_pipeline_model_parallel_size=vp,
    )

    def reached(*args, **kwargs):
        raise Reached()

    zeros, counter = torch.zeros, schedules.get_pp_rank_microbatches
    torch.zeros = lambda *a, device=None, **k: zeros(*a, **k)
    schedules.get_pp_rank_microbatches = reached
    try:
        schedules.forward_backward_pipelining_with_interleaving(
            forward_step_func=None,
            data_iterator=[None] * vp,
            model=[chunk] * vp,
            num_microbatches=microbatches,
            seq_length=4,
            micro_batch_size=1,
            p2p_communicator=p2p,
            pg_collection=SimpleNamespace(tp=single, cp=single),
        )
    except Reached:
        row["accepted"] = True
    except (ValueError, RuntimeError) as e:
        row.update(accepted=False, error=type(e).__name__)
    finally:
        torch.zeros, schedules.get_pp_rank_microbatches = zeros, counter
    if "accepted" not in row:
        raise AssertionError("the schedule ran a step")
    return row


def main() -> int:
    import logging
    import warnings

    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    cases = json.load(sys.stdin)
    json.dump([run_case(*c) for c in cases], sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
