#!/usr/bin/env bash
# On the device machine: where the warps of the verify kernel wait (ncu stall reasons per
# issued instruction) for one custom bench case. Args: treeverify bench case flags.
# KERNEL=verify_wgmma profiles the sm_90a wgmma kernel instead of the portable one.
set -uo pipefail
cd "$(dirname "$0")/../.."
bench/tools/device_unpack.sh
export LD_LIBRARY_PATH=$PWD/.devpkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
m=smsp__average_warps_issue_stalled
metrics=""
for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait \
         not_selected selected lg_throttle dispatch_stall no_instruction branch_resolving misc; do
  metrics+="${m}_${r}_per_issue_active.ratio,"
done
metrics+="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,"
metrics+="l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed.sum,"
metrics+="sm__inst_executed_pipe_tensor_op_hmma.sum,lts__t_sectors_srcunit_tex_op_read.sum,"
metrics+="smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__warps_active.avg.per_cycle_active,"
metrics+="l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__cycles_elapsed.avg,gpu__time_duration.sum,"
metrics+="dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct"
ncu --clock-control none --kernel-name regex:${KERNEL:-verify_mma} --launch-skip 2 --launch-count 1 \
  --metrics "$metrics" .devpkg/bin/treeverify bench --backend cuda --iters 1 --warmup 2 "$@" 2>&1 |
  grep -E "stalled|hmma|bank|inst_exec|lts__|issue_active|warps_active|wavefronts|cycles_elapsed|duration|dram__|verify_(mma|wgmma)_kernel<"
