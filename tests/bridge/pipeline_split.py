"""What Megatron-Core accepts and builds for a pipeline split without a layout text.

Feeds a grid of splits (num_layers, PP, VP, num_layers_in_first/last_pipeline_stage,
account_for_embedding/loss_in_pipeline_split) to Megatron-Core's own code in the pinned Bridge
venv: `TransformerConfig.__post_init__` (megatron/core/transformer/transformer_config.py), then
`get_num_layers_to_build` (megatron/core/transformer/transformer_block.py) for every pipeline
rank and virtual stage; and, for a hybrid Mamba-Transformer's layer pattern without `|`,
`select_pipeline_segment` (megatron/core/models/hybrid/hybrid_layer_allocation.py) for every
rank. Writes one JSON row per case: whether Megatron-Core accepts it, where it refused (and its
message), and the layers each (rank, virtual stage) builds. ovlaunch's rules
(crates/ovlaunch-core/src/resolve/pipeline_split.rs) are held to this table by its unit tests,
and the table to Megatron-Core by tests/it/pipeline_split.rs (which reruns this script).

    python tests/bridge/pipeline_split.py > tests/bridge/pipeline_split.json   # write
    python tests/bridge/pipeline_split.py --check                              # compare only
"""

import itertools
import json
import sys
from pathlib import Path
from types import SimpleNamespace

TABLE = Path(__file__).with_name("pipeline_split.json")


def grid():
    """The cases: every rule's accepted and refused sides, and the splits Bridge's recipes use."""
    cases = []
    for layers, pp, vp, first, last in itertools.product(
        (4, 12, 13, 45),
        (1, 2, 3, 4),
        (None, 2),
        (None, 0, 1, 2, 12),
        (None, 0, 3, 4, 9),
    ):
        cases.append(dict(layers=layers, pp=pp, vp=vp, first=first, last=last, embedding=False, loss=False))
    for layers, pp, vp, emb, loss in itertools.product((6, 14, 30, 126), (1, 2, 8, 16), (None, 2, 4), (False, True), (False, True)):
        cases.append(dict(layers=layers, pp=pp, vp=vp, first=None, last=None, embedding=emb, loss=loss))
    for first, last, emb, loss in ((4, None, True, False), (None, 4, False, True), (2, 2, True, True)):
        cases.append(dict(layers=12, pp=4, vp=None, first=first, last=last, embedding=emb, loss=loss))
    # Bridge's recipes: Step 3.7 (45 layers, PP4, 12/9), Nemotron 3 Super 32K (88, PP8, last 4),
    # GLM-5 on GB200 (78, PP6, 14/16); and the stand-in depth its recipe generator tried (61).
    for layers, pp, first, last in ((45, 4, 12, 9), (88, 8, None, 4), (78, 6, 14, 16), (61, 6, 14, 16), (64, 8, None, 4)):
        cases.append(dict(layers=layers, pp=pp, vp=None, first=first, last=last, embedding=False, loss=False))
    # A virtual pipeline needs PP > 1 (parallel_state refuses it before any layer is built;
    # ovlaunch's `resolve::layout` refuses it first): no such case here.
    return [c for c in cases if c["pp"] > 1 or c["vp"] is None]


def run_case(c):
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_config import TransformerConfig

    row = dict(c)
    try:
        cfg = TransformerConfig(
            num_layers=c["layers"],
            hidden_size=64,
            num_attention_heads=4,
            pipeline_model_parallel_size=c["pp"],
            virtual_pipeline_model_parallel_size=c["vp"],
            num_layers_in_first_pipeline_stage=c["first"],
            num_layers_in_last_pipeline_stage=c["last"],
            account_for_embedding_in_pipeline_split=c["embedding"],
            account_for_loss_in_pipeline_split=c["loss"],
            pipeline_dtype=__import__("torch").bfloat16,
        )
    except (ValueError, AssertionError) as e:
        return {**row, "accepted": False, "refused_by": "post_init", "error": str(e).splitlines()[0][:100]}
    vps = range(c["vp"]) if c["vp"] is not None and c["pp"] > 1 else [None]
    try:
        counts = [[get_num_layers_to_build(cfg, vp_stage=v, pp_rank=r) for v in vps] for r in range(c["pp"])]
    except (ValueError, AssertionError) as e:
        return {**row, "accepted": False, "refused_by": "build", "error": str(e).splitlines()[0][:100]}
    row.update(accepted=True, counts=counts)
    if c["vp"] is None and not (c["embedding"] or c["loss"]):
        row["hybrid"] = hybrid_cut(c)
    return row


def hybrid_cut(c):
    """Layers per rank that select_pipeline_segment gives a pattern of `layers` layers without
    `|` (None where it refuses), every rank asked as its own pp group."""
    import torch.distributed as dist
    from megatron.core.models.hybrid import hybrid_layer_allocation as h

    get_rank, get_size, log = dist.get_rank, dist.get_world_size, h.log_on_each_pipeline_stage
    dist.get_rank = lambda g=None: g.rank
    dist.get_world_size = lambda g=None: g.size
    h.log_on_each_pipeline_stage = lambda *a, **k: None
    try:
        out = []
        for r in range(c["pp"]):
            group = SimpleNamespace(rank=r, size=c["pp"])
            layers, offset = h.select_pipeline_segment(
                "M" * c["layers"], group, None, first_stage_layers=c["first"], last_stage_layers=c["last"])
            out.append(len(layers))
        return out
    except ValueError:
        return None
    finally:
        dist.get_rank, dist.get_world_size, h.log_on_each_pipeline_stage = get_rank, get_size, log


def main() -> int:
    import logging
    logging.disable(logging.WARNING)
    rows = [run_case(c) for c in grid()]
    text = "[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n"
    if "--check" in sys.argv[1:]:
        if TABLE.read_text() != text:
            print(f"{TABLE.name} differs from what Megatron-Core gives: regenerate it", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
