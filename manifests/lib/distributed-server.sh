# A distributed benchmark's fio server (components/distributed.libsonnet): listens until $1 seconds have passed, never after; then idles until deleted.
trap 'kill -TERM "$child" 2>/dev/null; exit 0' TERM INT
timeout -k 10 "$1" fio --server="$2" & child=$!
wait "$child"
echo "fio server: past the benchmark's deadline ($1 s) or ended; no longer listening"
while :; do sleep 3600 & child=$!; wait "$child"; done
