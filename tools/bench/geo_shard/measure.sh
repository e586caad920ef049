#!/bin/sh
# Per-rank peak RSS and CPU time of geo.pair_sampler sharded over W ranks, the ranks run one
# after another (each is the process a rank would be):
#   tools/bench/geo_shard/measure.sh BUILD_DIR PHOTOS_CSV "1 2 4" [--set NAME=VALUE ...]
# (further arguments go to every `embedflow run`, e.g. --set pairs.max_pairs=250000000)
# prints: world rank rows max_rss_kb user_s sys_s wall
set -e
build=$1; csv=$2; worlds=${3:-"1 2 4"}
shift 2; [ $# -gt 0 ] && shift
here=$(dirname "$0")
for w in $worlds; do
  r=0
  while [ "$r" -lt "$w" ]; do
    log=$(mktemp)
    /usr/bin/time -v "$build/bin/embedflow" run "$here/pairs.yaml" --threads 2 --set photos.path="$csv" \
      --set pairs.shard_world_size="$w" --set pairs.shard_rank="$r" "$@" >"$log.out" 2>"$log"
    rows=$(grep -o '[0-9]* rows (' "$log" | head -1 | cut -d' ' -f1)
    rss=$(grep 'Maximum resident' "$log" | awk '{print $NF}')
    user=$(grep 'User time' "$log" | awk '{print $NF}')
    sys=$(grep 'System time' "$log" | awk '{print $NF}')
    wall=$(grep 'Elapsed (wall' "$log" | awk '{print $NF}')
    echo "$w $r $rows $rss $user $sys $wall"
    rm -f "$log" "$log.out"
    r=$((r + 1))
  done
done
