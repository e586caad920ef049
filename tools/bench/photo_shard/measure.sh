#!/bin/sh
# Per-rank peak RSS and CPU time of geo.csv_photos sharded at its source over W ranks
# (photos.yaml), the ranks run one after another:
#   tools/bench/photo_shard/measure.sh BUILD_DIR PHOTOS_CSV "1 2 4" [--set NAME=VALUE ...]
# The CSV must hold every record on one line (a sharded read refuses records spanning lines);
# gen_photos' one description with a line break is joined by
#   sed -i '/, then$/{N;s/\n/ /}' PHOTOS_CSV
# prints: world rank rows_emitted max_rss_kb user_s sys_s wall
set -e
build=$1; csv=$2; worlds=${3:-"1 2 4"}
shift 2; [ $# -gt 0 ] && shift
here=$(dirname "$0")
exec "$here/../rank_cost.sh" "$build" "$here/photos.yaml" photos ': [0-9]+ of [0-9]+ rows emitted' "$worlds" --set photos.path="$csv" "$@"
