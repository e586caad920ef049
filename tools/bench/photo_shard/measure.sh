#!/bin/sh
# Per-rank peak RSS and CPU time of geo.csv_photos sharded at its source over W ranks, the ranks
# run one after another (each is the process a rank would be):
#   tools/bench/photo_shard/measure.sh BUILD_DIR PHOTOS_CSV "1 2 4" [--set NAME=VALUE ...]
# The CSV must hold every record on one line (a sharded read refuses records spanning lines);
# gen_photos' one description with a line break is joined by
#   sed -i '/, then$/{N;s/\n/ /}' PHOTOS_CSV
# prints: world rank rows_emitted max_rss_kb user_s sys_s wall
set -e
build=$1; csv=$2; worlds=${3:-"1 2 4"}
shift 2; [ $# -gt 0 ] && shift
here=$(dirname "$0")
for w in $worlds; do
  r=0
  while [ "$r" -lt "$w" ]; do
    log=$(mktemp)
    /usr/bin/time -v "$build/bin/embedflow" run "$here/photos.yaml" --threads 2 --set photos.path="$csv" \
      --set photos.shard_world_size="$w" --set photos.shard_rank="$r" "$@" >"$log.out" 2>"$log"
    rows=$(grep -o ': [0-9]* of [0-9]* rows emitted' "$log" | head -1 | awk '{print $2}')
    rss=$(grep 'Maximum resident' "$log" | awk '{print $NF}')
    user=$(grep 'User time' "$log" | awk '{print $NF}')
    sys=$(grep 'System time' "$log" | awk '{print $NF}')
    wall=$(grep 'Elapsed (wall' "$log" | awk '{print $NF}')
    echo "$w $r $rows $rss $user $sys $wall"
    rm -f "$log" "$log.out"
    r=$((r + 1))
  done
done
