#!/bin/bash
# ovlaunch 0.1.0
# recipe: llama3_8b (llama3_8b_pretrain_64gpu_h100_bf16_config)
# hardware: h100x1 = 1 node(s) x 1
# layout: TP=1 PP=1 CP=1 EP=1 DP=1; precision bf16
# reproduce: ovlaunch torchrun -r llama3_8b -g h100x1 --te-version none --torch-version 2.11.0 --bridge-root <repo>/.gpu/bridge --set model.context_parallel_size=1 --set train.global_batch_size=8 --set model.gradient_accumulation_fusion=false --set model.cross_entropy_loss_fusion=false --set optimizer.use_precision_aware_optimizer=false --set logger.log_interval=1 --set ddp.use_distributed_optimizer=false --set optimizer.use_distributed_optimizer=false --set ddp.overlap_param_gather=false --set dataset.seq_length=2048 --set model.hidden_size=2048 --set train.micro_batch_size=1 --set model.ffn_hidden_size=8192 --set model.num_layers=4 --set model.seq_length=2048 --set model.num_attention_heads=16 --set train.train_iters=20 --set checkpoint.save=/tmp/ovlaunch-gpu-check/jobs/train/checkpoints --set checkpoint.load=/tmp/ovlaunch-gpu-check/jobs/train/checkpoints --set checkpoint.save_interval=20 --jobs-root /tmp/ovlaunch-gpu-check/jobs --job-dir /tmp/ovlaunch-gpu-check/jobs/train
set -euo pipefail
export CUDA_DEVICE_MAX_CONNECTIONS=8
export NCCL_GRAPH_REGISTER=0
export NCCL_NVLS_ENABLE=0
export NVTE_BWD_LAYERNORM_SM_MARGIN=20
export NVTE_FWD_LAYERNORM_SM_MARGIN=20
export OVLAUNCH_JOB_DIR=/tmp/ovlaunch-gpu-check/jobs/train
export PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
export TORCH_NCCL_AVOID_RECORD_STREAMS=1
export TORCH_NCCL_HIGH_PRIORITY=1
unset -v NVTE_NORM_BWD_USE_CUDNN
unset -v NVTE_NORM_FWD_USE_CUDNN

exec torchrun --standalone --nnodes=1 --nproc-per-node=1 --no-python /tmp/ovlaunch-gpu-check/jobs/train/ovlaunch-rank --plan /tmp/ovlaunch-gpu-check/jobs/train/rank-plan.json -- python <repo>/.gpu/bridge/scripts/training/run_recipe.py --recipe llama3_8b_pretrain_64gpu_h100_bf16_config model.context_parallel_size=1 train.global_batch_size=8 model.gradient_accumulation_fusion=false model.cross_entropy_loss_fusion=false optimizer.use_precision_aware_optimizer=false ddp.use_distributed_optimizer=false optimizer.use_distributed_optimizer=false ddp.overlap_param_gather=false model.hidden_size=2048 train.micro_batch_size=1 model.ffn_hidden_size=8192 model.num_layers=4 model.seq_length=2048 model.num_attention_heads=16 train.train_iters=20 dataset.seq_length=2048 'checkpoint.save='\''/tmp/ovlaunch-gpu-check/jobs/train/checkpoints'\''' 'checkpoint.load='\''/tmp/ovlaunch-gpu-check/jobs/train/checkpoints'\''' checkpoint.save_interval=20 logger.log_interval=1
