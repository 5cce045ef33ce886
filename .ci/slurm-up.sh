#!/usr/bin/env bash
# Start a throw-away Slurm cluster on this machine: one munged, one slurmctld
# and N slurmd daemons (one per node, all on 127.0.0.1, each on its own port).
# No systemd, no cgroups, no accounting database.  Needs root and the
# packages from .ci/install.sh.  Stop it with .ci/slurm-down.sh.
#
# Usage: eval "$(.ci/slurm-up.sh [--nodes N] [--cpus C] [--gpus G] [--dir DIR])"
#
# stdout: only `export ...` lines (also written to $DIR/env.sh):
#   SLURM_CONF, OVLAUNCH_SLURM_DIR, OVLAUNCH_SLURM_NODES (space separated names)
# stderr: progress and timing.
#
# Environment (all optional):
#   OVLAUNCH_SLURM_DIR     state directory, wiped on start
#                          (default ${TMPDIR:-/tmp}/ovlaunch-slurm)
#   OVLAUNCH_SLURM_NODES   number of nodes (default 2; or --nodes)
#   OVLAUNCH_SLURM_CPUS    CPUs declared per node (default 4; or --cpus).  The
#                          declared count may exceed the real one:
#                          SlurmdParameters=config_overrides makes slurmd
#                          report the configured hardware.
#   OVLAUNCH_SLURM_GPUS    GPUs declared per node as a generic resource
#                          (default 0: none; or --gpus): a job asking
#                          --gpus-per-node=N is scheduled and bound as on a
#                          GPU cluster (Slurm sets CUDA_VISIBLE_DEVICES), on
#                          device files that are no GPU.
#   OVLAUNCH_SLURM_PREFIX  node name prefix (default "node": node1..nodeN)
#   OVLAUNCH_SLURM_PORT    slurmctld port; node i uses PORT+i.  Default: the
#                          first free block at PORT_BASE, PORT_BASE+100, ...
#   OVLAUNCH_SLURM_PORT_BASE  where that search starts (default 16817); clusters
#                          started at the same moment need different bases
#   OVLAUNCH_SLURM_PARTITION  partition name (default "debug")
#   OVLAUNCH_SLURM_HOSTS   1 (default): add "127.0.0.1 node1 ... # ovlaunch-slurm:
#                          DIR:" to /etc/hosts so node names resolve (for
#                          MASTER_ADDR / rendezvous hosts taken from
#                          SLURM_JOB_NODELIST); slurm-down.sh removes it.
#                          0: leave /etc/hosts alone.
#   OVLAUNCH_SLURM_UTS     1 (default): each slurmd runs in its own UTS
#                          namespace, so `hostname` in a job prints its node
#                          name.  0: tasks see the machine's hostname.
#   OVLAUNCH_SLURM_CRED_EXPIRE  job credential lifetime in seconds (default 5;
#                          Slurm's default is 120).  A requeued job stays
#                          PENDING (Reason=BeginTime) this long + 1 s before
#                          it runs again.
#   OVLAUNCH_SLURM_TIMEOUT seconds to wait for all nodes to be idle (default 60)
#   OVLAUNCH_SLURM_EXTRA_CONF  extra slurm.conf lines (newline separated)
#   OVLAUNCH_SLURM_LOCK    machine-wide lock file (default
#                          /tmp/ovlaunch-slurm.lock): clusters that start at
#                          the same moment take turns from the port choice
#                          until their daemons listen, and on /etc/hosts
#   OVLAUNCH_SLURM_OCI     crun (default when crun is installed): write oci.conf
#                          so that `srun --container=BUNDLE` runs the step in an
#                          OCI container started by crun (state in $DIR/crun, no
#                          cgroups).  none: no oci.conf.
set -euo pipefail

TMP_BASE=${TMPDIR:-/tmp}
DIR=${OVLAUNCH_SLURM_DIR:-${TMP_BASE%/}/ovlaunch-slurm}
NODES=${OVLAUNCH_SLURM_NODES:-2}
CPUS=${OVLAUNCH_SLURM_CPUS:-4}
GPUS=${OVLAUNCH_SLURM_GPUS:-0}
PREFIX=${OVLAUNCH_SLURM_PREFIX:-node}
PORT=${OVLAUNCH_SLURM_PORT:-}
PORT_BASE=${OVLAUNCH_SLURM_PORT_BASE:-16817}
PARTITION=${OVLAUNCH_SLURM_PARTITION:-debug}
HOSTS=${OVLAUNCH_SLURM_HOSTS:-1}
UTS=${OVLAUNCH_SLURM_UTS:-1}
TIMEOUT=${OVLAUNCH_SLURM_TIMEOUT:-60}
CRED_EXPIRE=${OVLAUNCH_SLURM_CRED_EXPIRE:-5}
if command -v crun >/dev/null 2>&1; then OCI_DEFAULT=crun; else OCI_DEFAULT=none; fi
OCI=${OVLAUNCH_SLURM_OCI:-$OCI_DEFAULT}

while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) NODES=$2; shift 2 ;;
    --nodes=*) NODES=${1#*=}; shift ;;
    --cpus) CPUS=$2; shift 2 ;;
    --cpus=*) CPUS=${1#*=}; shift ;;
    --gpus) GPUS=$2; shift 2 ;;
    --gpus=*) GPUS=${1#*=}; shift ;;
    --dir) DIR=$2; shift 2 ;;
    --dir=*) DIR=${1#*=}; shift ;;
    -h|--help) sed -n '2,53p' "$0"; exit 0 ;;
    *) echo "slurm-up: unknown argument: $1" >&2; exit 2 ;;
  esac
done

log() { echo "[slurm-up] $*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
T0=$(now)

case "$NODES" in ''|*[!0-9]*|0) die "--nodes must be a positive integer" ;; esac
case "$CPUS" in ''|*[!0-9]*|0) die "--cpus must be a positive integer" ;; esac
case "$GPUS" in ''|*[!0-9]*) die "--gpus must be a non-negative integer" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (slurmd runs jobs as any user)"
for b in munged slurmctld slurmd sinfo scontrol; do
  command -v "$b" >/dev/null 2>&1 || die "$b not found; run .ci/install.sh slurm"
done

# A process that is gone or a zombie (PID 1 may reap late) counts as dead.
alive() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  [ "${s%% *}" != Z ]
}

# Ports and /etc/hosts belong to the whole machine, and tests start clusters in parallel:
# between a free port block being chosen and slurmctld listening on it, another start would
# see the same block free, and two read-modify-write edits of /etc/hosts lose one line. So
# a start holds this lock from the port choice until every node is idle (the daemons then
# listen), and slurm-down.sh holds it for its /etc/hosts edit. The daemons do not inherit it.
LOCK=${OVLAUNCH_SLURM_LOCK:-/tmp/ovlaunch-slurm.lock}
exec 9>>"$LOCK"
flock 9

if [ -f "$DIR/pids" ]; then
  while read -r name pid; do
    if alive "$pid"; then
      die "$name (pid $pid) of a previous cluster in $DIR is still running; run .ci/slurm-down.sh first"
    fi
  done < "$DIR/pids"
fi

# TCP ports in LISTEN state, from /proc (no dependency on ss/netstat).
listening_ports() {
  local f _sl local_addr _rem st _rest
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] || continue
    while read -r _sl local_addr _rem st _rest; do
      [ "$st" = 0A ] && echo $((16#${local_addr##*:}))
    done < <(tail -n +2 "$f")
  done | sort -un
}
port_block_free() { # first-port count
  local used p
  used=$(listening_ports)
  for p in $(seq "$1" $(($1 + $2 - 1))); do
    grep -qx "$p" <<<"$used" && return 1
  done
  return 0
}
if [ -z "$PORT" ]; then
  for base in $(seq "$PORT_BASE" 100 $((PORT_BASE + 10000))); do
    if port_block_free "$base" $((NODES + 1)); then PORT=$base; break; fi
  done
  [ -n "$PORT" ] || die "no free port block found; set OVLAUNCH_SLURM_PORT"
elif ! port_block_free "$PORT" $((NODES + 1)); then
  die "a port in $PORT..$((PORT + NODES)) is already in use; set OVLAUNCH_SLURM_PORT"
fi

rm -rf "$DIR"
mkdir -p "$DIR"/etc "$DIR"/state "$DIR"/spool "$DIR"/log "$DIR"/run "$DIR"/munge "$DIR"/munge-key
# canonical path: slurm-down.sh recognises leftover job steps by open files
# under it
DIR=$(cd "$DIR" && pwd -P)
chmod 755 "$DIR" "$DIR/munge"   # munged wants its socket directory a+x
chmod 700 "$DIR/munge-key"
: > "$DIR/pids"

NAMES=()
for i in $(seq 1 "$NODES"); do NAMES+=("$PREFIX$i"); done

# No core dumps from the daemons or their step daemons: a step a test makes slurmstepd refuse
# (the OCI test's two tasks per node) must not leave a core file in the caller's directory.
ulimit -c 0

start_bg() { # name cmd... ; records "name pid" in $DIR/pids
  local name=$1
  shift
  # A background job of a non-interactive shell is not a process group
  # leader, so setsid execs in place and $! is the daemon itself.
  setsid "$@" >"$DIR/log/$name.out" 2>&1 </dev/null 9>&- &
  echo "$name $!" >> "$DIR/pids"
}

# ---------------------------------------------------------------- munge
KEY=$DIR/munge-key/munge.key
if ! mungekey --create --keyfile="$KEY" 2>/dev/null; then
  dd if=/dev/urandom of="$KEY" bs=1024 count=1 status=none
fi
chmod 400 "$KEY"
SOCK=$DIR/munge/munge.socket.2
start_bg munged munged --foreground --force --key-file="$KEY" --socket="$SOCK" \
  --pid-file="$DIR/run/munged.pid" --seed-file="$DIR/munge-key/seed" \
  --log-file="$DIR/log/munged.log"
for _ in $(seq 200); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] || { cat "$DIR/log/munged.out" "$DIR/log/munged.log" >&2 || true; die "munged did not start"; }

# ---------------------------------------------------------------- slurm.conf
# RealMemory as slurmd detects it; CPUs as declared (config_overrides).
MEM=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1)
MEM=${MEM:-1024}
CONF=$DIR/etc/slurm.conf
{
  cat <<EOF
# throw-away test cluster written by .ci/slurm-up.sh
ClusterName=ovlaunch
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire also is the delay before a requeued job may start again
AuthInfo=socket=$SOCK,cred_expire=$CRED_EXPIRE
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# slurmd reports the hardware configured below, not what it detects
SlurmdParameters=config_overrides
# no cgroups, no systemd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# no slurmdbd; finished jobs are appended to a text file that
# "sacct --completion" reads
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# start a submitted job at once instead of on the next scheduler tick
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=1
JobRequeue=1
ReturnToService=2
MinJobAge=600
KillWait=5
InactiveLimit=0
SlurmdTimeout=60
DebugFlags=NO_CONF_HASH
${OVLAUNCH_SLURM_EXTRA_CONF:-}
EOF
  GRES=
  if [ "$GPUS" -gt 0 ]; then
    echo "GresTypes=gpu"
    GRES=" Gres=gpu:$GPUS"
  fi
  i=0
  for n in "${NAMES[@]}"; do
    i=$((i + 1))
    echo "NodeName=$n NodeHostname=$n NodeAddr=127.0.0.1 Port=$((PORT + i)) CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM$GRES State=UNKNOWN"
  done
  echo "PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} > "$CONF"
# Slurm's gpu plugin binds a GPU through its device file: each is a character device with
# /dev/null's numbers, which nothing opens (task/none: no cgroup device rules)
if [ "$GPUS" -gt 0 ]; then
  mkdir -p "$DIR/dev"
  for i in $(seq 0 $((GPUS - 1))); do mknod "$DIR/dev/gpu$i" c 1 3; done
  echo "Name=gpu File=$DIR/dev/gpu[0-$((GPUS - 1))]" > "$DIR/etc/gres.conf"
fi
for n in "${NAMES[@]}"; do mkdir -p "$DIR/spool/$n"; done
export SLURM_CONF=$CONF

# ---------------------------------------------------------------- oci.conf
# slurmstepd reads oci.conf from slurm.conf's directory. Slurm 22.05 patterns: %n node,
# %u user, %j job, %s step, %t task, %b the bundle it writes (config.json with the
# step's command and environment).  Every slurmd shares one machine, so the container
# id names the node, and crun keeps its state under $DIR.  There is no cgroup setup
# here (TaskPlugin=task/none), so crun does not manage cgroups either.
case "$OCI" in
  crun)
    command -v crun >/dev/null 2>&1 || die "crun not found; run .ci/install.sh oci"
    # crun refuses a host whose cgroups are a v1/v2 hybrid ("cgroups in hybrid mode not
    # supported"), even with --cgroup-manager=disabled; in a private mount namespace
    # without the cgroup2 mount it starts (no cgroup is used either way).
    mkdir -p "$DIR/bin"
    cat > "$DIR/bin/crun" <<EOF
#!/bin/sh
# shellcheck disable=SC2016
exec unshare -m sh -c 'umount -l /sys/fs/cgroup/unified 2>/dev/null; exec crun --root="\$0" --cgroup-manager=disabled "\$@"' "$DIR/crun" "\$@"
EOF
    chmod 755 "$DIR/bin/crun"
    CRUN=$DIR/bin/crun
    ID="%n.%u.%j.%s.%t"
    cat > "$DIR/etc/oci.conf" <<EOF
# written by .ci/slurm-up.sh: Slurm's native OCI containers through crun
RunTimeQuery="$CRUN state $ID"
RunTimeKill="$CRUN kill --all $ID SIGTERM"
RunTimeDelete="$CRUN delete --force $ID"
RunTimeRun="$CRUN run --bundle %b $ID"
EOF
    ;;
  none) ;;
  *) die "OVLAUNCH_SLURM_OCI must be crun or none, not '$OCI'" ;;
esac

# ---------------------------------------------------------------- /etc/hosts
TAG="# ovlaunch-slurm:$DIR:"
if [ "$HOSTS" = 1 ]; then
  # A line left by an earlier cluster in the same directory goes first (see slurm-down.sh
  # for why the file is rewritten in place); the new line is appended with one write, so a
  # job resolving a node name meanwhile never reads a file without it.
  if grep -qF "$TAG" /etc/hosts; then
    OVLAUNCH_SLURM_LOCK_HELD=1 bash "$(dirname "$0")/slurm-down.sh" --hosts-only --dir "$DIR"
  fi
  echo "127.0.0.1 ${NAMES[*]} $TAG" >> /etc/hosts
fi

# ---------------------------------------------------------------- daemons
T1=$(now)
start_bg slurmctld slurmctld -D -i -f "$CONF"
for n in "${NAMES[@]}"; do
  if [ "$UTS" = 1 ]; then
    # shellcheck disable=SC2016  # expanded by the inner sh
    start_bg "slurmd-$n" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
      "$n" slurmd -D -f "$CONF" -N "$n"
  else
    start_bg "slurmd-$n" slurmd -D -f "$CONF" -N "$n"
  fi
done

deadline=$(( $(date +%s) + TIMEOUT ))
while :; do
  states=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort -u || true)
  nidle=$(grep -c ' idle$' <<<"$states" || true)
  [ "$nidle" -ge "$NODES" ] && break
  if [ "$(date +%s)" -ge "$deadline" ]; then
    log "nodes not idle after ${TIMEOUT}s: ${states:-no answer from slurmctld}"
    tail -n 15 "$DIR"/log/*.log "$DIR"/log/*.out >&2 || true
    exit 1
  fi
  sleep 0.1
done
flock -u 9
exec 9>&-
log "$NODES node(s) idle (${CPUS} CPUs each) on ports $PORT..$((PORT + NODES)): $(tr '\n' ' ' <<<"$states")"
log "started in $(since "$T0")s (daemons to all idle: $(since "$T1")s); state in $DIR"

{
  echo "export SLURM_CONF=$CONF"
  echo "export OVLAUNCH_SLURM_DIR=$DIR"
  echo "export OVLAUNCH_SLURM_NODES='${NAMES[*]}'"
  echo "export OVLAUNCH_SLURM_OCI=$OCI"
} > "$DIR/env.sh"
cat "$DIR/env.sh"
