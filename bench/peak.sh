#!/bin/bash
# peak.sh OUT CMD...: runs CMD under /usr/bin/time, samples its RssAnon
# every 100 ms; prints wall, user+sys CPU, peak RSS (all) and peak RssAnon
# (the heap: RSS beyond the file pages the kernel maps), and the load.
out=$1; shift
l0=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/time -f "%e %U %S %M" -o "$out.time" "$@" > "$out" 2>&1 &
tpid=$!
peakA=0
# One lookup of the command's pid, then a read of its status file with
# bash builtins every 100 ms: a pgrep and an awk every 20 ms took a fifth
# of a core from the command measured (refundctl journal verify: 55 s
# sampled that way, 37 s unsampled, 2026-12-06).
pid=""
while kill -0 $tpid 2>/dev/null; do
  [ -z "$pid" ] && pid=$(pgrep -P $tpid | head -1)
  if [ -n "$pid" ] && [ -r /proc/$pid/status ]; then
    while read -r k v _; do
      if [ "$k" = RssAnon: ]; then
        [ "$v" -gt "$peakA" ] && peakA=$v
        break
      fi
    done < /proc/$pid/status 2>/dev/null
  fi
  sleep 0.1
done
wait $tpid; rc=$?
read e u s m < "$out.time"
echo "rc=$rc wall=${e}s cpu=$(echo "$u + $s" | bc)s maxrss=$((m/1024))MiB peak_anon=$((peakA/1024))MiB load=$l0..$(cut -d' ' -f1 /proc/loadavg)"
