#!/usr/bin/env bash
# A profile of pkgproxy's cold misses, taken from outside while a bench
# runs: the bench is started as given, the first pkgproxy it starts is
# attached to at once, and detached from when the first client process
# started after it (the cold run's) has ended. MODE says with what:
#   count  `strace -f -c`: every system call, counted and timed;
#   trace  `strace -f -yy -T -ttt` of every call (then summed by
#          bench/cold_profile.py, per call and per kind of descriptor):
#          files created, flushes, renames, bytes from the upstream, to the
#          cache's files, back out of them and to the client;
#   perf   `perf stat` and `perf record -g` of pkgproxy's CPU.
# Beside them OUT gets pkgproxy's CPU time over the cold run, the files and
# bytes its cache then held, and the bench's output. The bench goes on to
# its end; REPEAT=1 keeps it short. On an ext4 without a journal (this
# machine's), files deleted within the last minutes make each file created
# slow (`recently_deleted`): leave minutes after the last bench's clean-up. CLIENT is a pattern `pgrep -f` finds
# the cold client by (cargo fetch, "ci --registry", pip download, uv pip,
# classworlds, "dnf -y").
#   bench/cold_profile.sh perf /tmp/profile-npm "ci --registry" \
#     env PINNED=1 DELAY_MS=10 REPEAT=1 bench/npm.sh
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: bench/cold_profile.sh count|trace|perf OUT CLIENT BENCH..." >&2; exit 2; }
mode=$1 out=$2 client=$3
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
"$@" > "$out/bench.out" 2>&1 &
bench=$!

# The first pkgproxy the bench starts, and its cache.
pid=""
for _ in $(seq 60000); do
  pid=$(pgrep -n -f 'release/pkgproxy -addr' || true)
  [ -n "$pid" ] && break
  kill -0 "$bench" 2>/dev/null || { echo "the bench ended before starting pkgproxy" >&2; tail "$out/bench.out" >&2; exit 1; }
  sleep 0.01
done
cache=$(tr '\0' '\n' < "/proc/$pid/cmdline" | sed -n '/^-cache-dir$/{n;p}')
port=$(tr '\0' '\n' < "/proc/$pid/cmdline" | sed -n '/^-addr$/{n;p}' | sed 's/.*://')
# Attached once it is pkgproxy (not the taskset before its exec) and
# listening: perf record attached before the exec records next to nothing.
for _ in $(seq 1000); do
  [ "$(readlink "/proc/$pid/exe")" != "$(readlink -f "$(command -v taskset)")" ] &&
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
  sleep 0.01
done
# A field of /proc/PID/stat, counted from the state (3): after the command's
# name, which may hold spaces (npm's is "npm ci").
stat() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk -v n="$(($2 - 2))" '{print $n}' || true; }   # "" once gone
started=$(stat "$pid" 22)
cpu() { python3 -c "print(f'{($(stat "$pid" 14) + $(stat "$pid" 15)) / 100:.2f}')"; }   # USER_HZ is 100 on Linux

case $mode in
  count) strace -f -c -o "$out/strace-count.txt" -p "$pid" 2>/dev/null & ;;
  trace) strace -f -qq -yy -s 0 -T -ttt -o "$out/trace.log" -p "$pid" 2>/dev/null & ;;
  perf) perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$pid" -o "$out/perf-stat.txt" &
        tracer_stat=$!
        perf record -q -g -F 1999 -p "$pid" -o "$out/perf.data" 2>/dev/null & ;;
  *) echo "mode: count, trace or perf" >&2; kill "$bench"; exit 2 ;;
esac
tracer=$!

# The cold client: the first process matching CLIENT started after pkgproxy.
cold=""
while [ -z "$cold" ]; do
  kill -0 "$bench" 2>/dev/null || { echo "the bench ended; no cold client matched $client" >&2; exit 1; }
  for candidate in $(pgrep -f -- "$client" || true); do
    grep -q cold_profile "/proc/$candidate/cmdline" 2>/dev/null && continue   # this script's own subshells
    when=$(stat "$candidate" 22)
    if [ "${when:-0}" -gt "$started" ]; then cold=$candidate; break; fi
  done
  sleep 0.01
done
cpu_before=$(cpu)
while kill -0 "$cold" 2>/dev/null; do sleep 0.01; done
cpu_after=$(cpu)
kill -INT "$tracer"
[ -z "${tracer_stat:-}" ] || kill -INT "$tracer_stat"
wait "$tracer" 2>/dev/null || true
[ -z "${tracer_stat:-}" ] || wait "$tracer_stat" 2>/dev/null || true
{
  echo "pkgproxy $pid, port $port, cache $cache"
  echo "pkgproxy's CPU time over the cold run: $(python3 -c "print(f'{$cpu_after - $cpu_before:.2f}')") s"
  echo "its cache then: $(find "$cache" -type f | wc -l) files, $(du -sb --apparent-size "$cache" | cut -f1) bytes"
  find "$cache" -type f -printf '%h\n' | sed "s|^$cache/||; s|/[0-9a-f][0-9a-f]$|/XX|" | sort | uniq -c
} > "$out/cold.txt"
[ "$mode" != trace ] || python3 "$root/bench/cold_profile.py" "$out/trace.log" "$port" "$cache" > "$out/trace-summary.txt"
wait "$bench" || echo "the bench failed: $out/bench.out" >&2
cat "$out/cold.txt"
[ "$mode" != count ] || head -30 "$out/strace-count.txt"
[ "$mode" != trace ] || cat "$out/trace-summary.txt"
[ "$mode" != perf ] || cat "$out/perf-stat.txt"
