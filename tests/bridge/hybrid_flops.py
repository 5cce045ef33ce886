"""Megatron-Bridge's own model-FLOP count for hybrid models, per token, for the estimator's tests.

Builds each named recipe function's config with Bridge's code (as `probe.py` does), gives the
model the sequence length of its dataset (as Bridge's runner does) and the vocabulary size its tokenizer would (the estimator's `hybrid_shapes.json` value, since
Bridge sets it from the tokenizer at run time), finalizes the provider (which merges the MTP
pattern into the layer pattern) and calls Bridge's
`megatron.bridge.training.utils.flop_utils.num_floating_point_operations(cfg, batch_size=1)`.

Usage: PY tests/bridge/hybrid_flops.py FUNCTION... ; prints {"FUNCTION": flops_per_token, ...}.
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import probe  # noqa: E402
from megatron.bridge.training.utils.flop_utils import num_floating_point_operations  # noqa: E402

shapes = json.loads((HERE.parent.parent / "crates/ovlaunch-core/src/config/hybrid_shapes.json").read_text())
out = {}
for name in sys.argv[1:]:
    cfg = probe.load(name, probe.benchmark_metadata(name))
    shape = shapes["shapes"][shapes["functions"][name]]
    if cfg.model.vocab_size is None:
        cfg.model.vocab_size = shape["vocab_size"]
    cfg.model.tensor_model_parallel_size = 1
    # The runner's step: model.seq_length follows dataset.seq_length (probe.py, step 10).
    cfg.model.seq_length = cfg.dataset.seq_length
    cfg.model.finalize()
    out[name] = num_floating_point_operations(cfg, batch_size=1) / cfg.model.seq_length
print(json.dumps(out))
