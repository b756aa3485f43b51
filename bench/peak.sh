#!/bin/bash
# peak.sh OUT CMD...: runs CMD under /usr/bin/time, samples its RssAnon
# every 20 ms; prints wall, user+sys CPU, peak RSS (all) and peak RssAnon
# (the heap: RSS beyond the file pages the kernel maps), and the load.
out=$1; shift
l0=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/time -f "%e %U %S %M" -o "$out.time" "$@" > "$out" 2>&1 &
tpid=$!
peakA=0
while kill -0 $tpid 2>/dev/null; do
  for pid in $(pgrep -P $tpid); do
    a=$(awk '/RssAnon/{print $2}' /proc/$pid/status 2>/dev/null)
    [ -n "$a" ] && [ "$a" -gt "$peakA" ] && peakA=$a
  done
  sleep 0.02
done
wait $tpid; rc=$?
read e u s m < "$out.time"
echo "rc=$rc wall=${e}s cpu=$(echo "$u + $s" | bc)s maxrss=$((m/1024))MiB peak_anon=$((peakA/1024))MiB load=$l0..$(cut -d' ' -f1 /proc/loadavg)"
