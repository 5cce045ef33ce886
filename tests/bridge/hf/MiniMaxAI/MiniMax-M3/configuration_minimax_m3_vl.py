# The hub repository's config.json names its own configuration module through `auto_map`
# (custom code). The fixture ships no upstream code: this module answers that name with
# transformers' own MiniMax-M3 configuration class (model_type minimax_m3_vl, the one the
# config declares).
from transformers import MiniMaxM3VLConfig  # noqa: F401
