"""Generate ovlaunch's table of Megatron-Bridge's pass-through config sections
(crates/ovlaunch-core/src/config/bridge_fields.rs) and of its model provider classes' fields
(crates/ovlaunch-core/src/config/provider_fields.rs) from Bridge's own classes.

The sections are every section of Bridge's ConfigContainer that ovlaunch does not resolve
(checked: `check_container_sections`): `scheduler`, `dataset`, `tokenizer`, `checkpoint`,
`logger`, `profiling`, `validation`, `rng`, `rerun_state_machine`, `dist`, and the ones the
recipes leave None (`OPTIONAL`: `ft`, `straggler`, `nvrx_straggler`, `tensor_inspect`,
`inprocess_restart`). For each, every field a
user may set (the class's `__init__` fields; fields Bridge computes, private fields and object
fields are left out) is written with its type, mapped to the small type language of
`config::bridge`. The class is the one Bridge's pretraining performance recipes put in that
section (checked below for every shipped recipe function), so a key path ovlaunch accepts is a
key path of the class the trainer holds. Each class a shipped function holds in a section (the
pretraining ones, held by every function, performance and library, every task; a fine-tuning
dataset, LoRA) lists the values every function holding it holds alike (`recipe`) and, for every
field whose value differs between them, the value most of them hold (`usual`); each function's
row of `HOLDS` states its own values where they are not the usual ones (`values`), so every
shipped function's plan knows the values it holds (GPT-OSS 20B's own scheduler, GLM-5.2's
long-context SFT functions' own `dataset_root`), each stated once, and ovlaunch's checks of
Bridge's section rules read them (`config::bridge::Holder::value`).

Every function a shipped recipe file names (performance and library, every task) is built as
Bridge's runner loads it (`probe.load`: a performance recipe's SFT or PEFT function with the text
forward step holds the runner's mock pretraining data, `MockGPTDatasetConfig`, in place of its
own dataset, `run_recipe._apply_benchmark_dataset_defaults`), and
what it holds is written where it is not its task's classes (`HOLDS`, indexed by `HELD_BY`): a
vision-language or audio fine-tuning function's `DirectHFSFTDatasetConfig`, Nemotron Nano V2 VL's
`VLMLoRA`, the Qwen VL pretraining functions' mock VLM dataset, Step 3.7's and Wan's data classes,
each a section const of its own; and, for every field whose type is a Bridge dataclass (or a union
of them), the class it holds there or None (`dataset.hf_dataset`, `dataset.preprocessing`), whose
fields are tabled too (`NESTED`), so a nested path is typed by the object the trainer holds. No
function is left out: a class none of these tables hold cannot occur, since the tables are what
the functions hold. With them, Bridge's named dataset presets and schema adapters
(`HF_DATASET_PRESETS`, `HF_SCHEMA_ADAPTERS`), which ovlaunch's plan-time checks of a Hugging Face
source read.

The provider table: every model provider class of the package (the dataclass subclasses of
`ModelProviderMixin` under `megatron.bridge.models` and Bridge's diffusion models), each with the
fields declared in its own class body (its `__annotations__`, so a field a subclass re-declares
takes the subclass's type) and its dataclass bases in method-resolution order; a field is looked
up in the class, then its bases, as Python does. Each field's type is the annotation mapped to
`config::bridge_schema::Ty` (a union of the mapped members; a default whose type the annotation does not
state, like Gemma 3's `window_size: tuple = 512`, adds its own type), with the annotation's text
for messages; a field a user cannot write (a callable, a module spec, a process group, a
configuration object, a private or computed field) is `Ty::Object`.

Usage (the interpreter is the Bridge venv's, see .ci/bridge-venv.sh):
    python tests/bridge/gen_sections.py --out crates/ovlaunch-core/src/config/bridge_fields.rs --providers crates/ovlaunch-core/src/config/provider_fields.rs          # write
    python tests/bridge/gen_sections.py --out crates/ovlaunch-core/src/config/bridge_fields.rs --providers crates/ovlaunch-core/src/config/provider_fields.rs --check  # compare only
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import dataclasses
import importlib
import importlib.metadata as md
import os
import sys
import types
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe  # noqa: E402  (sets up the offline hub and the stand-ins)
import gen_recipes  # noqa: E402  (the Bridge proof's stand-in checkpoint configs)
from generated import put  # noqa: E402

from megatron.bridge.training import config as C  # noqa: E402
from megatron.bridge.training.tokenizers.config import TokenizerConfig  # noqa: E402

# section -> (class, Bridge module path of the class, whether the recipes leave it None)
SECTIONS = {
    "scheduler": C.SchedulerConfig,
    "dataset": C.GPTDatasetConfig,
    "tokenizer": TokenizerConfig,
    "checkpoint": C.CheckpointConfig,
    "logger": C.LoggerConfig,
    "profiling": C.ProfilingConfig,
    "ft": C.FaultToleranceConfig,
    # the sections every ConfigContainer holds by default (a recipe function may change their
    # values), then the optional ones the recipes leave None (`OPTIONAL`), as `ft`
    "validation": C.ValidationConfig,
    "rng": C.RNGConfig,
    "rerun_state_machine": C.RerunStateMachineConfig,
    "dist": C.DistributedInitConfig,
    "straggler": C.StragglerDetectionConfig,
    "nvrx_straggler": C.NVRxStragglerDetectionConfig,
    "tensor_inspect": C.TensorInspectConfig,
    "inprocess_restart": C.InProcessRestartConfig,
}
# The sections Bridge's recipes leave None (checked for every shipped function): a `--set`
# of one of their fields makes Bridge build the class with its defaults and that field.
OPTIONAL = ("ft", "straggler", "nvrx_straggler", "tensor_inspect", "inprocess_restart")
# ConfigContainer's fields that are neither ovlaunch's typed sections nor pass-through ones:
# `optimizer_config_override_provider` has no field a user can set (checked in `main`).
NOT_SECTIONS = ("optimizer_config_override_provider",)

# Fields the user does not set: Megatron-Core's internal copy of the sequence length (Bridge's
# `seq_length` is the one it reads and writes back, `GPTDatasetConfig.to_cfg_dict`), and the
# tokenizer object the trainer builds itself.
SKIP = {("dataset", "sequence_length"), ("dataset", "tokenizer")}


def ty(t) -> tuple[str, bool]:
    """(Rust `Ty` expression, nullable) for a Python annotation."""
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) == 1:
            inner, _ = ty(rest[0])
            return inner, nullable
        if set(rest) == {str, list[str]}:
            return "Ty::StrOrList", nullable
        if dataclass_members(t):
            return "Ty::Union(&[" + ", ".join(ty(m)[0] for m in rest) + "])", nullable
        return "Ty::Any", nullable
    if t is bool:
        return "Ty::Bool", False
    if t is int:
        return "Ty::Int", False
    if t is float:
        return "Ty::Float", False
    if t is str:
        return "Ty::Str", False
    if origin is typing.Literal:
        if all(isinstance(a, str) for a in args):
            return "Ty::Choice(&[" + ", ".join(f'"{a}"' for a in args) + "])", False
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return "Ty::IntChoice(&[" + ", ".join(str(a) for a in args) + "])", False
    if origin is list and len(args) == 1:
        if args[0] is int:
            return "Ty::IntList", False
        if args[0] is str:
            return "Ty::StrList", False
    if origin is dict and args == (str, str):
        return "Ty::StrMap", False
    if isinstance(t, type) and dataclasses.is_dataclass(t):
        return f'Ty::Dataclass("{t.__module__}.{t.__qualname__}")', False
    return "Ty::Any", False


# Fields Bridge's code reads wider than their annotation says, each with the type that reads
# them and why. `dataset.data_path` (`str | list[str]`): `GPTDatasetConfig.finalize` hands the
# list to Megatron-Core's `datasets/utils.py get_blend_from_list`, which takes every other
# item of an even-length list as a weight with `float()`, so a weight written as a number
# (`[0.3, /a, 0.7, /b]`, as Hydra reads it on the runner's line) trains the blend it says.
WIDER = {("dataset", "data_path"): ("Ty::StrOrList", "Ty::PathsWithWeights")}


def fields_of(section: str, cls) -> list[tuple[str, str, bool]]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_") or (section, f.name) in SKIP:
            continue
        t, nullable = ty(hints.get(f.name, f.type))
        if (section, f.name) in WIDER:
            annotated, wider = WIDER[(section, f.name)]
            # the annotation the table widens, so a new one in the package is looked at again
            assert t == annotated, f"{section}.{f.name}: annotated {t}, WIDER expects {annotated}"
            t = wider
        # a None default makes the field nullable whatever the annotation says
        if f.default is None:
            nullable = True
        out.append((f.name, t, nullable))
    return out


_SHIPPED: list = []


def shipped_configs():
    """(function name, ConfigContainer) for every performance recipe function the catalogue
    ships, each built on its own (faked) GPU kind, once. A model of the generator's list without
    a recipe file (Bridge's runner refuses all its functions: recipes/NOT_SHIPPED.md) is not shipped."""
    if not _SHIPPED:
        _SHIPPED.extend(_build_shipped())
    return _SHIPPED


def _build_shipped():
    recipes = Path(__file__).resolve().parents[2] / "recipes"
    for name, (prefix, family, _) in gen_recipes.MODELS.items():
        if not (recipes / f"{name}.yaml").exists():
            continue
        module = importlib.import_module(f"megatron.bridge.perf_recipes.{family}")
        for fn in sorted(n for n in dir(module) if n.startswith(prefix) and n.endswith("_config")):
            m = probe.BENCHMARK_NAME.search(fn)
            if not m or m["hardware"] not in gen_recipes.GPU_KINDS:
                continue
            probe.ovlaunch_stubs.fake_gpu(m["hardware"])
            yield fn, getattr(module, fn)()


# Fine-tuning: the classes Bridge's SFT and PEFT recipe functions hold by default in `dataset`
# and `peft` (a recipe function the catalogue does not name is typed by these), and the PEFT
# schemes a user may choose. (const, section, class path, tasks it types)
FINE_TUNING = [
    ("DATASET_SFT", "dataset", "megatron.bridge.data.builders.gpt_sft.GPTSFTDatasetConfig", ("sft", "peft")),
    ("PEFT_LORA", "peft", "megatron.bridge.peft.lora.LoRA", ("peft",)),
    ("PEFT_DORA", "peft", "megatron.bridge.peft.dora.DoRA", ()),
]
PEFT_SCHEMES = {"lora": "PEFT_LORA", "dora": "PEFT_DORA"}
# Every other class a shipped recipe function holds in a pass-through section gets its own
# const, named here (a class not named here: `SECTION_CLASS_NAME`).
CONST_NAMES = {
    "megatron.bridge.data.builders.direct_hf_sft.DirectHFSFTDatasetConfig": "DATASET_DIRECT_HF_SFT",
    "megatron.bridge.data.builders.mock_vlm_sft.MockVLMSFTDatasetConfig": "DATASET_MOCK_VLM_SFT",
    "megatron.bridge.training.config.MockGPTDatasetConfig": "DATASET_MOCK_GPT",
    "megatron.bridge.diffusion.data.wan.wan_energon_datamodule.WanDatasetConfig": "DATASET_WAN",
    "megatron.bridge.models.stepfun.data.flickr8k.provider.Step37Flickr8kSFTDataProvider": "DATASET_STEP37_FLICKR8K",
    "megatron.bridge.peft.lora.VLMLoRA": "PEFT_VLM_LORA",
}


def _class(path: str):
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def class_path(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def recipe_functions():
    """(family, task, function, ConfigContainer) for every function a shipped recipe file names
    (performance and library, every task), each built on its own (faked) GPU kind."""
    import yaml

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    for f in sorted(recipes.glob("*.yaml")):
        t = yaml.safe_load(f.read_text())
        task = t.get("task") or "pretrain"
        for v in t.get("variants", []):
            fn = v["bridge_recipe"]
            probe.ovlaunch_stubs.fake_gpu(v["gpu"] if v["gpu"] != "any" else "h100")
            yield t.get("family"), task, fn, load_function(fn, v.get("from_checkpoint") or t.get("from_checkpoint"))


def load_function(fn: str, checkpoint: dict | None):
    """A recipe function's ConfigContainer; one whose checkpoint config the repository does not
    ship is built on the Bridge proof's stand-in configs at the checkpoint's name, tried in turn
    (its pass-through sections do not depend on the model's shape)."""
    if checkpoint is None:
        return probe.load(fn, probe.benchmark_metadata(fn))
    last = None
    for c in gen_recipes.PROOF_STANDINS:
        spec = {"hf": checkpoint["hf"], "revision": checkpoint.get("revision"),
                "config": str(probe.HERE / "hf" / c / "config.json")}
        try:
            with probe.HubConfig(spec):
                return probe.load(fn, probe.benchmark_metadata(fn))
        except Exception as e:  # noqa: BLE001 - the next stand-in may fit
            last = e
    raise last


def dataclass_members(t) -> list:
    """The Bridge dataclasses a field's annotation names (`A | None`, `A | B`), else []."""
    origin = typing.get_origin(t)
    members = typing.get_args(t) if origin in (typing.Union, types.UnionType) else (t,)
    members = [m for m in members if m is not type(None)]
    if members and all(isinstance(m, type) and dataclasses.is_dataclass(m) for m in members):
        return members
    return []


def nested_held(prefix: str, obj, out: dict, empty: dict) -> None:
    """Every field of `obj` whose type is a Bridge dataclass (or a union of them), by its path
    under `prefix`: the class `obj` holds there, or None; and for an object held there, the
    fields it leaves None (`empty`, what Bridge's checks of it read as unset); recursively."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        if not f.init or f.name.startswith("_") or not dataclass_members(hints.get(f.name, f.type)):
            continue
        v = getattr(obj, f.name)
        path = f"{prefix}.{f.name}"
        out[path] = None if v is None else class_path(type(v))
        if v is not None:
            empty[path] = tuple(g.name for g in dataclasses.fields(v)
                                if g.init and not g.name.startswith("_") and getattr(v, g.name) is None)
            nested_held(path, v, out, empty)


_HELD: list = []


def held() -> list[tuple[str, str, str, dict[str, str], dict[str, str | None], dict[str, tuple]]]:
    """(family, task, function, section -> class held, nested path -> class held or None,
    nested path -> the fields the object held there leaves None) for every shipped recipe
    function, with the held objects' values kept per class (`_VALUES`)."""
    if _HELD:
        return _HELD
    for family, task, fn, cfg in recipe_functions():
        sections, nested, empty = {}, {}, {}
        for section in list(SECTIONS) + ["peft"]:
            obj = getattr(cfg, section, None)
            if obj is None:
                continue
            path = class_path(type(obj))
            sections[section] = path
            values = _VALUES.setdefault((section, path), {})
            own = _OWN.setdefault(fn, {}).setdefault((section, path), {})
            for name, _, _ in fields_of(section, type(obj)):
                v = json.dumps(probe.plain(getattr(obj, name)), sort_keys=True)
                values.setdefault(name, collections.Counter())[v] += 1
                own[name] = v
            nested_held(section, obj, nested, empty)
        for section in RESOLVED:
            _RESOLVED_HELD.setdefault(section, {}).setdefault(type(getattr(cfg, section)), []).append(fn)
        _HELD.append((family, task, fn, sections, nested, empty))
    return _HELD


# section of `RESOLVED` -> class -> the functions holding it there
_RESOLVED_HELD: dict[str, dict[type, list[str]]] = {}
# (section, class) -> field -> how many functions holding the class hold each value (JSON text)
_VALUES: dict[tuple[str, str], dict[str, collections.Counter]] = {}
# function -> (section, class) -> field -> the value it holds (JSON text)
_OWN: dict[str, dict[tuple[str, str], dict[str, str]]] = {}


def default_classes(task: str) -> dict[str, str]:
    """The classes a function of `task` holds unless the table says otherwise (`Holder`)."""
    out = {s: class_path(c) for s, c in SECTIONS.items() if s not in OPTIONAL}
    for _, section, path, tasks in FINE_TUNING:
        if task in tasks:
            out[section] = path
    return out


def fine_tuning_facts() -> tuple[list[str], dict[tuple[str, str], dict[str, str]]]:
    """Problems (an SFT function holding peft, a function setting ft), and per class a shipped
    function holds in a section ((section, class) -> values every function holding it holds
    alike; a value naming the working directory is left out: Bridge derives it at run time)."""
    problems = []
    for _, task, fn, sections, _, _ in held():
        if task == "sft" and "peft" in sections:
            problems.append(f"{fn}: an SFT function holds peft")
        for s in OPTIONAL:
            if s in sections:
                problems.append(f"{fn}: sets {s} (ovlaunch assumes Bridge's recipes leave it None)")
    common: dict[tuple[str, str], dict[str, str]] = {}
    for key, fields in _VALUES.items():
        common[key] = {n: next(iter(v)) for n, v in fields.items() if len(v) == 1 and os.getcwd() not in next(iter(v))}
    return problems, common


def usual_values() -> dict[tuple[str, str], dict[str, str]]:
    """Per class a shipped function holds in a section (the pretraining classes too: every
    function holds them, performance and library, every task), for every field whose value
    differs between the functions holding it: the value most of them hold (ties: the first JSON
    text), which a function of `HOLDS` holds unless it states its own (`own_values`) or Bridge
    derives its value from the working directory at run time (`derived`); those values are not
    counted."""
    held()
    out: dict[tuple[str, str], dict[str, str]] = {}
    for key, fields in _VALUES.items():
        out[key] = {}
        for name, counts in fields.items():
            known = {v: n for v, n in counts.items() if os.getcwd() not in v}
            if len(counts) > 1 and known:
                out[key][name] = min(known.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return out


def own_values(fn: str, usual: dict[tuple[str, str], dict[str, str]]) -> tuple[tuple[str, str], ...]:
    """(section.field, value) for every field of a class `fn` holds where its value is not the
    usual one (`usual_values`): the function's own statement."""
    out = []
    for (section, path), fields in sorted(_OWN.get(fn, {}).items()):
        for name, v in fields.items():
            most = usual.get((section, path), {}).get(name)
            if most is not None and v != most and os.getcwd() not in v:
                out.append((f"{section}.{name}", v))
    return tuple(out)


def derived(fn: str, usual: dict[tuple[str, str], dict[str, str]]) -> tuple[str, ...]:
    """The fields (section.field) with a usual value where `fn` holds a value naming the working
    directory (a checkpoint or log directory Bridge derives from it at run time): the plan
    does not know them (`Holds::derived`)."""
    return tuple(f"{section}.{name}" for (section, path), fields in sorted(_OWN.get(fn, {}).items())
                 for name, v in fields.items()
                 if os.getcwd() in v and name in usual.get((section, path), {}))


def check_recipe_classes() -> list[str]:
    """Every shipped performance recipe function holds exactly these classes (and no `ft`)."""
    problems = []
    for fn, cfg in shipped_configs():
        for section, cls in SECTIONS.items():
            v = getattr(cfg, section)
            if section in OPTIONAL:
                if v is not None:
                    problems.append(f"{fn}: sets {section} (ovlaunch assumes Bridge's recipes leave it None)")
            elif type(v) is not cls:
                problems.append(f"{fn}: {section} is a {type(v).__name__}, not a {cls.__name__}")
    return problems


# ovlaunch's own typed sections (`config::TYPED`), which it resolves itself
TYPED = ("env_vars", "train", "model", "optimizer", "ddp", "comm_overlap", "mixed_precision")


def check_container_sections() -> list[str]:
    """Every field of Bridge's ConfigContainer is a typed section, a pass-through one or `peft`,
    or one with no field a user can set (`NOT_SECTIONS`): no section of the trainer's config
    is refused as unknown."""
    problems = []
    for f in dataclasses.fields(C.ConfigContainer):
        if not f.init or f.name.startswith("_") or f.name in TYPED or f.name in SECTIONS or f.name == "peft":
            continue
        if f.name in NOT_SECTIONS:
            cls = typing.get_type_hints(C.ConfigContainer)[f.name]
            if any(g.init and not g.name.startswith("_") for g in dataclasses.fields(cls)):
                problems.append(f"ConfigContainer.{f.name}: {cls.__name__} has fields a user can set; add it to SECTIONS")
            continue
        problems.append(f"ConfigContainer.{f.name}: not a section ovlaunch knows; add it to SECTIONS")
    return problems


def rust_str(v: str) -> str:
    """A Rust raw string literal holding `v`."""
    hashes = "#"
    while f'"{hashes}' in v:
        hashes += "#"
    return f'r{hashes}"{v}"{hashes}'


def generate() -> str:
    problems, held_common = fine_tuning_facts()
    assert not problems, problems
    usual = usual_values()
    lines = [
        f"//! Megatron-Bridge {md.version('megatron-bridge')}'s pass-through config sections: every field a user may",
        "//! set, with its type, for every class a shipped recipe function holds there; the Bridge",
        "//! dataclasses their fields hold (`NESTED`); and which function holds which (`HOLDS`).",
        "//! GENERATED by tests/bridge/gen_sections.py from Bridge's config classes and recipe functions:",
        "//! do not edit; regenerate.",
        "",
        "use super::bridge_schema::{Holds, HfPreset, SectionDef, Field, Ty};",
        "",
    ]
    consts: dict[tuple[str, str], str] = {}
    for section, cls in SECTIONS.items():
        consts[(section, class_path(cls))] = section.upper()
        key = (section, class_path(cls))
        lines.extend(section_def(section.upper(), section, cls, held_common.get(key, {}), usual.get(key, {})))
    for const, section, path, _ in FINE_TUNING:
        consts[(section, path)] = const
        lines.extend(section_def(const, section, _class(path), held_common.get((section, path), {}), usual.get((section, path), {})))
    rows = held()
    for _, _, _, sections, _, _ in rows:
        for section, path in sorted(sections.items()):
            if (section, path) not in consts:
                const = CONST_NAMES.get(path) or f"{section.upper()}_{snake(path)}"
                consts[(section, path)] = const
                lines.extend(section_def(const, section, _class(path), held_common.get((section, path), {}), usual.get((section, path), {})))
    lines.extend(nested_defs(rows, consts))
    lines.append("/// Every field's full path, typed: `paths::SCHEDULER.max_steps` is `\"scheduler.max_steps\"`.")
    lines.append("pub mod paths {")
    for section, cls in SECTIONS.items():
        names = ", ".join(name for name, _, _ in fields_of(section, cls))
        camel = "".join(w.capitalize() for w in section.split("_"))
        lines.append(f"    crate::field_paths! {{ const {section.upper()}: {camel}Paths in {section} {{ {names} }} }}")
    lines.append("}")
    lines.append("")
    lines.append("/// All of them, in `ConfigContainer` order of ovlaunch's plan.")
    lines.append("pub const SECTIONS: &[SectionDef] = &[" + ", ".join(s.upper() for s in SECTIONS) + "];")
    lines.append("/// The sections Bridge's recipes leave None: a field set there reaches the trainer as the")
    lines.append("/// whole section, typed (`{_target_: class, field: value}`), as Hydra cannot set a field under None.")
    lines.append("pub const OPTIONAL: &[&str] = &[" + ", ".join(f'"{s}"' for s in OPTIONAL) + "];")
    lines.append("")
    lines.append("/// The classes a fine-tuning function the catalogue does not name holds, by task: (task, section).")
    pairs = [(t, c) for c, _, _, tasks in FINE_TUNING for t in tasks]
    lines.append("pub const TASK_SECTIONS: &[(&str, SectionDef)] = &[" + ", ".join(f'("{t}", {c})' for t, c in pairs) + "];")
    lines.append("")
    lines.append("/// The PEFT schemes a user may choose (`--set peft=NAME`), each Bridge's class.")
    lines.append("pub const PEFT_SCHEMES: &[(&str, SectionDef)] = &[" + ", ".join(f'("{k}", {v})' for k, v in PEFT_SCHEMES.items()) + "];")
    lines.append("")
    lines.extend(holds_table(rows, consts, usual))
    lines.extend(hf_presets())
    return "\n".join(lines) + "\n"


def hf_presets() -> list[str]:
    """Bridge's named Hugging Face dataset presets (`sources/hf.py`, `_HF_DATASET_PRESETS`) and
    schema adapters (`sources/hf_adapters.py`, `_ADAPTERS`), which `HFDatasetSourceConfig.validate`
    checks a source against."""
    from megatron.bridge.data.sources import hf, hf_adapters

    lines = ["",
             "/// Bridge's named Hugging Face dataset presets (`megatron/bridge/data/sources/hf.py`,",
             "/// `_HF_DATASET_PRESETS`), by name.",
             "pub const HF_DATASET_PRESETS: &[HfPreset] = &["]
    for name in sorted(hf._HF_DATASET_PRESETS):
        p = hf._HF_DATASET_PRESETS[name]
        splits = "None" if p.supported_splits is None else "Some(&[" + ", ".join(f'"{x}"' for x in p.supported_splits) + "])"
        aliases = ", ".join(f'("{a}", "{b}")' for a, b in sorted((p.split_aliases or {}).items()))
        required = ", ".join(f'"{k}"' for k in p.required_adapter_kwargs)
        lines.append(f'    HfPreset {{ name: "{name}", split: "{p.split}", supported_splits: {splits}, '
                     f"split_aliases: &[{aliases}], required_adapter_kwargs: &[{required}] }},")
    lines.append("];")
    lines.append("")
    lines.append("/// Bridge's Hugging Face schema adapters (`megatron/bridge/data/sources/hf_adapters.py`,")
    lines.append("/// `_ADAPTERS`), sorted.")
    lines.append("pub const HF_SCHEMA_ADAPTERS: &[&str] = &[" + ", ".join(f'"{a}"' for a in sorted(hf_adapters._ADAPTERS)) + "];")
    return lines


def snake(path: str) -> str:
    """`module.HFDatasetSourceConfig` -> `HF_DATASET_SOURCE_CONFIG`."""
    name = path.rsplit(".", 1)[1]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()


def nested_defs(rows, consts) -> list[str]:
    """A const per Bridge dataclass a section class's field holds (recursively), and `NESTED`."""
    seen: dict[str, type] = {}

    def walk(cls):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            for m in dataclass_members(hints.get(f.name, f.type)) if f.init else []:
                if class_path(m) not in seen:
                    seen[class_path(m)] = m
                    walk(m)

    for (_, path) in consts:
        walk(_class(path))
    lines = []
    names = []
    for path in sorted(seen):
        const = "NESTED_" + snake(path)
        names.append(const)
        lines.extend(section_def(const, path.rsplit(".", 1)[1], seen[path], {}))
    lines.append("/// The Bridge dataclasses a section's fields hold (`dataset.hf_dataset`), by class; a")
    lines.append("/// nested path (`dataset.hf_dataset.split`) is typed by the one the recipe's function holds.")
    lines.append("pub const NESTED: &[SectionDef] = &[" + ", ".join(names) + "];")
    lines.append("")
    return lines


def holds_table(rows, consts, usual) -> list[str]:
    """`HOLDS`: the functions holding alike, grouped; `HELD_BY`: function -> group, sorted.
    Every shipped function is in it (its values are its classes' usual ones but where it states
    its own), so a function it does not name is one whose values are not known."""
    groups: dict[tuple, list[str]] = {}
    for _, task, fn, sections, nested, empty in rows:
        default = default_classes(task)
        differing = tuple(sorted((s, p) for s, p in sections.items() if default.get(s) != p))
        # a section the task's classes have but the function leaves None (`peft` never is)
        missing = tuple(sorted(s for s in default if s not in sections))
        values = own_values(fn, usual)
        key = (differing, missing, tuple(sorted(nested.items())), tuple(sorted(empty.items())), values, derived(fn, usual))
        if differing or missing or nested or fn in _OWN:
            groups.setdefault(key, []).append(fn)
    lines = ["/// What Bridge's recipe functions hold where it is not their task's classes (`SECTIONS`,",
             "/// `TASK_SECTIONS`) or is a Bridge dataclass: the functions that hold alike, grouped.",
             "pub const HOLDS: &[Holds] = &["]
    index = []
    for i, ((differing, missing, nested, empty, values, unknown), fns) in enumerate(sorted(groups.items(), key=lambda kv: kv[1][0])):
        lines.append("    Holds {")
        lines.append("        sections: &[" + ", ".join(consts[sp] for sp in differing) + "],")
        lines.append("        none: &[" + ", ".join(f'"{m}"' for m in missing) + "],")
        lines.append("        nested: &[")
        for path, cls in nested:
            lines.append(f'            ("{path}", {"None" if cls is None else f"Some({chr(34)}{cls}{chr(34)})"}),')
        lines.append("        ],")
        lines.append("        nested_none: &[")
        for path, fields in empty:
            lines.append(f'            ("{path}", &[' + ", ".join(f'"{f}"' for f in fields) + "]),")
        lines.append("        ],")
        lines.append("        values: &[")
        for path, v in values:
            lines.append(f'            ("{path}", {rust_str(v)}),')
        lines.append("        ],")
        lines.append("        derived: &[" + ", ".join(f'"{p}"' for p in unknown) + "],")
        lines.append(f"        functions: {len(fns)},")
        lines.append("    },")
        index.extend((fn, i) for fn in fns)
    lines.append("];")
    lines.append("")
    lines.append("/// Every function of `HOLDS`, sorted, with its group's index there.")
    lines.append("pub const HELD_BY: &[(&str, usize)] = &[")
    for fn, i in sorted(index):
        lines.append(f'    ("{fn}", {i}),')
    lines.append("];")
    return lines


def section_def(const: str, section: str, cls, common: dict[str, str], usual: dict[str, str] | None = None) -> list[str]:
    lines = [f"/// `{section}`: `{cls.__module__}.{cls.__qualname__}`."]
    lines.append(f"pub(super) const {const}: SectionDef = SectionDef {{")
    lines.append(f'    name: "{section}",')
    lines.append(f'    class: "{cls.__module__}.{cls.__qualname__}",')
    fields = fields_of(section, cls)
    lines.append("    names: &[")
    for name, _, _ in fields:
        lines.append(f'        "{name}",')
    lines.append("    ],")
    order = [f[0] for f in fields]
    for key, values in (("recipe", common), ("usual", usual or {})):
        lines.append(f"    {key}: &[")
        for name, v in sorted(values.items(), key=lambda kv: order.index(kv[0])):
            lines.append(f'        ("{name}", {rust_str(v)}),')
        lines.append("    ],")
    lines.append("    fields: &[")
    for name, t, nullable in fields:
        lines.append(f'        Field {{ name: "{name}", ty: {t}, nullable: {str(nullable).lower()} }},')
    lines.append("    ],")
    lines.append("};")
    lines.append("")
    return lines


# ---- model provider classes -------------------------------------------------------------


def provider_classes() -> dict[str, type]:
    """Every model provider class of the package, by `module.Class`."""
    import pkgutil

    import megatron.bridge.models as models
    from megatron.bridge.models.model_provider import ModelProviderMixin

    for m in pkgutil.walk_packages(models.__path__, "megatron.bridge.models."):
        importlib.import_module(m.name)
    importlib.import_module("megatron.bridge.diffusion.models.wan.wan_provider")

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    return {
        f"{c.__module__}.{c.__qualname__}": c
        for c in subclasses(ModelProviderMixin)
        if dataclasses.is_dataclass(c)
    }


def _callable_names() -> tuple[frozenset, list[str]]:
    """The callable fields Bridge's override code writes as names, and those names
    (`omegaconf_utils._SERIALIZABLE_CALLABLE_FIELDS`, `activation_map.ACTIVATION_FUNC_MAP`)."""
    from megatron.bridge.training.utils import omegaconf_utils
    from megatron.bridge.utils import activation_map

    return omegaconf_utils._SERIALIZABLE_CALLABLE_FIELDS, sorted(activation_map.ACTIVATION_FUNC_MAP)


def _dtype_names() -> list[str]:
    """The names Bridge's override code turns back into a torch dtype (`str_to_dtype`)."""
    from megatron.bridge.utils import activation_map

    return sorted(activation_map.DTYPE_MAP)


SCALARS = {bool: ("Bool",), int: ("Int",), float: ("Float",), str: ("Str",)}


def pty(t) -> tuple[tuple, bool]:
    """(type, nullable) of an annotation, as nested tuples of `Ty` variants."""
    import enum

    import torch

    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if t is type(None):
        return ("Union", []), True
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in args
        members = []
        for a in args:
            if a is type(None):
                continue
            m, n = pty(a)
            nullable = nullable or n
            for x in m[1] if m[0] == "Union" else [m]:
                if x not in members:
                    members.append(x)
        return union(members), nullable
    if t in SCALARS:
        return SCALARS[t], False
    if origin is typing.Literal:
        if all(isinstance(a, bool) for a in args):
            return ("Bool",), False
        if all(isinstance(a, str) for a in args):
            return ("Choice", list(args)), False
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args):
            return ("IntChoice", list(args)), False
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return ("Choice", [m.name for m in t]), False
    if t is torch.dtype:
        return ("Choice", _dtype_names()), False
    if origin in (list, typing.List) or t in (list, typing.List):
        inner = pty(args[0])[0] if args else ("Any",)
        return {"Int": ("IntList",), "Str": ("StrList",), "Float": ("FloatList",)}.get(inner[0], ("List",)), False
    if origin in (tuple, typing.Tuple) or t in (tuple, typing.Tuple):
        if args and Ellipsis not in args and len(set(args)) == 1 and args[0] in (int, float):
            return (("IntTuple" if args[0] is int else "FloatTuple"), len(args)), False
        return ("List",), False
    if origin in (dict, typing.Dict) or t in (dict, typing.Dict):
        if args == (str, str):
            return ("StrMap",), False
        return ("Mapping",), False
    # a module spec names Python classes: only code builds one
    if isinstance(t, type) and t.__name__ == "ModuleSpec":
        return ("Object",), False
    if dataclasses.is_dataclass(t):
        return ("Mapping",), False
    if t is typing.Any or t is object:
        return ("Any",), False
    return ("Object",), False


def union(members: list[tuple]) -> tuple:
    writable = [m for m in members if m != ("Object",)]
    if not writable:
        return ("Object",)
    if ("Any",) in writable:
        return ("Any",)
    if len(writable) == 1:
        return writable[0]
    if sorted(writable) == [("Str",), ("StrList",)]:
        return ("StrOrList",)
    return ("Union", writable)


def accepts(ty: tuple, v) -> bool:
    """Whether `ty` takes the Python value `v` (as `config::bridge::check` does its JSON form)."""
    kind = ty[0]
    if kind == "Bool":
        return isinstance(v, bool)
    if kind == "Int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "Float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if kind == "Str":
        return isinstance(v, str)
    if kind == "Union":
        return any(accepts(m, v) for m in ty[1])
    if kind in ("List", "IntList", "StrList", "FloatList", "IntTuple", "FloatTuple"):
        return isinstance(v, (list, tuple))
    return True


def annotation(cls, name: str, raw):
    """The field's annotation, resolved in its class's module (a string one too)."""
    try:
        return typing.get_type_hints(cls)[name]
    except Exception:  # noqa: BLE001 - a forward reference the module cannot resolve
        pass
    if not isinstance(raw, str):
        return raw
    module = sys.modules[cls.__module__]
    scope = {**vars(typing), **vars(module)}
    try:
        return eval(raw, scope)  # noqa: S307 - an annotation of the pinned package
    except Exception:  # noqa: BLE001
        return object() if raw else typing.Any


def py_text(t, raw) -> str:
    if isinstance(raw, str):
        return raw
    text = repr(t) if typing.get_origin(t) or not isinstance(t, type) else t.__name__
    return re.sub(r"\b(?:typing|collections\.abc|builtins)\.", "", text).replace("NoneType", "None")


def provider_fields(cls) -> list[tuple[str, tuple, bool, str]]:
    """The fields `cls` declares itself: (name, type, nullable, annotation text)."""
    callables, activations = _callable_names()
    own = cls.__dict__.get("__annotations__", {})
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    out = []
    for name, raw in own.items():
        f = by_name.get(name)
        if f is None:  # a ClassVar
            continue
        t = annotation(cls, name, raw)
        text = py_text(t, raw)
        if name.startswith("_") or not f.init:
            out.append((name, ("Object",), False, text + (" (computed)" if not f.init else " (private)")))
            continue
        if name in callables:
            ty, nullable = ("Choice", activations), False
        else:
            ty, nullable = pty(t)
        default = f.default
        if default is None:
            nullable = True
        elif default is not dataclasses.MISSING and ty != ("Object",) and not accepts(ty, default):
            extra = next((v for k, v in SCALARS.items() if type(default) is k), None)
            if extra is not None:
                ty = union((ty[1] if ty[0] == "Union" else [ty]) + [extra])
        out.append((name, ty, nullable, text))
    return out


# long choice lists stated once (the activation names, the dtype names): list -> const name
SHARED_CHOICES: dict[tuple, str] = {}


def rust_ty(ty: tuple) -> str:
    kind = ty[0]
    if kind in ("Choice",):
        if tuple(ty[1]) in SHARED_CHOICES:
            return f"Ty::Choice({SHARED_CHOICES[tuple(ty[1])]})"
        return "Ty::Choice(&[" + ", ".join(f'"{a}"' for a in ty[1]) + "])"
    if kind == "IntChoice":
        return "Ty::IntChoice(&[" + ", ".join(str(a) for a in ty[1]) + "])"
    if kind in ("IntTuple", "FloatTuple"):
        return f"Ty::{kind}({ty[1]})"
    if kind == "Union":
        return "Ty::Union(&[" + ", ".join(rust_ty(m) for m in ty[1]) + "])"
    return f"Ty::{kind}"


def generate_providers() -> str:
    import re as _re  # noqa: F401

    classes = provider_classes()
    every: dict[str, type] = {}
    for cls in classes.values():
        for b in cls.__mro__:
            if dataclasses.is_dataclass(b):
                every[f"{b.__module__}.{b.__qualname__}"] = b
    SHARED_CHOICES.clear()
    SHARED_CHOICES[tuple(_callable_names()[1])] = "ACTIVATIONS"
    SHARED_CHOICES[tuple(_dtype_names())] = "DTYPES"
    lines = [
        f"//! Megatron-Bridge {md.version('megatron-bridge')}'s model provider classes: the fields each declares, with their",
        "//! types, and its dataclass bases; and the classes Bridge's `ConfigContainer` holds in `optimizer`,",
        "//! `train` and `ddp` (`RESOLVED`). GENERATED by tests/bridge/gen_sections.py from Bridge's classes:",
        "//! do not edit; regenerate.",
        "",
        "use super::bridge_schema::{ProviderClass, ProviderField, Ty};",
        "",
        "/// The activation names Bridge's override code turns into a callable (`activation_map.str_to_callable`).",
        "const ACTIVATIONS: &[&str] = &[" + ", ".join(f'"{a}"' for a in _callable_names()[1]) + "];",
        "/// The dtype names Bridge's override code turns into a torch dtype (`activation_map.str_to_dtype`).",
        "const DTYPES: &[&str] = &[" + ", ".join(f'"{a}"' for a in _dtype_names()) + "];",
        "",
        "/// Every class, sorted by `module.Class` (the provider classes and the dataclasses they derive from).",
        "pub const CLASSES: &[ProviderClass] = &[",
    ]
    names = set()
    for full in sorted(every):
        cls = every[full]
        bases = [f"{b.__module__}.{b.__qualname__}" for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)]
        lines.append("    ProviderClass {")
        lines.append(f'        class: "{full}",')
        lines.append(f"        provider: {str(full in classes).lower()},")
        lines.append("        bases: &[" + ", ".join(f'"{b}"' for b in bases) + "],")
        lines.append("        fields: &[")
        for name, ty, nullable, text in provider_fields(cls):
            if ty != ("Object",):
                names.add(name)
            lines.append(
                f'            ProviderField {{ name: "{name}", ty: {rust_ty(ty)}, nullable: {str(nullable).lower()}, py: {rust_str(text)} }},'
            )
        lines.append("        ],")
        lines.append("    },")
    lines.append("];")
    lines.append("")
    lines.append("/// Every field name some class lets a user write, sorted (what `--set model.FIELD` may name).")
    lines.append("pub const NAMES: &[&str] = &[")
    for n in sorted(names):
        lines.append(f'    "{n}",')
    lines.append("];")
    lines.extend(resolved_classes())
    return "\n".join(lines) + "\n"


# The sections ovlaunch resolves whose class has fields it does not plan (`config::unplanned`).
RESOLVED = ("optimizer", "train", "ddp")


def resolved_class(section: str):
    """The class most shipped recipe functions hold in `section` (Bridge's performance functions
    hold Megatron-Core's `DistributedDataParallelConfig` in `ddp`, a few fine-tuning ones Bridge's
    subclass of it, ConfigContainer's annotation); an error unless every class held there has
    the same fields of the same types, so the table types a field whichever the function holds."""
    held()
    classes = sorted(_RESOLVED_HELD[section].items(), key=lambda kv: (-len(kv[1]), class_path(kv[0])))
    typed = [class_fields(c) for c, _ in classes]
    if any([(n, t, u) for n, (t, u, _) in f.items()] != [(n, t, u) for n, (t, u, _) in typed[0].items()] for f in typed):
        raise SystemExit(f"{section}: the shipped functions hold classes with different fields: "
                         + "; ".join(f"{class_path(c)} ({len(f)}: {f[0]}, ...)" for c, f in classes))
    return classes[0][0]


def class_fields(cls) -> dict[str, tuple[tuple, bool, str]]:
    """Every field of `cls`, its dataclass bases' included, in the class's field order: name ->
    (type, nullable, annotation text) as the class that declares it last states it."""
    declared = {}
    for b in reversed([b for b in cls.__mro__ if dataclasses.is_dataclass(b)]):
        for name, ty, nullable, text in provider_fields(b):
            declared[name] = (ty, nullable, text)
    return {f.name: declared[f.name] for f in dataclasses.fields(cls)}


def resolved_classes() -> list[str]:
    """For each of `RESOLVED`, the class the shipped functions hold there (`resolved_class`)
    with every field it has (`class_fields`)."""
    lines = ["",
             "/// The classes Bridge's recipe functions hold in the sections ovlaunch resolves whose fields",
             "/// it does not all plan (`config::unplanned`), by section: every field of the class, its bases'",
             "/// included, in the class's field order (where functions hold different classes there, every",
             "/// one has these fields of these types; this is the class most of them hold).",
             "pub(super) const RESOLVED: &[(&str, ProviderClass)] = &["]
    for section in RESOLVED:
        cls = resolved_class(section)
        mro = [b for b in cls.__mro__ if dataclasses.is_dataclass(b)]
        lines.append(f'    ("{section}", ProviderClass {{')
        lines.append(f'        class: "{class_path(cls)}",')
        lines.append("        provider: false,")
        lines.append("        bases: &[" + ", ".join(f'"{class_path(b)}"' for b in mro[1:]) + "],")
        lines.append("        fields: &[")
        for name, (ty, nullable, text) in class_fields(cls).items():
            lines.append(
                f'            ProviderField {{ name: "{name}", ty: {rust_ty(ty)}, nullable: {str(nullable).lower()}, py: {rust_str(text)} }},'
            )
        lines.append("        ],")
        lines.append("    }),")
    lines.append("];")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--providers", required=True)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    problems = check_container_sections() + check_recipe_classes() + fine_tuning_facts()[0]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    status = 0
    for path, text in ((Path(args.out), generate()), (Path(args.providers), generate_providers())):
        status |= put(path, text, check=args.check, generator="gen_sections.py",
                      stale="out of date with the installed Megatron-Bridge")
    return status


if __name__ == "__main__":
    sys.exit(main())
