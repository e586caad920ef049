#!/bin/sh
# Peak RSS and CPU time of a graph run once per rank of each world size, the ranks one after
# another (each run is the process that rank would be), under /usr/bin/time -v:
#   tools/bench/rank_cost.sh BUILD_DIR GRAPH NODE ROWS_REGEX "1 2 4" [embedflow run arguments ...]
# NODE is the sharding node: its shard_world_size and shard_rank are set for each run. ROWS_REGEX
# (extended) matches the log line that counts the rank's rows; its first number is printed.
# prints: world rank rows max_rss_kb user_s sys_s wall
set -e
build=$1; graph=$2; node=$3; rows_regex=$4; worlds=$5
shift 5
for w in $worlds; do
  r=0
  while [ "$r" -lt "$w" ]; do
    log=$(mktemp)
    /usr/bin/time -v "$build/bin/embedflow" run "$graph" --threads 2 \
      --set "$node.shard_world_size=$w" --set "$node.shard_rank=$r" "$@" >"$log.out" 2>"$log"
    rows=$(grep -oE "$rows_regex" "$log" | head -1 | grep -oE '[0-9]+' | head -1)
    rss=$(grep 'Maximum resident' "$log" | awk '{print $NF}')
    user=$(grep 'User time' "$log" | awk '{print $NF}')
    sys=$(grep 'System time' "$log" | awk '{print $NF}')
    wall=$(grep 'Elapsed (wall' "$log" | awk '{print $NF}')
    echo "$w $r $rows $rss $user $sys $wall"
    rm -f "$log" "$log.out"
    r=$((r + 1))
  done
done
