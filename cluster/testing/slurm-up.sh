#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine, for tests (Debian, run as root).
#
#   cluster/testing/slurm-up.sh [DIR]      # DIR: state/spool/log/conf directory (default: a new temp dir)
#
# Installs Debian's slurm-wlm and munge when missing, writes DIR/slurm.conf for this host,
# starts munged (as the munge user), slurmctld and slurmd with -f DIR/slurm.conf, and waits
# until `sinfo` shows the node idle.  Prints `SLURM_CONF=DIR/slurm.conf` as its last line;
# export it so sbatch/squeue/scancel/sinfo use this cluster.  Stop it with slurm-down.sh DIR.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then echo "slurm-up.sh: needs root (it installs packages and starts daemons)" >&2; exit 3; fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || { echo "slurm-up.sh: slurm-wlm/munge missing and no apt-get to install them" >&2; exit 3; }
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >&2
fi

DIR=${1:-$(mktemp -d /tmp/fsdask-slurm.XXXXXX)}
mkdir -p "$DIR"/{state,spool,log}
chmod 755 "$DIR"
HOST=$(hostname -s)
# The node offers at least 8 CPUs whatever the machine has (config_overrides lets slurmd
# accept more than it finds): a CI machine with 2 cores must still run two worker jobs
# while an earlier test's job is completing. The jobs are small; oversubscription is fine.
CPUS=$(( $(nproc) > 8 ? $(nproc) : 8 ))
MEM=$(awk '/MemTotal/ {print int($2/1024*0.9)}' /proc/meminfo)
CONF="$DIR/slurm.conf"
cat > "$CONF" <<CONF
ClusterName=fsdask-test
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
# The Debian service files may already run munged; start ours only when none answers.
if ! munge -n >/dev/null 2>&1 </dev/null; then
    mkdir -p /etc/munge /var/log/munge /run/munge /var/lib/munge
    [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
    chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge
    chmod 700 /etc/munge /var/log/munge; chmod 400 /etc/munge/munge.key; chmod 755 /run/munge
    runuser -u munge -- munged
    for _ in $(seq 50); do munge -n >/dev/null 2>&1 </dev/null && break; sleep 0.2; done
fi
export SLURM_CONF="$CONF"
slurmctld -f "$CONF"
slurmd -f "$CONF"
for _ in $(seq 120); do
    state=$(sinfo -h -N -n "$HOST" -o %t 2>/dev/null || true)
    case "$state" in idle*) echo "SLURM_CONF=$CONF"; exit 0;; esac
    sleep 0.5
done
echo "slurm-up.sh: node $HOST not idle after 60 s (state: ${state:-none}); logs in $DIR/log" >&2
exit 1
