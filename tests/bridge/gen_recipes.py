"""Generate ovlaunch's shipped recipes (recipes/*.yaml) from Megatron-Bridge's own package.

Every recipe function Bridge's runner accepts is called: the performance recipes of every
`megatron.bridge.perf_recipes` family and the library recipes of `megatron.bridge.recipes`
(pretrain, SFT, PEFT; a name the runner resolves to a performance recipe first is that one). The
values it returns for the fields ovlaunch models (`ovlaunch fields`) are written as one variant per
function: the model shape, parallel layout, batch, ddp, optimizer, the recipe's own
`CommOverlapConfig` arguments (what it passed, not what `runtime_config_update` later derives),
its mixed-precision fields, its `env_vars` and its model provider class. Files: one per model and
task of each source: the nine MODELS below keep their names (`llama3_8b`: performance
pretraining), other performance recipes are `<model>` (pretraining) or `<model>_<task>_perf`,
library recipes `<model>_<task>` with `kind: library` (a real run: no benchmark step). A function
the library exports under several names is one variant with `bridge_aliases`. Values shared by
every variant of a file move to its top level. Nothing is typed by hand: a value in recipes/ is
the one Bridge's function returns, read after the runner's own fix-up (model.seq_length follows
dataset.seq_length). A recipe whose model carries a pipeline-layout builder (Kimi K2) also gets
`pipeline_layouts`: every (PP, VP) the builder knows and the layout it builds, found by calling
the builder itself (the runner calls it after a PP or VP override).

`env_vars` hold only what ovlaunch's env rules (crates/ovlaunch-core/src/resolve/env_rules.rs) do not derive, one
statement per fact: each variant is first planned by ovlaunch without any env (`ovlaunch plan
--recipe FILE -o json`, the rules alone), then Bridge's env is compared with it name by name:
a name the rules derive with the same typed value is left out; a different value, or a name no
rule sets, is kept; a name a rule sets that Bridge's recipe lacks becomes `{inherit: true}`. A
variant ovlaunch refuses keeps Bridge's env whole.

A function that builds its model from a Hugging Face checkpoint whose config.json
tests/bridge/hf does not hold (the offline hub has nothing else; a function that reads the
config itself, `AutoConfig.from_pretrained(NAME)`, names the checkpoint in the loader's call)
is run on stand-in configs (STANDIN_RUNS: a fixture's config, the same with every shape number
doubled, a MoE and an MLA MoE; STANDIN_MORE, architectures some recipes read a config of their
own family from, when fewer than two of those build it) at the checkpoint's
name: the model fields it assigns after Bridge built the model, with the same value on all, are
what the recipe states; the other model fields go under `from_checkpoint` (the checkpoint, the
commit the function pins, the fields, and the provider classes the bridges of its model build:
`checkpoint_classes`), except those Bridge's mixed-precision setup writes later.
It is shipped when Bridge's runner then builds the job with one of PROOF_STANDINS at the
checkpoint's name (what the Bridge proof does), each given the depth the function's own pipeline
split states (`probe.standin_depth`: the decoder and MTP layers its layout places, or its first
and last stages' layers plus one per virtual stage of every middle rank); that depth is the
stand-in's, never stated by the recipe (`num_layers` stays under `from_checkpoint`). recipes/hf_config_map.json is Bridge's config
mapping, which ovlaunch applies to a config the user gives (`--hf-config`).

A function Bridge refuses only because a value the user must bring is empty (USER_VALUES: Bridge's
own error, the field it is about, where Bridge checks it) is built again with that field given a
placeholder on the runner's line; when Bridge then builds the job it is shipped, its variant
naming the field under `requires` with Bridge's error (ovlaunch refuses a plan without it, with
the fix). Every field is learnt from Bridge's error and confirmed by Bridge's acceptance.

Every function not shipped is listed with its reason in recipes/NOT_SHIPPED.md: Bridge's own
runner refuses it at its own GPU count (also listed at the top of its file when the file exists;
for a function whose checkpoint is not at hand: no stand-in builds it and stand-ins of two or more
architectures that can hold it get the same error, which is then Bridge's whatever the
checkpoint's config, `refusal`), it builds its model from a checkpoint not at hand and Bridge
does not build it with any stand-in config (Bridge's error: what only the checkpoint's own config
can settle), or its GPU kind is not in the hardware table.

Usage (the interpreter is the Bridge venv's, see .ci/bridge-venv.sh):
    python tests/bridge/gen_recipes.py --fields FIELDS.txt --ovlaunch BIN --out recipes          # write
    python tests/bridge/gen_recipes.py --fields FIELDS.txt --ovlaunch BIN --out recipes --check  # compare only
FIELDS.txt is `ovlaunch fields` output, BIN an ovlaunch binary built from this tree. With --check
the exit status is 1 when a file differs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe  # noqa: E402  (sets up the offline hub and the stand-ins)
import generated  # noqa: E402

import megatron.bridge.training.comm_overlap as comm_overlap_module  # noqa: E402
from megatron.bridge.training.mixed_precision import MixedPrecisionConfig, get_mixed_precision_config  # noqa: E402

# ovlaunch recipe name -> (Bridge function-name prefix, perf family module, metadata)
MODELS = {
    "llama3_8b": ("llama3_8b_pretrain_", "llama", dict(
        aliases=["llama8b", "llama3-8b"], description="Llama 3 8B pretraining", family="llama")),
    "llama3_70b": ("llama3_70b_pretrain_", "llama", dict(
        aliases=["llama70b", "llama3-70b"], description="Llama 3 70B pretraining", family="llama")),
    "llama31_405b": ("llama31_405b_pretrain_", "llama", dict(
        aliases=["llama405b", "llama31-405b", "llama3.1-405b"], description="Llama 3.1 405B pretraining", family="llama")),
    "deepseek_v3": ("deepseek_v3_pretrain_", "deepseek", dict(
        aliases=["deepseekv3", "dsv3", "deepseek-v3"], description="DeepSeek-V3 pretraining", family="deepseek")),
    "gpt_oss_120b": ("gpt_oss_120b_pretrain_", "gpt_oss", dict(
        aliases=["gptoss120b", "gpt-oss-120b"], description="GPT-OSS 120B pretraining", family="gpt_oss")),
    "gpt_oss_20b": ("gpt_oss_20b_pretrain_", "gpt_oss", dict(
        aliases=["gptoss20b", "gpt-oss-20b"], description="GPT-OSS 20B pretraining", family="gpt_oss")),
    "qwen3_30b_a3b": ("qwen3_30b_a3b_pretrain_", "qwen", dict(
        aliases=["qwen3-30b", "qwen3-30b-a3b", "qwen30b"], description="Qwen3-30B-A3B pretraining", family="qwen")),
    "qwen3_235b_a22b": ("qwen3_235b_a22b_pretrain_", "qwen", dict(
        aliases=["qwen3-235b-a22b", "qwen235b"], description="Qwen3 235B-A22B pretraining", family="qwen")),
    "kimi_k2": ("kimi_k2_pretrain_", "kimi", dict(
        aliases=["kimi-k2", "kimik2"], description="Kimi K2 pretraining", family="kimi")),
}

SECTIONS = ("model", "train", "ddp", "optimizer")

# GPU kinds ovlaunch's hardware table has.
GPU_KINDS = {"h100", "b200", "b300", "gb200", "gb300", "vr200", "r100"}

# The perf_recipes families (Bridge's runner's own family table).
FAMILIES = sorted({family for _, family in probe.FAMILY_PREFIXES})

RELEASED_060 = {
    line.strip()
    for line in (Path(__file__).resolve().parent / "bridge-0.6.0-perf-recipes.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
}


# Bridge's refusals of a recipe function that a value the user must bring lifts: (Bridge's
# error text, where Bridge raises it, the field it is about). The generator gives the field a
# placeholder and ships the function only when Bridge then builds the job.
USER_VALUES = (
    ("--data-cache-path must be provided when using --dataloader-fast-cache-load.",
     "megatron.core.datasets.blended_megatron_dataset_config.BlendedMegatronDatasetConfig.__post_init__",
     "dataset.path_to_cache"),
    ("--data-cache-path must be provided when using --dataloader-defer-npy-index-mmap.",
     "megatron.core.datasets.blended_megatron_dataset_config.BlendedMegatronDatasetConfig.__post_init__",
     "dataset.path_to_cache"),
    ("EnergonDatasetConfig.path must be set to a non-empty dataset path.",
     "megatron.bridge.data.builders.energon.EnergonDatasetConfig.validate",
     "dataset.path"),
    # one text for every source of a Hugging Face dataset config: the field is the unset entry
    # of the `load_kwargs.data_files` mapping of the source Bridge was validating (`unset_data_file`)
    ("load_kwargs.data_files must contain non-empty paths.",
     "megatron.bridge.data.sources.hf.HFDatasetSourceConfig.validate",
     lambda e: unset_data_file(e)),
)


def frames(e: BaseException):
    """The frames of an exception's own traceback, outermost first (from where it was caught
    to where it was raised)."""
    tb = e.__traceback__
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def unset_data_file(e: Exception) -> str | None:
    """The field of `dataset` Bridge refused for an empty data file: the source whose
    `validate` raised (`self` of that frame), found among the dataset config's fields, and the
    first key of its `load_kwargs.data_files` mapping left unset (`dataset.source.load_kwargs.
    data_files.train`); None when the traceback does not show them."""
    from dataclasses import fields as dc_fields

    selves = [f.f_locals.get("self") for f in frames(e)]
    source = next((s for s in reversed(selves) if type(s).__name__ == "HFDatasetSourceConfig"), None)
    cfg = next((s for s in selves if type(s).__name__ == "ConfigContainer"), None)
    if source is None or cfg is None or cfg.dataset is None:
        return None
    name = next((f.name for f in dc_fields(cfg.dataset) if getattr(cfg.dataset, f.name, None) is source), None)
    files = (source.load_kwargs or {}).get("data_files")
    key = next((k for k, v in files.items() if not v), None) if isinstance(files, dict) else None
    return None if name is None or key is None else f"dataset.{name}.load_kwargs.data_files.{key}"

# The value each required field is given while the generator checks that Bridge builds the job
# (a directory: Bridge reads none of these paths when it builds the config).
USER_VALUE = tempfile.mkdtemp(prefix="ovlaunch-user-value-")


def user_values(build, argv: list[str], refusal: Exception) -> tuple[dict[str, str] | None, Exception]:
    """The fields a function needs from the user, each with Bridge's error (`{field: "text
    (Error in where)"}`), when Bridge's `refusal` of `build(argv)` is one of USER_VALUES and `build`
    succeeds once its field (and any the next refusal asks for) is given USER_VALUE on the
    runner's line; else None and the refusal that stands (Bridge's last)."""
    needed: dict[str, str] = {}
    e = refusal
    while True:
        text = str(e).strip()
        row = next((r for r in USER_VALUES if text == r[0]), None)
        field = row[2](e) if row is not None and callable(row[2]) else row and row[2]
        if field is None or field in needed:
            return None, e
        needed[field] = f"{text} ({type(e).__name__} in {row[1]})"
        try:
            build(argv + [f"{f}={USER_VALUE}" for f in needed])
            return needed, e
        except Exception as x:  # noqa: BLE001 - Bridge's next refusal, read above
            e = x


def scalar(v):
    """A YAML-able value: torch dtypes by name, tuples as lists."""
    import enum

    import torch

    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (list, tuple)):
        return [scalar(x) for x in v]
    if isinstance(v, dict):
        return {str(k): scalar(x) for k, x in v.items()}
    return v


LAYER_CODES = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}


def layout_text(layout):
    """A pipeline layout in Megatron-Core's string grammar (`E`, `t`, `m`, `L`; stages split by
    `|`), for a layout Bridge's recipe holds as a list of per-stage layer-type lists."""
    if layout is None or isinstance(layout, str):
        return layout
    return "|".join("".join(LAYER_CODES[str(x)] for x in stage) for stage in layout)


# The sweep bounds for a pipeline-layout builder's table: every PP up to PP_MAX and VP up to
# VP_MAX with at most MAX_STAGES stages (one per PP rank and virtual stage). Bridge's tables
# stop far below these.
PP_MAX, VP_MAX, MAX_STAGES = 256, 64, 1024


def layout_table(model):
    """The table of Bridge's `_pipeline_model_parallel_layout_builder` (the one the runner calls
    after a PP or VP override without a layout: recipe_runner.py `sync_model_pipeline_layout`),
    found by calling it: every (PP, VP) it builds a layout for, with that layout; None when the
    model has no builder. The builder raises ValueError for a pair its table lacks. It takes VP
    None as 1, which is checked here for every PP, so the table states VP >= 1 only."""
    builder = getattr(model, "_pipeline_model_parallel_layout_builder", None)
    if builder is None:
        return None

    def built(pp, vp):
        try:
            return True, layout_text(builder(pp, vp))
        except ValueError:
            return False, None

    rows = []
    for pp in range(1, PP_MAX + 1):
        if built(pp, None) != built(pp, 1):
            raise SystemExit(f"{builder.__qualname__}: VP None and VP 1 differ at PP {pp}")
        for vp in range(1, min(VP_MAX, MAX_STAGES // pp) + 1):
            known, layout = built(pp, vp)
            if known:
                rows.append({"pp": pp, "vp": vp, "layout": layout})
    if not rows:
        raise SystemExit(f"{builder.__qualname__}: builds no layout for any PP <= {PP_MAX}, VP <= {VP_MAX}")
    return {"builder": f"{builder.__module__}.{builder.__qualname__}", "layouts": rows}


def preset_name(cfg):
    """The userbuffers preset's name in Bridge's comm_overlap module, for a preset object."""
    if cfg is None or isinstance(cfg, str):
        return cfg
    for name in dir(comm_overlap_module):
        if name.startswith("userbuffers_") and getattr(comm_overlap_module, name) == cfg:
            return name
    raise SystemExit(f"tp_comm_overlap_cfg {cfg!r} is not one of Bridge's userbuffers presets")


MP_PRECISION = {
    "bf16_mixed": "bf16", "bf16_with_fp8_current_scaling_mixed": "fp8cs", "bf16_with_mxfp8_mixed": "fp8mx",
    "bf16_with_fp8_delayed_scaling_mixed": "fp8ds", "bf16_with_fp8_subchannel_scaling_mixed": "fp8sc",
    "bf16_with_nvfp4_mixed": "nvfp4",
}


def name_meta(fn_name: str, fn) -> dict:
    """task, num_gpus, hardware, precision and the variant suffix of a recipe function: from its
    name when it states them; else (a library function exported under a generic name only) the
    GPU kind is `any`, the count the smallest world its layout fits and the precision its
    mixed-precision recipe's."""
    import math

    m = probe.BENCHMARK_NAME.search(fn_name)
    if m is not None:
        meta = m.groupdict()
        meta["rest"] = fn_name[: -len("_config")].split(f"_{meta['precision']}", 1)[1].lstrip("_")
        return meta
    probe.ovlaunch_stubs.fake_gpu("h100")
    cfg = fn()
    mp = cfg.mixed_precision
    if isinstance(mp, MixedPrecisionConfig):
        fp8 = {"tensorwise": "fp8cs", "mxfp8": "fp8mx", "delayed": "fp8ds", "blockwise": "fp8sc"}
        mp = ("bf16_with_nvfp4_mixed" if mp.fp4 else
              next((k for k, v in MP_PRECISION.items() if v == fp8.get(mp.fp8_recipe)), None) if mp.fp8 else
              "bf16_mixed" if mp.bf16 else None)
    if mp not in MP_PRECISION:
        raise SystemExit(f"{fn_name}: mixed precision {cfg.mixed_precision!r} has no ovlaunch precision name")
    md_ = cfg.model
    dense = md_.tensor_model_parallel_size * md_.pipeline_model_parallel_size * md_.context_parallel_size
    experts = (getattr(md_, "expert_tensor_parallel_size", None) or md_.tensor_model_parallel_size) * (
        getattr(md_, "expert_model_parallel_size", 1) or 1) * md_.pipeline_model_parallel_size
    task = re.search(r"_(pretrain|sft|peft)_", fn_name)
    return {"task": task.group(1), "num_gpus": str(math.lcm(dense, experts)), "hardware": "any",
            "precision": MP_PRECISION[mp], "rest": fn_name[task.end():-len("_config")].strip("_")}


def variant_of(fn_name: str, fn, fields: dict[str, list[str]], aliases=(), library=False, requires=None):
    meta = name_meta(fn_name, fn)
    rest = meta["rest"]
    probe.ovlaunch_stubs.fake_gpu(meta["hardware"] if meta["hardware"] in probe.ovlaunch_stubs.GPUS else "h100")
    cfg = fn()
    if cfg.dataset is not None and getattr(cfg.dataset, "seq_length", None) is not None:
        cfg.model.seq_length = cfg.dataset.seq_length  # the runner's sync (recipe_runner.py)
    out = {
        "gpu": meta["hardware"],
        "precision": meta["precision"],
    }
    if rest:
        out["variant"] = rest
    out["num_gpus"] = int(meta["num_gpus"])
    out["bridge_recipe"] = fn_name
    if aliases:
        out["bridge_aliases"] = sorted(aliases)
    if not library:
        out["bridge_since"] = "0.6.0" if fn_name in RELEASED_060 else "0.6.2"
    if requires:
        out["requires"] = dict(sorted(requires.items()))
    out["model_class"] = f"{type(cfg.model).__module__}.{type(cfg.model).__qualname__}"
    # ovlaunch's model fields this provider class does not have (the plan does not report them)
    lacks = [f for f in fields["model"] if not hasattr(cfg.model, f)]
    if lacks:
        out["model_lacks"] = lacks
    for section in SECTIONS:
        obj = getattr(cfg, section)
        vals = {}
        for f in fields[section]:
            if section == "model" and f.startswith("tp_comm") or f in ("overlap_p2p_comm", "batch_p2p_comm"):
                # written by CommOverlapConfig at runtime_config_update, not by the recipe
                if section == "model":
                    continue
            if hasattr(obj, f):
                v = getattr(obj, f)
                if f == "pipeline_model_parallel_layout":
                    v = layout_text(v)
                vals[f] = scalar(v)
        out[section] = vals
    table = layout_table(cfg.model)
    if table is not None:
        out["pipeline_layouts"] = table
    co = cfg.comm_overlap
    if co is not None:
        vals = {}
        for f in fields["comm_overlap"]:
            if hasattr(co, f):
                v = getattr(co, f)
                if f == "tp_comm_overlap_cfg":
                    v = preset_name(v)
                if v is not None or f == "tp_comm_overlap":
                    vals[f] = scalar(v)
        out["comm_overlap"] = vals
    mp = cfg.mixed_precision
    if isinstance(mp, str):
        mp = get_mixed_precision_config(mp)
    if isinstance(mp, MixedPrecisionConfig):
        out["mixed_precision"] = {f: scalar(getattr(mp, f)) for f in fields["mixed_precision"] if hasattr(mp, f)}
    out["env_vars"] = {k: scalar(v) for k, v in (cfg.env_vars or {}).items()}
    return out


def rule_value(text: str):
    """A rule's value typed as Bridge's recipes write env values: a decimal integer as an int,
    anything else as a string (ovlaunch's `EnvScalar::typed`)."""
    try:
        i = int(text)
    except ValueError:
        return text
    return i if str(i) == text else text


def same_typed(a, b) -> bool:
    return type(a) is type(b) and a == b


def rules_env(ovlaunch: str, doc: dict, variants: list[dict]) -> list[dict | None]:
    """Per variant, what ovlaunch's env rules alone set for it ({NAME: text}), from a plan of
    the recipe without any env; None where ovlaunch refuses the variant."""
    bare = {k: v for k, v in doc.items() if k != "env_vars"}
    # a trainer of its own: the file is planned as it is, not over the shipped recipe holding
    # its Bridge functions (whose env statements it would take on); the env rules ignore it
    bare["trainer"] = ["true"]
    bare["variants"] = [{k: x for k, x in v.items() if k != "env_vars"} for v in variants]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{doc['name']}.yaml"
        path.write_text("\n".join(["# GENERATED by tests/bridge/gen_recipes.py (Bridge's functions)", *emit(bare)]) + "\n")
        for v in variants:
            gpu = v["gpu"] if v["gpu"] != "any" else "h100"
            if doc.get("kind") == "library" and gpu == "h100" and v["precision"] in ("fp8mx", "nvfp4"):
                gpu = "b200"  # a library function runs on any GPUs; MXFP8 and NVFP4 need Blackwell
            argv = [ovlaunch, "plan", "--recipe", str(path), "--gpus", f"{gpu}x{v['num_gpus']}",
                    "--precision", v["precision"], "-o", "json"]
            if "variant" in v:
                argv += ["--variant", v["variant"]]
            if doc.get("task") == "peft":  # Bridge requires it (see the plan's check)
                argv += ["--set", f"checkpoint.pretrained_checkpoint={PRETRAINED}"]
            # the values the user brings (see `user_values`), as `--set` reaches them: the field,
            # or a free-form mapping above it given whole (`set_words`)
            for words in set_words(list(v.get("requires", {})), USER_VALUE):
                r = subprocess.run(argv + words, capture_output=True, text=True)
                if r.returncode == 0:
                    break
            if r.returncode != 0:
                out.append(None)
                continue
            env = json.loads(r.stdout)["env"]
            out.append({k: e["value"] for k, e in env.items() if e["source"] == "derived"})
    return out


def set_words(fields: list[str], value: str) -> list[list[str]]:
    """The ways `--set` may give `fields` the text `value`, tried in turn: each field itself,
    then, for a field inside a free-form mapping (whose keys ovlaunch's `--set` does not reach one
    by one), the mapping `depth` keys above the field given whole with the field's key
    (`dataset.source.load_kwargs={data_files: {train: VALUE}}`), nearest first."""
    def word(f: str, depth: int) -> str:
        parts = f.split(".")
        if depth == 0 or depth >= len(parts) - 1:
            return f"{f}={value}"
        inner = value
        for k in reversed(parts[-depth:]):
            inner = f"{{{k}: {inner}}}"
        return f"{'.'.join(parts[:-depth])}={inner}"

    deepest = max((len(f.split(".")) - 2 for f in fields), default=0)
    return [[w for f in fields for w in ("--set", word(f, d))] for d in range(deepest + 1)]


def state_env(variants: list[dict], derived: list[dict | None]) -> None:
    """Keeps in each variant's env_vars only what the rules do not derive (see the module doc)."""
    for v, rules in zip(variants, derived):
        if rules is None:
            continue
        bridge = v["env_vars"]
        stated = {k: x for k, x in bridge.items() if not (k in rules and same_typed(rule_value(rules[k]), x))}
        stated.update({k: {"inherit": True} for k in rules if k not in bridge})
        v["env_vars"] = dict(sorted(stated.items()))


def factor(variants: list[dict]) -> dict:
    """Values identical in every variant (per section field) move to the top level."""
    base = {}
    # the model class every variant builds (one statement for the file)
    for key in ("model_class", "model_lacks", "from_checkpoint", "requires"):
        held = {json.dumps(v.get(key)) for v in variants}
        if len(held) == 1 and key in variants[0]:
            base[key] = variants[0][key]
            for v in variants:
                del v[key]
    # a pipeline-layout table every variant shares (it belongs to Bridge's model recipe)
    tables = {json.dumps(v.get("pipeline_layouts"), sort_keys=True) for v in variants}
    if len(tables) == 1 and "pipeline_layouts" in variants[0]:
        base["pipeline_layouts"] = variants[0]["pipeline_layouts"]
        for v in variants:
            del v["pipeline_layouts"]
    for section in (*SECTIONS, "env_vars"):
        keys = set.intersection(*(set(v.get(section, {})) for v in variants)) if variants else set()
        common = {}
        for k in sorted(keys):
            vals = [json.dumps(v[section][k], sort_keys=True) for v in variants]
            if len(set(vals)) == 1:
                common[k] = variants[0][section][k]
        if common:
            base[section] = common
            for v in variants:
                for k in common:
                    del v[section][k]
                if not v[section]:
                    del v[section]
    return base


def yaml_scalar(v) -> str:
    return json.dumps(v)


def emit(obj, indent: int = 0) -> list[str]:
    """A small deterministic YAML writer (flow style for leaves: JSON is valid YAML)."""
    pad = " " * indent
    lines = []
    for k, v in obj.items():
        if isinstance(v, dict) and v and list(v) != ["inherit"]:
            lines.append(f"{pad}{k}:")
            lines.extend(emit(v, indent + 2))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            lines.append(f"{pad}{k}:")
            for item in v:
                sub = emit(item, indent + 4)
                sub[0] = pad + "  - " + sub[0][indent + 4 :]
                lines.extend(sub)
        else:
            lines.append(f"{pad}{k}: {yaml_scalar(v)}")
    return lines


# Stand-in checkpoint configs for a function whose checkpoint's config.json is not at hand:
# Llama 3 8B's (tests/bridge/hf, a plain decoder Bridge builds with its Llama bridge) and the
# same with every shape number doubled. The function runs on each; what it assigns to the model
# Bridge built from the config, with the same value on both, is what the recipe states; every
# other model field comes from the checkpoint at run time (its architecture, provider class and
# shape), except what Bridge's mixed-precision setup writes over the model later.
STANDIN = "meta-llama/Meta-Llama-3-8B"
# The stand-ins a function runs on: Llama 3 8B's config and the same doubled, then a MoE and an
# MLA MoE architecture (a recipe helper may assign differently for a MoE model); a run that
# fails is left out, and at least two must run.
STANDIN_RUNS = ((STANDIN, 1), (STANDIN, 2), ("Qwen/Qwen3-30B-A3B", 1), ("deepseek-ai/DeepSeek-V3", 1))
# Stand-ins of the architectures a recipe reads a config of its own family from, run when fewer
# than two of STANDIN_RUNS build the function: Qwen3.5's (a multimodal config whose
# `text_config` the text-only recipes read; dense 4B and 27B, MoE 35B-A3B), Gemma 2's (dense
# 2B and 9B: a Gemma recipe loads the checkpoint's tokenizer, whose class the config's
# architecture names), and a hybrid Mamba MoE (Nemotron 3 Nano). Two fixtures of one
# architecture and different shapes play the doubled stand-in's part.
STANDIN_MORE = (("Qwen/Qwen3.5-4B", 1), ("Qwen/Qwen3.5-27B", 1), ("Qwen/Qwen3.5-35B-A3B", 1),
                ("google/gemma-2-2b", 1), ("google/gemma-2-9b", 1),
                ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 1))
# The configs the Bridge proof puts at such a checkpoint's name, tried in turn until Bridge's
# runner builds the job: a dense decoder, a MoE decoder, a MoE decoder with multi-latent
# attention, then those of STANDIN_MORE (all tests/bridge/hf fixtures), each with the depth the
# function's own pipeline split states (probe.standin_depth). A function none of them builds is
# not shipped.
PROOF_STANDINS = ("meta-llama/Meta-Llama-3-8B", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3",
                  *(hf for hf, _ in STANDIN_MORE))
STANDIN_SCALED = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                  "num_key_value_heads", "vocab_size", "max_position_embeddings")


class Standin:
    """A stand-in config.json at `hf` in the offline hub (scale 1 or 2), and a record of the
    model fields the recipe function assigns after Bridge built the model from it."""

    def __init__(self, hf: str, scale: int, base: str = STANDIN):
        self.hf, self.scale, self.base, self.assigned, self.revision = hf, scale, base, set(), None

    def __enter__(self):
        import os

        from megatron.bridge.models.conversion.auto_bridge import AutoBridge

        cfg = json.loads((probe.HERE / "hf" / self.base / "config.json").read_text())
        if self.scale != 1:
            for k in STANDIN_SCALED:
                cfg[k] = cfg[k] * self.scale
        org, name = self.hf.split("/", 1)
        self.repo = Path(os.environ["HF_HUB_CACHE"]) / f"models--{org}--{name}"

        def snapshot(revision):
            (self.repo / "snapshots" / revision).mkdir(parents=True, exist_ok=True)
            (self.repo / "snapshots" / revision / "config.json").write_text(json.dumps(cfg))

        snapshot("0" * 40)
        (self.repo / "refs").mkdir()
        (self.repo / "refs" / "main").write_text("0" * 40)
        # a function that pins a commit of the checkpoint reads the stand-in there too
        self.original_from = AutoBridge.__dict__["from_hf_pretrained"]

        def from_hf(cls, path, *a, **k):
            if path == self.hf and k.get("revision"):
                self.revision = k["revision"]
                snapshot(k["revision"])
            return self.original_from.__func__(cls, path, *a, **k)

        AutoBridge.from_hf_pretrained = classmethod(from_hf)
        self.original = AutoBridge.to_megatron_provider
        assigned = self.assigned

        def recording(bridge, *a, **k):
            provider = self.original(bridge, *a, **k)
            cls = type(provider)

            def setattr_(obj, name, value):
                assigned.add(name)
                cls.__setattr__(obj, name, value)

            provider.__class__ = type(cls.__name__, (cls,), {"__setattr__": setattr_, "__module__": cls.__module__})
            return provider

        AutoBridge.to_megatron_provider = recording
        return self

    def __exit__(self, *exc):
        import shutil

        from megatron.bridge.models.conversion.auto_bridge import AutoBridge

        AutoBridge.to_megatron_provider = self.original
        AutoBridge.from_hf_pretrained = self.original_from
        shutil.rmtree(self.repo)
        return False


def bridge_classes() -> dict[str, list[str]]:
    """The provider classes of every model bridge Bridge registers, by the bridge's module
    (`megatron.bridge.models.qwen_vl.qwen3_vl_bridge`): the class `register_bridge(provider=...)`
    names (`MegatronModelBridge.PROVIDER_CLASS`; GPTModelProvider when it names none, as
    `hf_config_to_provider_kwargs` builds) and the class its own `provider_bridge` says it returns."""
    import pkgutil
    import typing

    import megatron.bridge.models as models
    from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge
    from megatron.bridge.models.gpt_provider import GPTModelProvider

    for m in pkgutil.walk_packages(models.__path__, "megatron.bridge.models."):
        if m.name.endswith("_bridge"):
            importlib.import_module(m.name)

    def name(c) -> str:
        return f"{c.__module__}.{c.__qualname__}"

    def every(c):
        for s in c.__subclasses__():
            yield s
            yield from every(s)

    out: dict[str, list[str]] = {}
    for b in every(MegatronModelBridge):
        held = out.setdefault(b.__module__, [])
        made = [b.PROVIDER_CLASS or GPTModelProvider]
        try:
            ret = typing.get_type_hints(b.provider_bridge).get("return") if "provider_bridge" in vars(b) else None
        except NameError:  # an annotation naming a class its module does not import
            ret = None
        if isinstance(ret, type) and issubclass(ret, GPTModelProvider) and not issubclass(made[0], ret):
            made.append(ret)
        held.extend(x for x in map(name, made) if x not in held)
    return out


def checkpoint_classes(fn) -> list[str]:
    """The provider classes a function that builds its model from a checkpoint can get: those of
    the bridges of its model (the bridge module named as the function's recipe module,
    `recipes/qwen_vl/h100/qwen3_vl.py` -> `models/qwen_vl/qwen3_vl_bridge.py`, else every bridge of
    the models package named as its recipe package); the checkpoint's config.json picks one of
    them at run time (its `architectures`). Empty when the recipe names no bridge module."""
    bridges = BRIDGE_CLASSES or BRIDGE_CLASSES.update(bridge_classes()) or BRIDGE_CLASSES
    parts = fn.__module__.split(".")
    stem, package = parts[-1], parts[3] if len(parts) > 4 else None
    for match in (lambda m: m.rsplit(".", 1)[-1] == f"{stem}_bridge",
                  lambda m: package is not None and m.startswith(f"megatron.bridge.models.{package}.")):
        found = sorted({c for m, cs in bridges.items() if match(m) for c in cs})
        if found:
            return found
    return []


BRIDGE_CLASSES: dict[str, list[str]] = {}


class RefusedWhateverConfig(Exception):
    """Bridge refuses a function with the same error on stand-in configs of several
    architectures and builds it on none: its refusal does not depend on the checkpoint."""

    def __init__(self, error: Exception, architectures: list[str]):
        super().__init__(str(error))
        self.error, self.architectures = error, architectures


def architecture(hf: str) -> str:
    """A stand-in fixture's architecture (its config.json `architectures`)."""
    return ",".join(json.loads((probe.HERE / "hf" / hf / "config.json").read_text()).get("architectures") or [hf])


def refusal(failed: list[tuple[str, Exception]]) -> Exception:
    """The error that stands when no stand-in builds a function (`failed`: the stand-in fixture
    and Bridge's error on it, in the order tried, None for a stand-in that does not fit the
    function: `fits`): RefusedWhateverConfig when stand-ins of two or more architectures that
    fit it got the same error (type and text; not a checkpoint file Bridge could not read), the
    most widely shared one; else the last error."""
    by_error: dict[str, tuple[Exception, set[str]]] = {}
    for hf, e in failed:
        if e is None or checkpoint_missing(e) is not None:
            continue
        key = f"{type(e).__name__}: {stable(str(e))}"
        by_error.setdefault(key, (e, set()))[1].add(architecture(hf))
    e, archs = max(by_error.values(), key=lambda x: len(x[1]), default=(None, set()))
    if len(archs) >= 2:
        return RefusedWhateverConfig(e, sorted(archs))
    return next(e for _, e in reversed(failed) if e is not None)


def standin_variant(n: str, fn, fields: dict[str, list[str]], aliases, library: bool, hf: str,
                    requires=None) -> dict:
    """The variant of a function whose checkpoint config is not at hand (see STANDIN and
    STANDIN_RUNS): what the recipe states (a model field it assigns with the same value on every
    stand-in that runs), and `from_checkpoint` naming the checkpoint and the model fields it
    gives at run time. Raises ValueError when anything outside the model differs between the
    stand-ins."""
    from dataclasses import fields as dc_fields

    runs, revision, failed = [], None, []
    for base, scale in (*STANDIN_RUNS, *STANDIN_MORE):
        if len(runs) >= 2 and (base, scale) == STANDIN_MORE[0]:
            break  # the first stand-ins suffice
        try:
            with Standin(hf, scale, base) as s:
                v = variant_of(n, fn, fields, aliases, library, requires)
        except Exception as e:  # noqa: BLE001 - this architecture does not fit the recipe
            failed.append((base, e))
            continue
        runs.append((v, s.assigned))
        revision = revision or s.revision
    if len(runs) < 2:
        raise refusal(failed) if not runs else failed[-1][1]
    a = runs[0][0]
    for b, _ in runs[1:]:
        for key in a:
            if key not in ("model", "model_class", "model_lacks", "pipeline_layouts") and json.dumps(
                    a[key], sort_keys=True) != json.dumps(b.get(key), sort_keys=True):
                raise ValueError(f"`{key}` follows the checkpoint's values")
    precision_written = {f.name for f in dc_fields(MixedPrecisionConfig)} if "mixed_precision" in a else set()
    stated = {f for f in set.intersection(*(assigned for _, assigned in runs))
              if f in a["model"] and all(a["model"][f] == b["model"].get(f) for b, _ in runs[1:])}
    a["from_checkpoint"] = {"hf": hf}
    if revision:
        a["from_checkpoint"]["revision"] = revision
    a["from_checkpoint"]["fields"] = [f for f in a["model"] if f not in stated and f not in precision_written]
    classes = checkpoint_classes(fn)
    if classes:
        a["from_checkpoint"]["classes"] = classes
    a["model"] = {f: x for f, x in a["model"].items() if f in stated}
    for key in ("model_class", "model_lacks", "pipeline_layouts"):
        a.pop(key, None)
    return a


def stable(text: str) -> str:
    """An error text with the elements of any Python set it prints sorted (a set's order
    changes from run to run) and a path into the installed package named from its
    `site-packages/` (where the environment lives is the machine's), so the generated files
    do not change with the run or the machine."""
    def sort(m):
        items = re.findall(r"'[^']*'", m.group(1))
        return "{" + ", ".join(sorted(items)) + "}"

    text = re.sub(r"[^\s'\"]*/site-packages/", "site-packages/", text)
    return re.sub(r"\{('[^']*'(?:, '[^']*')*)\}", sort, text)


def config_map() -> str:
    """recipes/hf_config_map.json: Bridge's config mapping (Hugging Face config key -> model
    field), which ovlaunch applies to a checkpoint config the user gives (`--hf-config`)."""
    from megatron.bridge.models.conversion.model_bridge import MegatronModelBridge

    doc = {"from": "megatron.bridge.models.conversion.model_bridge.MegatronModelBridge.CONFIG_MAPPING",
           "map": [list(pair) for pair in MegatronModelBridge.CONFIG_MAPPING]}
    return json.dumps(doc, indent=1) + "\n"


def checkpoint_missing(e: Exception) -> str | None:
    """The Hugging Face checkpoint whose config.json a recipe function could not read (none is
    shipped in tests/bridge/hf), or None for any other failure."""
    m = re.search(r"Failed to load configuration from (\S+) after", str(e)) or re.search(
        r"^(\S+/\S+) does not appear to have a file named config.json", str(e))
    if m:
        return m.group(1)
    if "couldn't connect to 'https://huggingface.co'" in str(e):
        return hub_repo(e) or "(a hub file)"
    return None


def hub_repo(e: Exception) -> str | None:
    """The hub repository Transformers' loader was asked for when it could not read a file
    (`AutoConfig.from_pretrained(NAME)` in a recipe that reads a checkpoint's config itself):
    the loader's `pretrained_model_name_or_path` argument, read from the failing call's frame."""
    seen = set()
    while e is not None and id(e) not in seen:  # the error and the errors it was raised from
        seen.add(id(e))
        for f in frames(e):
            name = f.f_locals.get("pretrained_model_name_or_path")
            if isinstance(name, str) and re.fullmatch(r"[\w.-]+/[\w.-]+", name):
                return name
        e = e.__cause__
    return None


def why(e: Exception) -> str:
    """Bridge's error as NOT_SHIPPED.md and a file's header state it: its type and first line."""
    return f"{type(e).__name__}: {stable(str(e)).splitlines()[0][:160] if str(e) else ''}"


def standin_errors(case: dict, last: Exception) -> list[tuple[str, Exception]]:
    """Bridge's error on each of a case's stand-in configs (`hf_config.configs`) built alone,
    for a case that none of them builds (`last`: the error `probe.build_case` reported)."""
    out = []
    for path in case["hf_config"]["configs"]:
        one = dict(case, hf_config=dict(case["hf_config"], configs=[path]))
        try:
            probe.build_case(one)
        except Exception as e:  # noqa: BLE001 - the error this stand-in gets
            out.append((str(Path(path).parent.relative_to(probe.HERE / "hf")), e if fits(one, path) else None))
    return out if any(e is not None for _, e in out) else [(case["hf_config"]["hf"], last)]


def fits(case: dict, path: str) -> bool:
    """Whether the stand-in config at `path` can hold what the case's function asks of its
    model: not when the function, run on it, places experts (`expert_model_parallel_size` above
    one) on a model the config gave no experts (`num_moe_experts`), which Megatron-Core refuses
    for the stand-in's sake, not the function's. True when the function fails on it (its own
    error)."""
    name = probe.parse_argv(case["argv"])[0]
    fitted = probe.fitted_standin(case, case["hf_config"], path)
    try:
        with probe.HubConfig(dict(case["hf_config"], config=fitted)):
            probe.ovlaunch_stubs.fake_gpu(case["gpu"])
            model = probe.load(name, probe.benchmark_metadata(name)).model
    except Exception:  # noqa: BLE001 - the function's own failure
        return True
    finally:
        if fitted != path:
            import shutil

            shutil.rmtree(Path(fitted).parent)
    return not ((getattr(model, "expert_model_parallel_size", 1) or 1) > 1 and getattr(model, "num_moe_experts", None) is None)


def generate_group(doc: dict, entries: list[tuple[str, object, list[str]]], fields: dict[str, list[str]],
                   ovlaunch: str, library: bool, head: list[str]) -> tuple[str | None, list[str], dict[str, str]]:
    """The recipe file of one group of Bridge functions (`entries`: name, function, other names),
    or None when none of them is shipped; the refused functions' header lines; and the functions
    whose checkpoint config is not at hand, with the checkpoint."""
    variants, refused, missing = [], [], {}
    g_task = doc.get("task")
    def from_standins(n, fn, aliases, hf):
        try:
            v = standin_variant(n, fn, fields, aliases, library, hf)
            # shipped only when Bridge's runner builds the job with a stand-in config of some
            # architecture at the checkpoint's name (what the Bridge proof checks)
            argv = ["--recipe", n]
            if v.get("task", g_task) == "peft":
                argv.append(f"checkpoint.pretrained_checkpoint={PRETRAINED}")
            case = {"argv": argv, "world_size": v["num_gpus"],
                    "gpu": v["gpu"] if v["gpu"] != "any" else "h100", "env": {},
                    "hf_config": {"hf": hf, "revision": v["from_checkpoint"].get("revision"),
                                  "configs": [str(probe.HERE / "hf" / c / "config.json") for c in PROOF_STANDINS]}}
            try:
                probe.build_case(case)
            except Exception as e:  # noqa: BLE001 - lifted by a value the user brings, or not
                needs, e = user_values(lambda words: probe.build_case(dict(case, argv=words)), argv, e)
                if needs is None:
                    raise refusal(standin_errors(case, e)) from None
                v = standin_variant(n, fn, fields, aliases, library, hf, needs)
            variants.append(v)
        except RefusedWhateverConfig as e:  # Bridge's own refusal, whatever the checkpoint
            refused.extend(f"#   {x}: {why(e.error)} (the same with stand-in configs of "
                           f"{len(e.architectures)} architectures: {', '.join(e.architectures)})"
                           for x in (n, *aliases))
        except Exception as e:  # noqa: BLE001 - the reason goes into NOT_SHIPPED.md
            missing.update({x: (hf, why(e)) for x in (n, *aliases)})

    for n, fn, aliases in entries:
        try:
            m = name_meta(n, fn)
        except Exception as e:  # noqa: BLE001 - a generic library name whose function fails to build
            hf = checkpoint_missing(e)
            if hf is None:
                raise
            from_standins(n, fn, aliases, hf)
            continue
        if not library and m["hardware"] not in GPU_KINDS:
            continue  # accounted for in NOT_SHIPPED.md
        argv = ["--recipe", n]
        if m["task"] == "peft":
            argv.append(f"checkpoint.pretrained_checkpoint={PRETRAINED}")
        # a function Bridge's own runner refuses at its own GPU count (its validation, its
        # expert grid check) is not shipped: the header lists it with Bridge's reason; one it
        # refuses only for want of a value the user brings is shipped, requiring it
        case = {"argv": argv, "world_size": int(m["num_gpus"]),
                "gpu": m["hardware"] if m["hardware"] != "any" else "h100", "env": {}}
        needs = None
        try:
            probe.build(case)
        except Exception as e:  # noqa: BLE001 - the reason goes into the file
            hf = checkpoint_missing(e)
            if hf is not None:
                from_standins(n, fn, aliases, hf)
                continue
            needs, e = user_values(lambda words: probe.build(dict(case, argv=words)), argv, e)
            if needs is None:
                refused.extend(f"#   {x}: {why(e)}" for x in (n, *aliases))
                continue
        variants.append(variant_of(n, fn, fields, aliases, library, needs))
    if not variants:
        return None, refused, missing
    if refused:
        head.append("# Not shipped: functions Bridge's own runner refuses at their own GPU count:")
        head.extend(refused)
    state_env(variants, rules_env(ovlaunch, doc, variants))
    doc.update(factor(variants))
    doc["variants"] = variants
    return "\n".join(head + emit(doc)) + "\n", refused, missing


def generate(name: str, fields: dict[str, list[str]], ovlaunch: str) -> tuple[str | None, list[str]]:
    """The recipe file of one model of MODELS, or None when Bridge's runner refuses every
    function (they are then listed in NOT_SHIPPED.md); and the refused functions' lines."""
    prefix, family, meta = MODELS[name]
    module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
    fns = sorted(n for n in dir(module) if n.startswith(prefix) and n.endswith("_config"))
    entries = [(n, getattr(module, n), []) for n in fns
               if (m := probe.BENCHMARK_NAME.search(n)) and m["task"] == "pretrain"]
    import importlib.metadata as md

    head = [
        f"# {meta['description']}: Megatron-Bridge {md.version('megatron-bridge')} performance recipes",
        "# (megatron.bridge.perf_recipes). GENERATED by tests/bridge/gen_recipes.py from Bridge's package:",
        "# do not edit; regenerate. Values shared by every variant are at the top level.",
        "# env_vars: only what ovlaunch's env rules do not derive (a value where Bridge's recipe differs",
        "# from a rule or no rule sets it; {inherit: true} where Bridge's recipe lacks a variable a rule sets).",
    ]
    doc = {
        "name": name,
        "aliases": meta["aliases"],
        "description": f"{meta['description']} (Megatron-Bridge performance recipe)",
        "family": meta["family"],
        "task": "pretrain",
        "bridge_recipe": f"{name}_pretrain_config",
    }
    text, refused, _ = generate_group(doc, entries, fields, ovlaunch, False, head)
    return text, refused


TASK_WORDS = {"pretrain": "pretraining", "sft": "full fine-tuning (SFT)", "peft": "parameter-efficient fine-tuning (PEFT)"}

# The pretrained checkpoint the generator hands a PEFT function (Bridge asserts the path exists).
PRETRAINED = tempfile.mkdtemp(prefix="ovlaunch-pretrained-")


def catalogue_groups() -> list[dict]:
    """Every recipe function Bridge's runner accepts that MODELS does not cover, grouped into
    recipe files: one per (model, task) of the performance recipes (`<model>_<task>_perf`, or
    `<model>` for pretraining) and of the library recipes (`<model>_<task>`). A function the
    library exports under several names is one variant with `bridge_aliases`; a name the runner
    resolves to a performance recipe first is that recipe."""
    import megatron.bridge.recipes as library

    groups: dict[tuple[str, str, str], dict] = {}
    perf_names = set()
    for family in FAMILIES:
        module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
        for n in sorted(x for x in dir(module) if x.endswith("_config") and callable(getattr(module, x))):
            if probe.benchmark_metadata(n) is None or probe.benchmark_metadata(n)["family"] != family:
                continue
            perf_names.add(n)
            if any(n.startswith(prefix) for prefix, _, _ in MODELS.values()) and probe.BENCHMARK_NAME.search(n)["task"] == "pretrain":
                continue  # a MODELS file
            m = probe.BENCHMARK_NAME.search(n)
            key = ("perf", model_key(n), m["task"])
            g = groups.setdefault(key, {"family": family, "functions": {}})
            g["functions"][n] = (getattr(module, n), [])
    by_fn: dict[int, list[str]] = {}
    for n in sorted(dir(library)):
        fn = getattr(library, n)
        if not n.endswith("_config") or not callable(fn) or n in perf_names or not re.search(r"_(pretrain|sft|peft)_", n):
            continue
        by_fn.setdefault(id(fn), []).append(n)
    for names in by_fn.values():
        named = [n for n in names if probe.BENCHMARK_NAME.search(n)] or names
        canonical = named[0]
        fn = getattr(library, canonical)
        task = re.search(r"_(pretrain|sft|peft)_", canonical).group(1)
        key = ("library", model_key(canonical), task)
        g = groups.setdefault(key, {"family": fn.__module__.split(".")[3], "functions": {}})
        g["functions"][canonical] = (fn, [n for n in names if n != canonical])
    out = []
    for (source, model, task), g in sorted(groups.items()):
        if source == "perf":
            name = model if task == "pretrain" else f"{model}_{task}_perf"
        else:
            name = f"{model}_{task}"
        out.append(dict(name=name, source=source, model=model, task=task, family=g["family"],
                        entries=[(n, fn, aliases) for n, (fn, aliases) in sorted(g["functions"].items())]))
    return out


def generate_catalogue_file(g: dict, fields, ovlaunch):
    import importlib.metadata as md

    library = g["source"] == "library"
    where = "library recipes (megatron.bridge.recipes)" if library else "performance recipes (megatron.bridge.perf_recipes)"
    head = [
        f"# {g['model']} {TASK_WORDS[g['task']]}: Megatron-Bridge {md.version('megatron-bridge')} {where}.",
        "# GENERATED by tests/bridge/gen_recipes.py from Bridge's package: do not edit; regenerate.",
        "# Values shared by every variant are at the top level. env_vars: only what ovlaunch's env rules",
        "# do not derive ({inherit: true} where Bridge's recipe lacks a variable a rule sets).",
    ]
    doc = {
        "name": g["name"],
        "aliases": [g["name"].replace("_", "-")],
        "description": f"{g['model']} {TASK_WORDS[g['task']]} (Megatron-Bridge {'library' if library else 'performance'} recipe)",
        "family": g["family"],
        "task": g["task"],
    }
    if library:
        doc["kind"] = "library"
    return generate_group(doc, g["entries"], fields, ovlaunch, library, head)


def model_key(fn_name: str) -> str:
    """`llama3_8b` for `llama3_8b_pretrain_8gpu_h100_bf16_config` (and `llama3_8b_pretrain_config`)."""
    return fn_name[: re.search(r"_(pretrain|sft|peft)_", fn_name).start()]


def not_shipped(records: list[tuple[str, str, str]]) -> str:
    """recipes/NOT_SHIPPED.md: every recipe function Bridge's runner accepts that ovlaunch does
    not ship, by model, with the reason. `records`: (model, reason, function)."""
    import importlib.metadata as md

    groups: dict[tuple[str, str], list[str]] = {}
    for model, why, n in records:
        groups.setdefault((model, why.rstrip(".")), []).append(n)
    out = [
        f"# Megatron-Bridge {md.version('megatron-bridge')} recipe functions ovlaunch does not ship",
        "",
        "GENERATED by `tests/bridge/gen_recipes.py` from Bridge's package (`megatron.bridge.perf_recipes`,",
        "`megatron.bridge.recipes`): do not edit; regenerate. Every recipe function Bridge's runner accepts",
        "is either a variant of a recipe file here or below, with the reason.",
        "",
    ]
    total = 0
    for (model, why), names in sorted(groups.items()):
        total += len(names)
        out.append(f"- `{model}` ({len(names)} function{'s' if len(names) > 1 else ''}): {why}.")
        out.extend(f"  - `{n}`" for n in sorted(names))
    out.append("")
    out.append(f"{total} functions in all.")
    return "\n".join(out) + "\n"


def refused_records(model: str, lines: list[str]) -> list[tuple[str, str, str]]:
    out = []
    for line in lines:
        n, why = line.removeprefix("#   ").split(": ", 1)
        out.append((model, f"Bridge's own runner refuses it at its own GPU count: {why}", n))
    return out


def missing_records(model: str, missing: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    return [(model, f"builds its model from the Hugging Face checkpoint `{hf}`, whose config.json ovlaunch does "
                    f"not ship (tests/bridge/hf), and Bridge does not build it with a stand-in config: {why}", n)
            for n, (hf, why) in missing.items()]


def gpu_records(model: str, entries) -> list[tuple[str, str, str]]:
    out = []
    for n, _, _ in entries:
        hw = probe.BENCHMARK_NAME.search(n)["hardware"]  # performance recipes: always named
        if hw not in GPU_KINDS:
            out.append((model, f"GPU kind `{hw}` is not in ovlaunch's hardware table (hardware/gpus.yaml)", n))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fields", required=True)
    ap.add_argument("--ovlaunch", required=True, help="an ovlaunch binary built from this tree")
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--only", nargs="*", help="these recipe files only (a MODELS name or a catalogue file's name); "
                    "recipes/NOT_SHIPPED.md is left as it is")
    args = ap.parse_args()
    fields: dict[str, list[str]] = {}
    section = None
    for line in Path(args.fields).read_text().splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            section = line[:-1]
            fields[section] = []
        elif line.strip():
            fields[section].append(line.strip())
    bad = 0

    def put(path: Path, text: str | None) -> None:
        nonlocal bad
        bad |= generated.put(path, text, check=args.check, generator="gen_recipes.py",
                             stale="out of date with the installed Megatron-Bridge")

    records: list[tuple[str, str, str]] = []
    for name in [n for n in MODELS if args.only is None or n in args.only]:
        text, refused = generate(name, fields, args.ovlaunch)
        put(Path(args.out) / f"{name}.yaml", text)
        prefix, family, _ = MODELS[name]
        module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
        fns = [(n, None, []) for n in dir(module) if n.startswith(prefix) and n.endswith("_config")
               and probe.BENCHMARK_NAME.search(n) and probe.BENCHMARK_NAME.search(n)["task"] == "pretrain"]
        records += refused_records(name, refused) + gpu_records(name, fns)
    for g in catalogue_groups():
        if args.only is not None and g["name"] not in args.only:
            continue
        text, refused, missing = generate_catalogue_file(g, fields, args.ovlaunch)
        put(Path(args.out) / f"{g['name']}.yaml", text)
        records += refused_records(g["model"], refused) + missing_records(g["model"], missing)
        if g["source"] == "perf":
            records += gpu_records(g["model"], g["entries"])
    if args.only is None:
        put(Path(args.out) / "NOT_SHIPPED.md", not_shipped(records))
        put(Path(args.out) / "hf_config_map.json", config_map())
    return bad


if __name__ == "__main__":
    sys.exit(main())
