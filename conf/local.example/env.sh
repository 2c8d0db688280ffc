# Environment for scripts/tools/gpu_run.sh on this machine (sourced when conf/local/env.sh exists).
# The H200 device machines: leave NVLink multicast off (their KINDS.md says why).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
