# The GPU check's jobs: what every job shares and the model shape, sourced by run.sh and
# cpu-check.sh. Needs KIND (h100, h200), TORCH_VER and BRIDGE_ROOT set.
# shellcheck shell=bash disable=SC2034,SC2120,SC2119

# Megatron-Core 0.19.2's distributed optimizer cannot load a checkpoint with PyTorch's Adam, the
# one optimizer there is without TE or Apex (distrib_optimizer.py: state_dict() asserts on the
# empty state of a fresh optimizer); on one GPU it shards nothing: the plan turns it off.
COMMON=(-r llama3_8b -g "${KIND}x1" --te-version none --torch-version "$TORCH_VER"
  --bridge-root "$BRIDGE_ROOT" --set model.context_parallel_size=1
  --set train.global_batch_size=8
  --set model.gradient_accumulation_fusion=false --set model.cross_entropy_loss_fusion=false
  --set optimizer.use_precision_aware_optimizer=false --set logger.log_interval=1
  --set ddp.use_distributed_optimizer=false --set optimizer.use_distributed_optimizer=false
  --set ddp.overlap_param_gather=false)
# The model shape: a base, and what a job changes of it (shape KEY=VALUE... prints the --set words)
shape() {
  local -A v=([model.num_layers]=4 [model.hidden_size]=2048 [model.ffn_hidden_size]=8192
    [model.num_attention_heads]=16 [dataset.seq_length]=2048 [model.seq_length]=2048
    [train.micro_batch_size]=1)
  local kv
  for kv in "$@"; do v[${kv%%=*}]=${kv#*=}; done
  for kv in "${!v[@]}"; do printf -- '--set %s=%s ' "$kv" "${v[$kv]}"; done
}
# The MoE jobs (OVL_GPU_GRID=moe): Bridge's Qwen3-30B-A3B recipe cut the same way, on one GPU
# (EP 1: the expert all-to-all exchanges nothing), without what needs Transformer Engine or
# several GPUs: the grouped-GEMM experts (TE's, or the legacy `grouped_gemm` package) give way to
# Megatron-Core's SequentialMLP, the fused permutation and router kernels and TE's CUDA graphs are
# off, and the flex dispatcher (DeepEP/HybridEP) gives way to the all-to-all one. Routing stays
# forced to balance, as the recipe has it. Mock data needs no tokenizer: the null one, at the
# model's vocabulary, stands for the checkpoint's (which the GPU machine has no copy of).
COMMON_MOE=(-r qwen3_30b_a3b -g "${KIND}x1" --te-version none --torch-version "$TORCH_VER"
  --bridge-root "$BRIDGE_ROOT" --set model.context_parallel_size=1
  --set model.tensor_model_parallel_size=1 --set model.pipeline_model_parallel_size=1
  --set model.expert_model_parallel_size=1 --set comm_overlap.overlap_moe_expert_parallel_comm=false
  --set train.global_batch_size=8
  --set model.gradient_accumulation_fusion=false --set model.cross_entropy_loss_fusion=false
  --set optimizer.use_precision_aware_optimizer=false --set logger.log_interval=1
  --set ddp.use_distributed_optimizer=false --set optimizer.use_distributed_optimizer=false
  --set ddp.overlap_param_gather=false
  --set model.moe_grouped_gemm=false --set model.moe_permute_fusion=false
  --set model.moe_router_fusion=false --set model.moe_token_dispatcher_type=alltoall
  --set model.cuda_graph_impl=none
  --set tokenizer.tokenizer_type=NullTokenizer --set tokenizer.tokenizer_model=null
  --set tokenizer.vocab_size=151936)
# The MoE model shape: Qwen3-30B-A3B's layer (hidden 2048, 32 heads, 4 KV groups, top-8 routing,
# expert FFN 768) with fewer layers and experts
moe_shape() {
  local -A v=([model.num_layers]=4 [model.num_moe_experts]=32 [dataset.seq_length]=2048
    [model.seq_length]=2048 [train.micro_batch_size]=1)
  local kv
  for kv in "$@"; do v[${kv%%=*}]=${kv#*=}; done
  for kv in "${!v[@]}"; do printf -- '--set %s=%s ' "$kv" "${v[$kv]}"; done
}
# The training job (its checkpoint directory is the argument): 20 steps, saved at the end
train_args() {
  # shellcheck disable=SC2046
  printf '%s\n' $(shape) --set train.train_iters=20 --set "checkpoint.save=$1" --set "checkpoint.load=$1" \
    --set checkpoint.save_interval=20
}
# The users' jobs (OVL_GPU_GRID=users): what users bring, not a shape the check cuts. Bridge
# library functions for one GPU as Bridge ships them (Llama 3.2 1B and Qwen3 0.6B, whose LM
# heads share the embedding's weights), and a recipe file a user writes (user-recipe.yaml).
# Each job states only what running without Transformer Engine needs (as COMMON does) and a
# global batch of 8 (the functions' own, 512 and 32, would take minutes a step).
COMMON_USERS=(-g "${KIND}x1" --te-version none --torch-version "$TORCH_VER" --bridge-root "$BRIDGE_ROOT"
  --set train.global_batch_size=8
  --set model.gradient_accumulation_fusion=false --set model.cross_entropy_loss_fusion=false
  --set optimizer.use_precision_aware_optimizer=false --set logger.log_interval=1
  --set ddp.use_distributed_optimizer=false --set optimizer.use_distributed_optimizer=false
  --set ddp.overlap_param_gather=false)
# The users' jobs, NAME|ARGUMENTS: the two functions as shipped but for the sequence of Llama
# 3.2 1B (8192: unfused attention would hold 8192 x 8192 scores per head), the same with its
# LM head untied (the estimate's tied-embedding term, one value apart), and the user's file.
# Qwen3 0.6B's function names the checkpoint's tokenizer, which the GPU machine has no copy of:
# mock data needs none, so the null one at the model's vocabulary stands for it.
USERS_GRID=(
  "lib_llama32_1b|-r llama32_1b_pretrain --set dataset.seq_length=2048"
  "lib_llama32_1b_untied|-r llama32_1b_pretrain --set dataset.seq_length=2048 --set model.share_embeddings_and_output_weights=false"
  "lib_qwen3_600m|-r qwen3_600m_pretrain --set tokenizer.tokenizer_type=NullTokenizer --set tokenizer.tokenizer_model=null --set tokenizer.vocab_size=151936"
  "user_recipe_file|-r scripts/gpu-check/user-recipe.yaml"
)
# A users' job's own arguments, as given (no shape to fill in)
as_given() { printf -- '%s ' "$@"; }
