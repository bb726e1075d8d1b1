#!/usr/bin/env bash
# Stop the test SLURM cluster started by slurm-up.sh DIR: cancel its jobs, stop slurmd and
# slurmctld (by their pid files in DIR) and remove DIR.  munged is left running (shared).
set -uo pipefail
DIR=${1:?usage: slurm-down.sh DIR}
export SLURM_CONF="$DIR/slurm.conf"
scancel --user="$(id -un)" 2>/dev/null || true
for d in slurmd slurmctld; do
    pidfile="$DIR/$d.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
done
case "$DIR" in /tmp/fsdask-slurm.*) rm -rf "$DIR";; esac
exit 0
