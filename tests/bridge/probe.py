"""Build Megatron-Bridge ConfigContainers the way Bridge's runner does, with Bridge's own code.

Input (stdin): a JSON list of cases {"id", "argv", "world_size", "gpu", "env"}; `argv` is the
trainer argv taken from a script ovlaunch rendered (`python BRIDGE/scripts/training/run_recipe.py
--recipe NAME [--deterministic] KEY=VALUE...`). Output (stdout): a JSON object id -> {"ok": true,
"config": {...}, "classes": {section: "module.Class"}, "env": {...}, "recipe_env": {...}} or
{"ok": false, "error": "..."}; `env` is the trainer process's environment, `recipe_env` the recipe
function's own `env_vars`, typed, before any override.

The runner, `scripts/training/run_recipe.py` with `recipe_runner.py`, `recipe_metadata.py` and
`scripts/common/benchmark_parallelism.py`, lives in Bridge's repository, not in its package, so
its steps are reproduced here as facts (Megatron-Bridge r0.6.0 branch); everything they call is
the installed package's own code:

1. argv: `--recipe NAME`, `--deterministic`; any other word starting with `-` is refused
   ("Unknown option", exit 2), every other word must be KEY=VALUE (argparse, allow_abbrev=False).
2. a name matching `_<task>_<N>gpu_<hw>_<precision>[_variant]_config` and exported by
   `megatron.bridge.perf_recipes.<family>` is a benchmark recipe (family by name prefix);
   otherwise the function comes from `megatron.bridge.recipes`. A benchmark SFT or PEFT function
   whose forward step is the text one (`recipe_metadata.recipe_step`: no multimodal name prefix)
   then holds the mock pretraining data instead of its own dataset
   (`run_recipe._apply_benchmark_dataset_defaults`: `build_dataset_config(cfg, "mock")`, the
   function's `num_workers`, `pin_memory`, `persistent_workers`, split `99990,8,2`).
3. `--deterministic` -> `megatron.bridge.recipes.utils.determinism_utils.apply_determinism_overrides`.
4. the canonical topology and global batch are read before the overrides.
5. the overrides -> `omegaconf_utils.process_config_with_overrides` (Hydra grammar).
6. a PP or VP override without a layout override rebuilds the layout with the model's
   `_pipeline_model_parallel_layout_builder`, when it has one.
7. benchmark runtime default: precision `bf16` in the name, optimizer `adam` and no
   `optimizer`/`optimizer.use_precision_aware_optimizer` override -> precision-aware optimizer on.
8. weak scaling: unless `train.global_batch_size` (or `train`) was overridden, when the data
   parallel size at the job's world size differs from the canonical one, GBS * DP / DP_canonical
   (an integer, else an error).
9. environment: `megatron.bridge.training.config.apply_environment_variables` (the recipe's
   `env_vars` applied with setdefault: the launcher's values win); with `ddp.nccl_ub` also
   NCCL_NVLS_ENABLE=1 and NCCL_CTA_POLICY=1 by setdefault; a benchmark recipe then re-executes
   itself with that environment (so the trainer process sees exactly it).
10. the runner's syncs after the overrides (`recipe_runner.py`, in its order): with the mode its
    name gives (`infer_recipe_mode`; every mode but pretraining is fine-tuning), a fine-tuning
    dataset (a class with `enable_offline_packing` or `enable_in_batch_packing`) and the model's
    or the evaluation's context parallel size above 1, `model.calculate_per_token_loss` on and
    `ddp.average_in_collective` off (`sync_finetuning_cp_invariants`); with offline packing, the
    packing specs made where there are none, their `packed_sequence_size` the dataset's
    `seq_length` and their `pad_seq_to_mult` the lcm of their own (or 1), 2 * CP per CP above 1
    and TP * CP per CP with sequence parallelism and TP above 1 (`sync_offline_packing_alignment`);
    then `model.seq_length` follows `dataset.seq_length` (`sync_model_dataset_sequence_length`).
11. `megatron.bridge.training.config.runtime_config_update` with WORLD_SIZE and RANK=0 (the
    runner's dry run does the same; training calls it first thing).
12. the learning-rate scheduler training's setup builds next (`training/optim.py`
    `_get_scheduler`: Megatron-Core's `OptimizerParamScheduler` from the optimizer and scheduler
    configs), over a stand-in optimizer of one parameter group (no model is built).

Stand-ins: see stubs/ovlaunch_stubs.py (TransformerEngine and modelopt import surface, torch's
CUDA device queries). Hugging Face configs come from hf/ (public config.json copies, each with
its source in a SOURCE file beside it, and the commit a recipe pins as `pinned-revision:`; a
Diffusers checkpoint's component config sits in its subfolder, `transformer/config.json`)
through an offline hub cache; nothing reaches a hub. A case may carry `hf_config` ({"hf",
"revision", "configs"}): for a recipe function whose checkpoint config hf/ does not hold, those
configs are put at the checkpoint's name in turn until Bridge builds the job (the one the job was
planned with, `--hf-config`, or stand-ins of other architectures, each given the depth the
function's own pipeline split states: `standin_depth`). Kimi K2's config.json names the hub repository's own
configuration code (`auto_map`, loaded with trust_remote_code); its fixture answers that name with
a one-line module that re-exports transformers' DeepSeek-V3 configuration class (the architecture
the config declares), so no upstream code is shipped.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fixture_files(fixture: Path) -> list[Path]:
    """A fixture's files the offline hub serves, relative to its folder: its config.json and the
    configuration module it names, or, for a Diffusers checkpoint (one folder per pipeline
    component), each component's config.json in its subfolder (`transformer/config.json`, read
    with `subfolder="transformer"`)."""
    return sorted(f.relative_to(fixture) for f in fixture.rglob("*")
                  if f.name == "config.json" or (f.suffix == ".py" and f.parent == fixture))


def _offline_hub() -> None:
    """An offline Hugging Face hub cache holding only the shipped config.json fixtures."""
    cache = Path(tempfile.mkdtemp(prefix="ovlaunch-hf-"))
    for fixture in sorted(d for d in (HERE / "hf").glob("*/*") if d.is_dir()):
        org, name = fixture.parent.name, fixture.name
        repo = cache / f"models--{org}--{name}"
        # "main" plus the commit a recipe pins, if it pins one (`pinned-revision:` in the
        # SOURCE file beside the fixture)
        revisions = ["0" * 40]
        source = fixture / "SOURCE"
        for line in source.read_text().splitlines() if source.exists() else []:
            if line.startswith("pinned-revision:"):
                revisions.append(line.split(":", 1)[1].split()[0])
        for rev in revisions:
            snap = repo / "snapshots" / rev
            for f in fixture_files(fixture):
                (snap / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(fixture / f, snap / f)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0" * 40)
    os.environ["HF_HUB_CACHE"] = str(cache)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"


_offline_hub()
sys.path.insert(0, str(HERE / "stubs"))
import ovlaunch_stubs  # noqa: E402

ovlaunch_stubs.install()

import logging  # noqa: E402

logging.disable(logging.WARNING)
import warnings  # noqa: E402

warnings.filterwarnings("ignore")

import importlib  # noqa: E402

# A checkpoint config not in the offline cache fails at once: Bridge's loader retries a failed
# hub read with exponential backoff (seconds per function), which no offline read can cure.
from megatron.bridge.models.hf_pretrained import safe_config_loader  # noqa: E402

safe_config_loader.safe_load_config_with_retry.__defaults__ = (False, 0, 0.0)

import torch  # noqa: E402

# runner fact: recipe_metadata.BENCHMARK_RECIPE_PATTERN and BENCHMARK_RECIPE_FAMILY_PREFIXES
BENCHMARK_NAME = re.compile(
    r"_(?P<task>pretrain|sft|peft)_(?P<num_gpus>[1-9][0-9]*)gpu_(?P<hardware>[a-z0-9]+)_"
    r"(?P<precision>bf16|fp8cs|fp8mx|fp8sc|nvfp4)(?:_[a-z0-9_]+)?_config$"
)
FAMILY_PREFIXES = (
    ("qwen3_vl_", "qwen_vl"),
    ("qwen35_vl_", "qwen_vl"),
    ("deepseek_", "deepseek"),
    ("gpt_oss_", "gpt_oss"),
    ("nemotron", "nemotronh"),
    ("llama", "llama"),
    ("qwen", "qwen"),
    ("kimi_", "kimi"),
    ("glm5", "glm_moe_dsa"),
    ("wan_", "wan"),
)


class Refused(Exception):
    """What the runner refuses before building anything (its argparse errors, exit 2)."""


def parse_argv(argv: list[str]) -> tuple[str, bool, list[str]]:
    words = list(argv)
    # the interpreter and the script path
    while words and not words[0].startswith("-"):
        if words[0].endswith("run_recipe.py"):
            words.pop(0)
            break
        words.pop(0)
    recipe, deterministic, overrides = None, False, []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--recipe":
            recipe = words[i + 1]
            i += 2
            continue
        if w.startswith("--recipe="):
            recipe = w.split("=", 1)[1]
        elif w == "--deterministic":
            deterministic = True
        elif w.startswith("-"):
            raise Refused(f"Unknown option: {w}")
        elif "=" not in w:
            raise Refused(f"Expected override in KEY=VALUE form, got {w!r}")
        else:
            overrides.append(w)
        i += 1
    if recipe is None:
        raise Refused("one of the arguments --model --recipe is required")
    return recipe, deterministic, overrides


def benchmark_metadata(name: str):
    m = BENCHMARK_NAME.search(name)
    if m is None:
        return None
    family = next((f for p, f in FAMILY_PREFIXES if name.startswith(p)), None)
    if family is None:
        return None
    module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
    if not callable(getattr(module, name, None)):
        return None
    return dict(m.groupdict(), family=family, module=module, name=name)


# runner fact: recipe_metadata.RECIPE_FORWARD_STEP_PREFIXES, the names whose forward step is
# not a text one (every other name's is `llm_step`: recipe_metadata.recipe_step)
NON_TEXT_STEP_PREFIXES = (
    "nemotron_nano_v2_vl_", "nemotron_omni_", "qwen2_audio_", "qwen3_omni_", "qwen3_vl_", "qwen35_vl_",
    "step37_", "gemma3_vl_", "gemma4_vl_", "glm_45v_", "kimi_k25_vl_", "ministral3_", "qwen25_vl_", "flux_",
    "wan_",
)
# runner fact: run_recipe._apply_benchmark_dataset_defaults, the split it gives the mock data and
# the fields it keeps from the function's own dataset
BENCHMARK_MOCK_SPLIT = "99990,8,2"
BENCHMARK_KEPT_DATA_FIELDS = ("num_workers", "pin_memory", "persistent_workers")


def benchmark_dataset_defaults(cfg, meta) -> None:
    """Step 2's load, then `run_recipe._apply_benchmark_dataset_defaults` (the runner's script is
    not in the package: its rule restated): a benchmark SFT or PEFT function whose forward step
    is the text one runs on the mock pretraining data Bridge's `build_dataset_config(cfg, "mock")`
    builds, keeping the function's worker fields, with the runner's split."""
    if meta is None or meta["task"] not in ("sft", "peft") or meta["name"].startswith(NON_TEXT_STEP_PREFIXES):
        return
    from megatron.bridge.recipes.utils.dataset_utils import build_dataset_config

    source = getattr(cfg, "dataset", None)
    mock = build_dataset_config(cfg, "mock")
    for f in BENCHMARK_KEPT_DATA_FIELDS:
        if source is not None and hasattr(source, f) and hasattr(mock, f):
            setattr(mock, f, getattr(source, f))
    if hasattr(mock, "split"):
        mock.split = BENCHMARK_MOCK_SPLIT
    cfg.dataset = mock


def load(name: str, meta):
    if meta is not None:
        cfg = getattr(meta["module"], name)()
        benchmark_dataset_defaults(cfg, meta)
        return cfg
    import megatron.bridge.recipes as recipes

    fn = getattr(recipes, name, None)
    if fn is None:
        raise Refused(f"Recipe '{name}' not found in megatron.bridge.recipes or megatron.bridge.perf_recipes.")
    return fn()


def explicit(overrides: list[str], field: str) -> bool:
    parent = field.split(".", 1)[0]
    return any(o.lstrip("+~").split("=", 1)[0] in {field, parent} for o in overrides)


def dp_size(world: int, model) -> int:
    from dataclasses import dataclass  # noqa: F401

    tp = model.tensor_model_parallel_size
    pp = model.pipeline_model_parallel_size
    cp = model.context_parallel_size
    ep = getattr(model, "expert_model_parallel_size", 1) or 1
    etp = getattr(model, "expert_tensor_parallel_size", None) or tp
    dense = tp * pp * cp
    if world % dense:
        raise ValueError(f"Requested {world} GPUs is not divisible by TP * PP * CP ({tp} * {pp} * {cp} = {dense}).")
    if world % (etp * ep * pp):
        raise ValueError(f"The expert-parallel grid is incompatible with requested {world} GPUs")
    return world // dense


def build(case: dict, live: bool = False, bootstrap=None):
    """Bridge's config for the case's argv. `live`: in this process's own environment (the
    trainer's, runner_env.py), which the env step changes and nothing restores, and the world
    size the launcher gave it; `bootstrap` is called right after the env step (the runner's
    re-execution point)."""
    from megatron.bridge.training.config import apply_environment_variables, runtime_config_update
    from megatron.bridge.training.utils.omegaconf_utils import process_config_with_overrides

    ovlaunch_stubs.fake_gpu(case["gpu"])
    name, deterministic, overrides = parse_argv(case["argv"])
    meta = benchmark_metadata(name)
    cfg = load(name, meta)
    # the recipe function's own env, typed, before any override (what ovlaunch reconstructs)
    recipe_env = dict(cfg.env_vars or {})
    if deterministic:
        from megatron.bridge.recipes.utils.determinism_utils import apply_determinism_overrides

        apply_determinism_overrides(cfg)
    canonical_model = dataclasses.replace(cfg.model) if False else None  # noqa: F841
    canon = None
    if meta is not None:
        m = cfg.model
        canon = (
            int(meta["num_gpus"]),
            dp_size(int(meta["num_gpus"]), m),
            cfg.train.global_batch_size,
        )
    if overrides:
        cfg = process_config_with_overrides(cfg, cli_overrides=overrides)
    fields = {o.lstrip("+~").split("=", 1)[0] for o in overrides}
    if fields & {"model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size"} and (
        "model.pipeline_model_parallel_layout" not in fields
    ):
        builder = getattr(cfg.model, "_pipeline_model_parallel_layout_builder", None)
        if builder is not None:
            cfg.model.pipeline_model_parallel_layout = builder(
                cfg.model.pipeline_model_parallel_size, cfg.model.virtual_pipeline_model_parallel_size
            )
    world = int(case["world_size"])
    if meta is not None:
        if (
            not explicit(overrides, "optimizer.use_precision_aware_optimizer")
            and meta["precision"] == "bf16"
            and getattr(cfg.optimizer, "optimizer", None) == "adam"
        ):
            cfg.optimizer.use_precision_aware_optimizer = True
        _, dp0, gbs0 = canon
        dp = dp_size(world, cfg.model)
        if not explicit(overrides, "train.global_batch_size") and dp != dp0:
            if (gbs0 * dp) % dp0:
                raise ValueError(
                    f"Weak scaling GBS {gbs0} from DP {dp0} to DP {dp} does not produce an integer global batch size."
                )
            cfg.train.global_batch_size = gbs0 * dp // dp0
    # the trainer process's environment: the job's, then the recipe's env_vars by setdefault
    # (the runner re-executes itself with it, so training runs under exactly this)
    saved = dict(os.environ)
    try:
        if not live:
            os.environ.clear()
            os.environ.update(case.get("env", {}))
        apply_environment_variables(cfg)
        if getattr(cfg.ddp, "nccl_ub", False):
            os.environ.setdefault("NCCL_NVLS_ENABLE", "1")
            os.environ.setdefault("NCCL_CTA_POLICY", "1")
        if bootstrap is not None:
            bootstrap(meta)
        env = dict(os.environ)
        finetuning_cp_invariants(cfg, name)
        offline_packing_alignment(cfg)
        ds_len = getattr(cfg.dataset, "seq_length", None) if cfg.dataset is not None else None
        if ds_len is not None and cfg.model.seq_length != ds_len:
            cfg.model.seq_length = ds_len
        if not live:
            os.environ["WORLD_SIZE"] = str(world)
            os.environ["RANK"] = "0"
        runtime_config_update(cfg)
        schedule(cfg)
    finally:
        if not live:
            os.environ.clear()
            os.environ.update(saved)
    return cfg, env, recipe_env


# runner fact: recipe_metadata.infer_recipe_mode's words, in the order it looks for them, each
# with whether run_recipe._train_mode makes it the fine-tuning loop
MODE_WORDS = (("pretrain", False), ("sft", True), ("finetune", True), ("dora", True), ("peft", True), ("lora", True))


def finetuning(name: str) -> bool:
    """Whether the runner, given `--recipe name` and no `--mode`, runs the fine-tuning loop."""
    padded = f"_{name.lower().strip('_')}_"
    return next((ft for word, ft in MODE_WORDS if f"_{word}_" in padded), False)


def cp_sizes(cfg) -> set:
    """The context parallel sizes the runner's syncs read: the model's and the evaluation's."""
    sizes = {getattr(cfg.model, "context_parallel_size", 1)}
    eval_cp = getattr(getattr(cfg, "dist", None), "eval_context_parallel_size", None)
    if eval_cp is not None:
        sizes.add(eval_cp)
    return sizes


def finetuning_cp_invariants(cfg, name: str) -> None:
    """Step 10, `sync_finetuning_cp_invariants` (the runner's script is not in the package: its
    rule restated): a fine-tuning run on fine-tuning data with context parallelism computes the
    loss per token and does not average in the collective."""
    data = getattr(cfg, "dataset", None)
    if not finetuning(name) or not any(hasattr(data, f) for f in ("enable_offline_packing", "enable_in_batch_packing")):
        return
    if max(cp_sizes(cfg)) > 1:
        if hasattr(cfg.model, "calculate_per_token_loss"):
            cfg.model.calculate_per_token_loss = True
        if getattr(cfg, "ddp", None) is not None and hasattr(cfg.ddp, "average_in_collective"):
            cfg.ddp.average_in_collective = False


def offline_packing_alignment(cfg) -> None:
    """Step 10, `sync_offline_packing_alignment` (restated, as above): offline-packed samples
    sized to the dataset's length and padded to a multiple the parallel layout needs."""
    import math

    data = getattr(cfg, "dataset", None)
    if not getattr(data, "enable_offline_packing", False):
        return
    from megatron.bridge.data.packing import PackedSequenceSpecs

    specs = getattr(data, "offline_packing_specs", None)
    if specs is None:
        specs = PackedSequenceSpecs()
    elif isinstance(specs, dict):
        specs = PackedSequenceSpecs(**specs)
    data.offline_packing_specs = specs
    if getattr(data, "seq_length", None) is not None:
        specs.packed_sequence_size = data.seq_length
    tp = getattr(cfg.model, "tensor_model_parallel_size", 1)
    sp = bool(getattr(cfg.model, "sequence_parallel", False)) and tp > 1
    multiples = [specs.pad_seq_to_mult or 1]
    for cp in cp_sizes(cfg):
        multiples.append(2 * cp if cp > 1 else 1)
        multiples.append(tp * cp if sp else 1)
    specs.pad_seq_to_mult = math.lcm(*multiples)


def schedule(cfg) -> None:
    """Step 12: Bridge's own `_get_scheduler` on the finalized config (it raises what
    Megatron-Core's `OptimizerParamScheduler.__init__` asserts)."""
    from types import SimpleNamespace

    from megatron.bridge.training.optim import _get_scheduler

    group = {"params": [], "lr": 0.0, "weight_decay": 0.0}
    _get_scheduler(cfg.optimizer, cfg.scheduler, SimpleNamespace(param_groups=[group]))


def plain(v, depth=0):
    """A JSON form of a config value: dataclasses field by field, dtypes by name."""
    if depth > 6:
        return repr(v)
    if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
        return repr(v)  # JSON has no NaN or infinity
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return [plain(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x, depth + 1) for k, x in v.items()}
    if isinstance(v, Path):
        return str(v)
    if dataclasses.is_dataclass(v):
        out = {}
        for f in dataclasses.fields(v):
            try:
                out[f.name] = plain(getattr(v, f.name), depth + 1)
            except Exception:  # noqa: BLE001 - a property that needs a GPU
                out[f.name] = "<unreadable>"
        return out
    return repr(v)


SECTIONS = ("model", "train", "ddp", "optimizer", "comm_overlap", "mixed_precision", "scheduler", "dataset",
            "tokenizer", "checkpoint", "logger", "profiling", "ft", "peft", "validation", "dist", "rng",
            "rerun_state_machine", "straggler", "nvrx_straggler", "tensor_inspect", "inprocess_restart")


class HubConfig:
    """A case's `hf_config` ({"hf", "revision", "config"}): that config.json in the offline hub
    at the checkpoint's name (and the commit its function pins) while the case builds, for a
    recipe function whose checkpoint config ovlaunch does not ship."""

    def __init__(self, spec: dict):
        org, name = spec["hf"].split("/", 1)
        self.repo = Path(os.environ["HF_HUB_CACHE"]) / f"models--{org}--{name}"
        self.revisions = ["0" * 40] + ([spec["revision"]] if spec.get("revision") else [])
        self.config = Path(spec["config"])

    def __enter__(self):
        if self.repo.exists():
            raise RuntimeError(f"{self.repo.name}: a shipped fixture is in the offline hub already")
        for rev in self.revisions:
            (self.repo / "snapshots" / rev).mkdir(parents=True)
            shutil.copy(self.config, self.repo / "snapshots" / rev / "config.json")
        (self.repo / "refs").mkdir()
        (self.repo / "refs" / "main").write_text("0" * 40)
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.repo)
        return False


def layout_counts(layout) -> tuple[int, int]:
    """The decoder (`t`) and MTP (`m`) layers a `pipeline_model_parallel_layout` places, as
    Megatron-Core's `PipelineParallelLayerLayout` reads it (its string grammar, or per-stage
    lists of layer types)."""
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout

    stages = PipelineParallelLayerLayout.parse_str_to_list(layout) if isinstance(layout, str) else layout
    codes = [str(getattr(x, "name", x)) for stage in stages for x in stage]
    decoder = sum(c in ("t", "decoder") for c in codes)
    return decoder, sum(c in ("m", "mtp") for c in codes)


def standin_depth(model) -> dict:
    """The config.json keys a stand-in must carry so that the recipe function's own pipeline
    split fits it (a stand-in's depth is its own, not the checkpoint's; the function states the
    split): with a `pipeline_model_parallel_layout`, the decoder layers it places
    (`num_hidden_layers`) and its MTP layers (`num_nextn_predict_layers`); with
    `num_layers_in_first_pipeline_stage` / `num_layers_in_last_pipeline_stage`, the given
    ends plus one layer per virtual stage of every middle rank (the smallest depth
    Megatron-Core's uneven split accepts that builds a layer on each); else nothing (the
    stand-in's own depth)."""
    layout = getattr(model, "pipeline_model_parallel_layout", None)
    if layout is not None and not isinstance(layout, (str, list)):
        layout = str(layout)
    if layout:
        decoder, mtp = layout_counts(layout)
        return {"num_hidden_layers": decoder, **({"num_nextn_predict_layers": mtp} if mtp else {})}
    first = getattr(model, "num_layers_in_first_pipeline_stage", None)
    last = getattr(model, "num_layers_in_last_pipeline_stage", None)
    if first is None and last is None:
        return {}
    pp = model.pipeline_model_parallel_size or 1
    vp = model.virtual_pipeline_model_parallel_size or 1
    middle = pp - (first is not None) - (last is not None)
    return {"num_hidden_layers": (first or 0) + (last or 0) + max(middle, 0) * vp}


def fitted_standin(case: dict, spec: dict, path: str) -> str:
    """The stand-in config at `path` with the depth the case's recipe function states its
    pipeline split for (`standin_depth`, read from the function run once on the stand-in as it
    is); `path` itself when the function states none or fails on it."""
    name = parse_argv(case["argv"])[0]
    ovlaunch_stubs.fake_gpu(case["gpu"])
    try:
        with HubConfig(dict(spec, config=path)):
            keys = standin_depth(load(name, benchmark_metadata(name)).model)
    except Exception:  # noqa: BLE001 - build() reports this stand-in's failure itself
        return path
    cfg = json.loads(Path(path).read_text())
    if not keys or all(cfg.get(k) == v for k, v in keys.items()):
        return path
    cfg.update(keys)
    out = Path(tempfile.mkdtemp(prefix="standin-")) / "config.json"
    out.write_text(json.dumps(cfg))
    return str(out)


def build_case(case: dict):
    """`build`, with the case's stand-in checkpoint configs tried in turn (`hf_config` with a
    list `configs`: the first whose architecture Bridge builds the job with), or its one
    `hf_config`; returns also the config used (a stand-in's fixture, whatever depth
    `fitted_standin` gave it). When none builds it, raises the error most of them got."""
    spec = case.get("hf_config")
    if spec is None:
        return (*build(case), None)
    configs = spec.get("configs") or [spec["config"]]
    errors, fitting = [], []
    for path in configs:
        fitted = fitted_standin(case, spec, path) if spec.get("configs") else path
        try:
            with HubConfig(dict(spec, config=fitted)):
                return (*build(case), path)
        except Refused:
            raise
        except Exception as e:  # noqa: BLE001 - the next stand-in may fit
            errors.append(e)
            if len(configs) > 1 and fits(case, dict(spec, config=fitted)):
                fitting.append(e)
        finally:
            if fitted != path:
                shutil.rmtree(Path(fitted).parent)
    # none builds it: the error most of those that can hold the function's model got (the
    # first of those), not one stand-in's own mismatch with the function
    errors = fitting or errors
    texts = [f"{type(e).__name__}: {e}" for e in errors]
    raise max(errors, key=lambda e: (texts.count(f"{type(e).__name__}: {e}"), -errors.index(e)))


def fits(case: dict, spec: dict) -> bool:
    """Whether the stand-in config `spec["config"]` can hold what the case's function asks of
    its model: not when the function, run on it, places experts (`expert_model_parallel_size`
    above one) on a model the config gave no experts (`num_moe_experts`), which Megatron-Core
    refuses for the stand-in's sake, not the function's. True when the function fails on it
    (its own error)."""
    name = parse_argv(case["argv"])[0]
    try:
        with HubConfig(spec):
            ovlaunch_stubs.fake_gpu(case["gpu"])
            model = load(name, benchmark_metadata(name)).model
    except Exception:  # noqa: BLE001 - the function's own failure
        return True
    return not ((getattr(model, "expert_model_parallel_size", 1) or 1) > 1 and getattr(model, "num_moe_experts", None) is None)


def held_classes(path: str, v, out: dict) -> None:
    """The class of every section's object, by its path (`dataset`), and of every dataclass
    object a pass-through section holds (`dataset.hf_dataset`)."""
    if v is None or not dataclasses.is_dataclass(v):
        return
    out[path] = f"{type(v).__module__}.{type(v).__qualname__}"
    if path.split(".")[0] in ("model", "train", "ddp", "optimizer", "comm_overlap", "mixed_precision"):
        return
    for f in dataclasses.fields(v):
        if not f.name.startswith("_"):
            held_classes(f"{path}.{f.name}", getattr(v, f.name, None), out)


def main() -> None:
    cases = json.load(sys.stdin)
    # Bridge's code prints (config dumps, notices): keep stdout for the answer only
    answer = sys.stdout
    sys.stdout = sys.stderr
    out = {}
    for case in cases:
        try:
            cfg, env, recipe_env, standin = build_case(case)
            config = {s: plain(getattr(cfg, s, None)) for s in SECTIONS}
            classes = {}
            for s in SECTIONS:
                held_classes(s, getattr(cfg, s, None), classes)
            out[case["id"]] = {
                "ok": True,
                "config": config,
                "classes": classes,
                "env": env,
                "recipe_env": plain(recipe_env),
                "hf_config": standin,
            }
        except Refused as e:
            out[case["id"]] = {"ok": False, "refused": True, "error": str(e)}
        except Exception as e:  # noqa: BLE001 - reported per case
            out[case["id"]] = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc(limit=-3),
            }
    json.dump(out, answer, sort_keys=True)


if __name__ == "__main__":
    main()
