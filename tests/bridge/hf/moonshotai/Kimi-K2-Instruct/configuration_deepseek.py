# The hub repository's config.json names its own configuration module through `auto_map`
# (custom code). The fixture ships no upstream code: this module answers that name with
# transformers' own DeepSeek-V3 configuration class, which reads the same config.json keys.
from transformers import DeepseekV3Config  # noqa: F401
