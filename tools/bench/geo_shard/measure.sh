#!/bin/sh
# Per-rank peak RSS and CPU time of geo.pair_sampler sharded over W ranks (pairs.yaml), the ranks
# run one after another:
#   tools/bench/geo_shard/measure.sh BUILD_DIR PHOTOS_CSV "1 2 4" [--set NAME=VALUE ...]
# (further arguments go to every `embedflow run`, e.g. --set pairs.max_pairs=250000000)
# prints: world rank rows max_rss_kb user_s sys_s wall
set -e
build=$1; csv=$2; worlds=${3:-"1 2 4"}
shift 2; [ $# -gt 0 ] && shift
here=$(dirname "$0")
exec "$here/../rank_cost.sh" "$build" "$here/pairs.yaml" pairs '[0-9]+ rows \(' "$worlds" --set photos.path="$csv" "$@"
