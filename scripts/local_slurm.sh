#!/usr/bin/env bash
# A single-machine SLURM (Debian's 22.05 packages) with accounting, for our tests and for trying the cluster profile
# (profiles/slurm/) on a laptop. Every daemon is started by hand in the background (no systemd, no service scripts)
# and stopped by the pid this script wrote for it; nothing is ever killed by name.
#
# Usage (as root):
#   scripts/local_slurm.sh start [--no-accounting] [--nodes 2]
#   scripts/local_slurm.sh stop [--purge]
#   scripts/local_slurm.sh status                 (exit 0 when every daemon runs, 3 otherwise; any user)
#
# start            munged, MariaDB (a private database, made on the first start), slurmdbd, slurmctld and slurmd;
#                  one node claiming 8 GPUs (fake character devices), 64 CPUs and 500,000 MB of memory, so that the
#                  profile's real requests are accepted; partitions spade-gpu and spade-cpu; account spade-local
#                  with root and the invoking user (SUDO_USER), enforced: a job with another account is refused.
#                  About 2.5 s with the database made, 5 s the first time (2-core VM).
# --no-accounting  no MariaDB and no slurmdbd: AccountingStorageType=accounting_storage/none, so `sacct` fails (to
#                  test that the profile cannot hang when sacct is disabled). Accounts are then not checked.
# --nodes 2        two nodes, n1 and n2, each its own slurmd on this host (`slurmd -N n1`, Debian's slurmd supports
#                  several per host), each claiming the same 8 GPUs, CPUs and memory: for multi-node jobs such as
#                  the profile's 2-node training of the 30B model. `hostname` prints this host's name on both; a
#                  job step sees its node in SLURMD_NODENAME.
# stop             cancels the jobs still queued or running (so no job step outlives its slurmd), then stops the
#                  daemons of either mode, by their pid files; --purge also deletes the state folder (database
#                  included) and the files this script wrote under /etc/slurm.
#
# Everything (pid files, logs, spool, state, database, fake devices) lives under ${SPADE_SLURM_DIR:-/tmp/spade-slurm}.
# The configuration must be at /etc/slurm/slurm.conf: the executor plugin's inner `srun` drops SLURM_* variables,
# SLURM_CONF included. Files written there carry the header below; a slurm.conf without it is someone else's and
# start refuses to touch it. Packages: `SPADE_SLURM=1 ./setup.sh` (or the apt-get line in PACKAGES_HINT below).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

STATE="${SPADE_SLURM_DIR:-/tmp/spade-slurm}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ETC=/etc/slurm
HEADER="# Written by spade scripts/local_slurm.sh; regenerated at each start (do not edit)."
CLUSTER=spade
ACCOUNT=spade-local
GPU_PARTITION=spade-gpu
CPU_PARTITION=spade-cpu
DB_PORT="${SPADE_SLURM_DB_PORT:-3307}"   # our MariaDB, on 127.0.0.1 only (not the usual 3306)
TIMEOUT="${SPADE_SLURM_TIMEOUT:-60}"     # seconds to wait for each step of start / stop
PACKAGES=(slurmctld slurmd slurm-client munge mariadb-server slurmdbd)
PACKAGES_HINT="run \`SPADE_SLURM=1 ./setup.sh\` as root, or: apt-get install -y --no-install-recommends ${PACKAGES[*]}"
HOST="$(hostname -s)"

die() { echo "local_slurm.sh: $*" >&2; exit 1; }
say() { echo "local_slurm.sh: $*"; }
now() { date +%s.%N; }

# --- pid files: $STATE/pids/<name>.pid; <name> is munged, mariadbd, slurmdbd, slurmctld, slurmd or slurmd-<node> ---
pid_of() { if [ -s "$STATE/pids/$1.pid" ]; then cat "$STATE/pids/$1.pid"; fi; }
# The executable a daemon's pid must run (argv[0]'s base name), so a recycled pid is never signalled.
binary_of() { case "$1" in slurmd|slurmd-*) echo slurmd ;; *) echo "$1" ;; esac; }
# 0 when the pid in <name>'s pid file is alive and runs the expected daemon
alive() {
  local pid arg0
  pid="$(pid_of "$1")"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  arg0="$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | head -n 1)" || return 1
  [ "$(basename -- "$arg0")" = "$(binary_of "$1")" ]
}
# the daemons a mode runs, in start order
daemons() {  # $1: accounting (1/0), $2: node count
  local n
  if [ "$OWN_MUNGE" = 1 ]; then echo munged; fi
  if [ "$1" = 1 ]; then echo mariadbd; echo slurmdbd; fi
  echo slurmctld
  if [ "$2" = 1 ]; then echo slurmd; else for n in $(seq 1 "$2"); do echo "slurmd-n$n"; done; fi
}
# the mode the state folder records (written by start): ACCOUNTING, NODES, OWN_MUNGE
load_mode() {
  ACCOUNTING=1 NODES=1 OWN_MUNGE=1
  if [ -f "$STATE/mode" ]; then
    # shellcheck disable=SC1091
    . "$STATE/mode"
  fi
}
# the daemons whose pid files exist (either mode), so stop needs no mode
recorded_daemons() {
  local name
  for name in slurmd slurmd-n1 slurmd-n2 slurmctld slurmdbd mariadbd munged; do
    if [ -e "$STATE/pids/$name.pid" ]; then echo "$name"; fi
  done
}

log_of() {
  case "$1" in
    munged) echo "$STATE/munge/munged.log" ;;
    mariadbd) echo "$STATE/log/mariadb.log" ;;
    slurmd) echo "$STATE/log/slurmd-$HOST.log" ;;
    slurmd-*) echo "$STATE/log/slurmd-${1#slurmd-}.log" ;;
    *) echo "$STATE/log/$1.log" ;;
  esac
}

# Start a daemon in the background in its own session (it outlives this shell) and record its pid. The command
# must exec the daemon itself (no wrapper that forks), so that $! is the daemon's pid.
launch() {  # name, command...
  local name="$1" i
  shift
  setsid "$@" </dev/null >>"$STATE/log/$name.out" 2>&1 &
  echo "$!" >"$STATE/pids/$name.pid"
  # until setsid (and setpriv) have exec'd, the pid still shows their names: wait for the daemon's own (<= 5 s)
  for i in $(seq 50); do
    if alive "$name" || [ ! -d "/proc/$!" ]; then return 0; fi
    sleep 0.1
  done
}

# Wait until a check passes; fail with the log to read if the daemon died or the time is up.
wait_for() {  # name (daemon whose log to blame), description, command...
  local name="$1" what="$2" deadline
  shift 2
  deadline=$(( $(date +%s) + TIMEOUT ))
  until "$@" >/dev/null 2>&1; do
    if [ -n "$name" ] && ! alive "$name"; then
      fail_start "$name exited while waiting for $what" "$name"
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      fail_start "timed out after ${TIMEOUT} s waiting for $what" "$name"
    fi
    sleep 0.2
  done
}
fail_start() {  # message, daemon
  local log
  log="$(log_of "$2")"
  {
    echo "local_slurm.sh: start failed: $1"
    echo "local_slurm.sh: read $log (and $STATE/log/$2.out); its last lines:"
    tail -n 15 "$log" 2>/dev/null | sed 's/^/    /' || true
    tail -n 5 "$STATE/log/$2.out" 2>/dev/null | sed 's/^/    /' || true
    echo "local_slurm.sh: stopping what was started"
  } >&2
  do_stop quiet || true
  exit 1
}

check_packages() {
  local accounting="$1" missing=() bin pkg
  local -A needs=([munged]=munge [slurmctld]=slurmctld [slurmd]=slurmd [sbatch]=slurm-client
                  [sacctmgr]=slurm-client)
  if [ "$accounting" = 1 ]; then needs+=([mariadbd]=mariadb-server [mariadb-install-db]=mariadb-server
                                         [slurmdbd]=slurmdbd); fi
  for bin in "${!needs[@]}"; do
    command -v "$bin" >/dev/null 2>&1 || missing+=("${needs[$bin]}")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    pkg="$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')"
    die "missing Debian package(s): ${pkg% }; $PACKAGES_HINT"
  fi
}

# A file under /etc/slurm is ours when its first line is HEADER; anything else there is refused.
check_etc() {
  local f
  for f in slurm.conf gres.conf slurmdbd.conf; do
    if [ -e "$ETC/$f" ] && [ "$(head -n 1 "$ETC/$f")" != "$HEADER" ]; then
      die "$ETC/$f exists and was not written by this script (no header line '$HEADER'): another SLURM is configured on this machine; refusing to overwrite it (move it away to use this script)"
    fi
  done
}

write_configs() {  # accounting, nodes
  local accounting="$1" nodes="$2" nodelist i
  install -d -m 755 "$ETC"
  # Node claims: 2 x 32 cores and 500,000 MB, what the profile's train job asks one node for (8 GPUs x 8 CPUs, 480,000
  # MB, 48 h, --exclusive); an evaluate job asks 1 GPU x 16 CPUs, 128,000 MB, 4 h, so three run at once on this
  # machine of 2 real cores (claims are not checked against the hardware: SlurmdParameters=config_overrides).
  # 8 GPUs: character devices of NVIDIA's major number 195 (slurmd drops a GPU without a device file); nothing ever
  # opens them.
  local node_attrs="CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 RealMemory=500000 Gres=gpu:8 State=UNKNOWN"
  {
    echo "$HEADER"
    echo "# State, logs and spool are under $STATE. Mode: accounting=$accounting nodes=$nodes"
    echo "ClusterName=$CLUSTER"
    echo "# controller on this host; the address in brackets avoids depending on name resolution"
    echo "SlurmctldHost=$HOST(127.0.0.1)"
    echo "# all daemons run as root (this is a test cluster started by root)"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "StateSaveLocation=$STATE/spool/ctld"
    echo "# %n: the node's name, so that two slurmd on one host (--nodes 2) keep separate spool, pid and log files"
    echo "SlurmdSpoolDir=$STATE/spool/slurmd-%n"
    echo "SlurmctldPidFile=$STATE/run/slurmctld.pid"
    echo "SlurmdPidFile=$STATE/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$STATE/log/slurmctld.log"
    echo "SlurmdLogFile=$STATE/log/slurmd-%n.log"
    echo "# find job processes by walking /proc (no cgroups needed, none are set up here) and bind no tasks to CPUs"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "# schedule cores, memory and generic resources (GPUs), as most GPU clusters do"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core_Memory"
    echo "# memory of a job that asks for none (otherwise it would get the whole node's and run alone): MB per CPU"
    echo "DefMemPerCPU=1000"
    echo "MpiDefault=none"
    echo "# no mail is sent from here (the default /bin/mail is not installed, and slurmctld logs an error for it)"
    echo "MailProg=/bin/true"
    echo "# a node that was down comes back by itself as soon as its slurmd registers with a valid configuration"
    echo "ReturnToService=2"
    echo "# trust the CPUs, memory and GPUs of the node line below instead of the hardware slurmd finds (2 cores here)"
    echo "SlurmdParameters=config_overrides"
    echo "GresTypes=gpu"
    echo "# keep a finished job visible to squeue/scontrol for 5 minutes"
    echo "MinJobAge=300"
    echo "# seconds between SIGTERM and SIGKILL when a job is cancelled or runs out of time (default 30)"
    echo "KillWait=5"
    echo "# no per-job CPU/memory sampling (sacct then shows no usage figures, only the allocation)"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "JobCompType=jobcomp/none"
    if [ "$accounting" = 1 ]; then
      echo "# jobs and associations go to slurmdbd on this host (default port 6819), which stores them in MariaDB"
      echo "AccountingStorageType=accounting_storage/slurmdbd"
      echo "AccountingStorageHost=127.0.0.1"
      echo "# record GPUs in each job's TRES (sacct AllocTRES shows gres/gpu=N); cpu, mem, node are recorded anyway"
      echo "AccountingStorageTRES=gres/gpu"
      echo "# refuse a job whose user has no association with the requested account (or no default account)"
      echo "AccountingStorageEnforce=associations"
    else
      echo "# no accounting: no slurmdbd, sacct answers with an error, accounts are not checked"
      echo "AccountingStorageType=accounting_storage/none"
    fi
    if [ "$nodes" = 1 ]; then
      nodelist="$HOST"
      echo "NodeName=$HOST NodeAddr=127.0.0.1 $node_attrs"
    else
      nodelist="n[1-$nodes]"
      echo "# $nodes nodes on this one host, each its own slurmd (slurmd -N n<i>) listening on its own port"
      for i in $(seq 1 "$nodes"); do
        echo "NodeName=n$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((6818 + 10 * (i - 1))) $node_attrs"
      done
    fi
    echo "# both partitions on the same node(s); no time limit beyond what a job asks for"
    echo "PartitionName=$GPU_PARTITION Nodes=$nodelist MaxTime=INFINITE State=UP"
    echo "PartitionName=$CPU_PARTITION Nodes=$nodelist MaxTime=INFINITE State=UP Default=YES"
  } >"$ETC/slurm.conf.new"
  mv "$ETC/slurm.conf.new" "$ETC/slurm.conf"
  {
    echo "$HEADER"
    echo "# fake GPUs: no NVML detection, the device files are listed by hand"
    echo "AutoDetect=off"
    echo "NodeName=$nodelist Name=gpu File=$STATE/dev/nvidia[0-7]"
  } >"$ETC/gres.conf"
  if [ "$accounting" = 1 ]; then
    # slurmdbd refuses a configuration that others can read (it holds the database password)
    ( umask 077
      {
        echo "$HEADER"
        echo "AuthType=auth/munge"
        echo "# 'localhost' is accepted whatever this host's name is"
        echo "DbdHost=localhost"
        echo "DbdAddr=127.0.0.1"
        echo "SlurmUser=root"
        echo "LogFile=$STATE/log/slurmdbd.log"
        echo "PidFile=$STATE/run/slurmdbd.pid"
        echo "StorageType=accounting_storage/mysql"
        echo "StorageHost=127.0.0.1"
        echo "StoragePort=$DB_PORT"
        echo "StorageUser=slurm"
        echo "StoragePass=$(cat "$STATE/db/slurm.pass")"
        echo "StorageLoc=slurm_acct_db"
      } >"$ETC/slurmdbd.conf.new" )
    chmod 600 "$ETC/slurmdbd.conf.new"
    mv "$ETC/slurmdbd.conf.new" "$ETC/slurmdbd.conf"
  else
    rm -f "$ETC/slurmdbd.conf"
  fi
}

munge_works() { munge -n </dev/null | unmunge >/dev/null; }
db() { mariadb --no-defaults --socket="$STATE/db/run/mysqld.sock" -u root "$@"; }
node_states() { sinfo -h -N -o '%N %T' 2>/dev/null; }
# every node idle, as many as configured, and each registered by a slurmd started by this start (slurmctld recovers
# a node's last state from its state files, so "idle" alone can be the previous run's)
nodes_idle() {  # epoch seconds of this start
  local states t
  states="$(node_states)" || return 1
  [ "$(echo "$states" | awk '{print $1}' | sort -u | grep -c .)" = "$NODES" ] || return 1
  ! echo "$states" | awk '{print $2}' | grep -qv '^idle$' || return 1
  states="$(scontrol show node -o | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2)" || return 1
  [ "$(echo "$states" | grep -c .)" = "$NODES" ] || return 1
  for t in $states; do
    t="$(date -d "$t" +%s 2>/dev/null)" && [ "$t" -ge "$1" ] || return 1
  done
}
assoc_ready() { sacctmgr -n -P show assoc account="$ACCOUNT" user=root format=user | grep -qx root; }

start() {
  local accounting=1 nodes=1 t0 i name pass user running=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-accounting) accounting=0 ;;
      --nodes) nodes="${2:-}"; shift ;;
      --nodes=*) nodes="${1#--nodes=}" ;;
      *) die "start: unknown option $1 (options: --no-accounting, --nodes 2)" ;;
    esac
    shift
  done
  case "$nodes" in 1|2) ;; *) die "start: --nodes must be 1 or 2" ;; esac
  t0="$(now)"
  [ "$(id -u)" = 0 ] || die "start must run as root (it starts munged as user munge, makes device files, writes $ETC)"
  check_packages "$accounting"

  load_mode
  mapfile -t running < <(for name in $(recorded_daemons); do if alive "$name"; then echo "$name"; fi; done)
  if [ "${#running[@]}" -gt 0 ]; then
    if [ "$(daemons "$ACCOUNTING" "$NODES" | sort)" = "$(printf '%s\n' "${running[@]}" | sort)" ]; then
      if [ "$ACCOUNTING" = "$accounting" ] && [ "$NODES" = "$nodes" ]; then
        say "already running (accounting=$ACCOUNTING, nodes=$NODES; state in $STATE); nothing to do"
        exit 0
      fi
      die "already running with accounting=$ACCOUNTING nodes=$NODES, not the mode asked for; run stop first"
    fi
    say "found a partial run (${running[*]}); stopping it first"
    do_stop quiet
  fi
  check_etc

  install -d -m 755 "$STATE" "$STATE/pids" "$STATE/log" "$STATE/run" "$STATE/spool" "$STATE/spool/ctld" "$STATE/dev"
  rm -f "$STATE"/pids/*.pid
  for i in $(seq 0 7); do
    [ -c "$STATE/dev/nvidia$i" ] || { rm -f "$STATE/dev/nvidia$i"; mknod -m 666 "$STATE/dev/nvidia$i" c 195 "$i"; }
  done

  # munge: reuse a munged that already answers on the standard socket (a laptop with the munge service running);
  # otherwise our own, as user munge (it refuses to run as root), its key from the package in /etc/munge
  OWN_MUNGE=1
  if munge_works 2>/dev/null; then
    OWN_MUNGE=0
    say "munged already answers on /run/munge; using it"
  fi
  printf 'ACCOUNTING=%s\nNODES=%s\nOWN_MUNGE=%s\n' "$accounting" "$nodes" "$OWN_MUNGE" >"$STATE/mode"
  ACCOUNTING="$accounting" NODES="$nodes"
  if [ "$OWN_MUNGE" = 1 ]; then
    install -d -o munge -g munge -m 755 /run/munge
    install -d -o munge -g munge -m 700 "$STATE/munge"
    # setpriv execs munged directly (runuser would fork and leave its own pid in the pid file)
    launch munged setpriv --reuid=munge --regid=munge --init-groups \
      munged --foreground --log-file="$STATE/munge/munged.log" --pid-file="$STATE/munge/munged.pid" \
      --seed-file="$STATE/munge/munged.seed"
    wait_for munged "munged to answer" munge_works
  fi

  if [ "$accounting" = 1 ]; then
    # MariaDB: a private data folder made once; its socket and pid under a folder owned by mysql
    install -d -m 755 "$STATE/db"
    install -d -o mysql -g mysql -m 755 "$STATE/db/run"
    if [ ! -f "$STATE/db/.ready" ]; then
      rm -rf "$STATE/db/data"
      say "making the accounting database (first start only)"
      mariadb-install-db --no-defaults --user=mysql --datadir="$STATE/db/data" --skip-test-db \
        --auth-root-authentication-method=socket >"$STATE/log/mariadb-install-db.log" 2>&1 \
        || { tail -n 20 "$STATE/log/mariadb-install-db.log" >&2; die "mariadb-install-db failed; read $STATE/log/mariadb-install-db.log"; }
    fi
    # mariadbd writes its log as user mysql
    [ -e "$STATE/log/mariadb.log" ] || install -o mysql -g mysql -m 640 /dev/null "$STATE/log/mariadb.log"
    # innodb_lock_wait_timeout=900 and a 1 GB buffer pool: what slurmdbd checks for (it logs an error otherwise;
    # the pool's memory is only used as it fills, a few MB here); TCP on 127.0.0.1 only
    launch mariadbd mariadbd --no-defaults --user=mysql --datadir="$STATE/db/data" \
      --socket="$STATE/db/run/mysqld.sock" --pid-file="$STATE/db/run/mariadbd.pid" \
      --log-error="$STATE/log/mariadb.log" --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
      --innodb-lock-wait-timeout=900 --innodb-buffer-pool-size=1G
    wait_for mariadbd "MariaDB to answer on $STATE/db/run/mysqld.sock" db -e 'SELECT 1'
    if [ ! -f "$STATE/db/.ready" ]; then
      pass="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
      db -e "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
             GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
      ( umask 077; echo "$pass" >"$STATE/db/slurm.pass" )
      touch "$STATE/db/.ready"
    fi
  fi

  write_configs "$accounting" "$nodes"

  if [ "$accounting" = 1 ]; then
    launch slurmdbd slurmdbd -D
    wait_for slurmdbd "slurmdbd to answer sacctmgr" sacctmgr -n show cluster
    # the cluster, the account and its users, before slurmctld starts (it then loads them at once)
    if ! sacctmgr -n -P show cluster format=cluster | grep -qx "$CLUSTER"; then
      sacctmgr -i add cluster "$CLUSTER" >/dev/null
    fi
    if ! sacctmgr -n -P show account "$ACCOUNT" format=account | grep -qx "$ACCOUNT"; then
      sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="spade local test cluster" \
        organization=spade >/dev/null
    fi
    for user in root ${SUDO_USER:+"$SUDO_USER"}; do
      if ! sacctmgr -n -P show assoc account="$ACCOUNT" user="$user" format=user | grep -qx "$user"; then
        sacctmgr -i add user "$user" account="$ACCOUNT" defaultaccount="$ACCOUNT" cluster="$CLUSTER" >/dev/null
      fi
    done
    wait_for slurmdbd "the association root/$ACCOUNT" assoc_ready
  fi

  launch slurmctld slurmctld -D
  wait_for slurmctld "slurmctld to answer" scontrol ping
  # each slurmd's spool folder made beforehand (slurmd makes it itself, but only after it first looks for it)
  if [ "$nodes" = 1 ]; then
    install -d -m 755 "$STATE/spool/slurmd-$HOST"
    launch slurmd slurmd -D
  else
    for i in $(seq 1 "$nodes"); do
      install -d -m 755 "$STATE/spool/slurmd-n$i"
      launch "slurmd-n$i" slurmd -D -N "n$i"
    done
  fi
  if [ "$nodes" = 1 ]; then name=slurmd; else name=slurmd-n1; fi
  wait_for "$name" "the node(s) to be idle in sinfo" nodes_idle "${t0%.*}"
  for name in $(daemons "$ACCOUNTING" "$NODES"); do
    alive "$name" || fail_start "$name is not running" "$name"
  done
  say "started in $(awk -v a="$t0" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}') s (accounting=$accounting, nodes=$nodes; partitions $GPU_PARTITION, $CPU_PARTITION; account $([ "$accounting" = 1 ] && echo "$ACCOUNT" || echo none); state and logs in $STATE)"
  write_profile
}

# the cluster profile with the local overlay (profiles/local_slurm.yaml), at $STATE/profile (spade.cluster.profile)
write_profile() {
  local python="$REPO/.venv/bin/python" status=""
  if [ ! -x "$python" ]; then
    say "no $python (run ./setup.sh): the local profile is not written"
    return 0
  fi
  PYTHONPATH="$REPO/src${PYTHONPATH:+:$PYTHONPATH}" "$python" -m spade.cluster.profile "$STATE/profile" >/dev/null
  [ "$ACCOUNTING" = 1 ] || status=" --slurm-status-command squeue"
  say "profile: snakemake <target> --profile $STATE/profile$status --configfile <config>   (docs/CLUSTER.md)"
}

# stop the daemons of the pid files (either mode); "quiet" keeps it short (used by a failed start)
do_stop() {
  local quiet="${1:-}" name pid deadline names jobs
  mapfile -t names < <(recorded_daemons)
  if [ "${#names[@]}" = 0 ]; then
    [ -n "$quiet" ] || say "nothing runs (no pid files in $STATE/pids)"
    return 0
  fi
  # cancel the jobs first, while slurmctld and slurmd still run, so that no job step is left behind
  if alive slurmctld && jobs="$(squeue -h -o %i 2>/dev/null)" && [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null || true
    deadline=$(( $(date +%s) + 15 ))
    while [ -n "$(squeue -h -t R,CG,PD -o %i 2>/dev/null)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.3; done
    [ -n "$quiet" ] || say "cancelled job(s): $(echo "$jobs" | tr '\n' ' ')"
  fi
  for name in "${names[@]}"; do  # recorded_daemons lists them in stop order
    pid="$(pid_of "$name")"
    if alive "$name"; then
      kill -TERM "$pid" 2>/dev/null || true
      deadline=$(( $(date +%s) + TIMEOUT ))
      while alive "$name" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
      if alive "$name"; then
        echo "local_slurm.sh: $name (pid $pid) did not exit within ${TIMEOUT} s of SIGTERM; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
      fi
      [ -n "$quiet" ] || say "stopped $name (pid $pid)"
    elif [ -n "$pid" ] && [ -n "$(tr -d '\0' 2>/dev/null <"/proc/$pid/cmdline")" ]; then  # (empty: exited, unreaped)
      echo "local_slurm.sh: pid $pid of $name's pid file now runs something else; not touched" >&2
    fi
    rm -f "$STATE/pids/$name.pid"
  done
}

stop() {
  local purge=0 f
  while [ $# -gt 0 ]; do
    case "$1" in
      --purge) purge=1 ;;
      *) die "stop: unknown option $1 (option: --purge)" ;;
    esac
    shift
  done
  if [ -n "$(recorded_daemons)" ] && [ "$(id -u)" != 0 ]; then die "stop must run as root"; fi
  do_stop
  if [ "$purge" = 1 ]; then
    [ "$(id -u)" = 0 ] || die "stop --purge must run as root"
    for f in slurm.conf gres.conf slurmdbd.conf; do
      if [ -e "$ETC/$f" ] && [ "$(head -n 1 "$ETC/$f")" = "$HEADER" ]; then rm -f "$ETC/$f"; fi
    done
    rm -rf "$STATE"
    say "removed $STATE and this script's files in $ETC"
  fi
}

status() {
  local name all=0 pid
  load_mode
  echo "state folder: $STATE (accounting=$ACCOUNTING, nodes=$NODES)"
  for name in $(daemons "$ACCOUNTING" "$NODES"); do
    pid="$(pid_of "$name")"
    if alive "$name"; then
      printf '  %-10s running (pid %s)\n' "$name" "$pid"
    else
      printf '  %-10s not running\n' "$name"
      all=3
    fi
  done
  [ "$OWN_MUNGE" = 1 ] || echo "  munged     (not ours: the one already answering on /run/munge)"
  echo "partitions: $GPU_PARTITION (GPU jobs), $CPU_PARTITION (CPU jobs, default)"
  if [ "$ACCOUNTING" = 1 ]; then echo "account: $ACCOUNT"; else echo "account: none (accounting off)"; fi
  if [ "$all" = 0 ]; then
    sinfo -o '%P %a %l %D %T %N %G' || all=3
    if [ "$ACCOUNTING" = 1 ]; then
      sacctmgr -n -P show assoc account="$ACCOUNT" format=cluster,account,user || all=3
    fi
  fi
  return "$all"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) shift; stop "$@" ;;
  status) shift; status "$@" || exit $? ;;
  *) echo "usage: $0 start [--no-accounting] [--nodes 2] | stop [--purge] | status" >&2; exit 2 ;;
esac
