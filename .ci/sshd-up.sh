#!/usr/bin/env bash
# Start a throw-away OpenSSH server (Debian's openssh-server) on 127.0.0.1 in front of the
# local Slurm, and a "laptop" user whose ssh reaches it: the remote-submission tests run
# ovlaunch as that user with `--host cluster`.  Needs root and .ci/install.sh ssh.
# Stop it with: .ci/sshd-up.sh --down --dir DIR
#
# Usage: eval "$(.ci/sshd-up.sh --dir DIR [--env NAME=VALUE]...)"
#
# What it sets up (all under DIR, which is made traversable, 0755):
#   DIR/sshd_config, DIR/host_ed25519   the server: key authentication only, its own host
#                                       key, root logins with a key (the Slurm tests submit
#                                       as root), the --env values set in every session
#   DIR/authorized_keys                 the laptop user's public key
#   DIR/bin                             first on the sessions' PATH (a test may put
#                                       wrappers there)
#   DIR/laptop                          the home directory of the user ovl-laptop (created
#                                       when missing; its home /tmp/ovlaunch-laptop-home is a
#                                       symlink to here): ~/.ssh/id_ed25519, ~/.ssh/config with
#                                       the Host aliases `cluster` (its host key in
#                                       ~/.ssh/known_hosts) and `stranger` (the same server,
#                                       with an empty known_hosts: the host key is unknown)
# stdout: `export ...` lines: OVLAUNCH_SSHD_PORT, OVLAUNCH_LAPTOP_USER, OVLAUNCH_LAPTOP_HOME
# Environment: OVLAUNCH_SSHD_PORT_BASE (default 22220): the first port tried.
set -euo pipefail

log() { echo "[sshd-up] $*" >&2; }
die() { log "error: $*"; exit 1; }

DIR=
DOWN=0
ENVS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) DIR=$2; shift 2 ;;
    --env) ENVS+=("$2"); shift 2 ;;
    --down) DOWN=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) die "unknown argument: $1" ;;
  esac
done
[ -n "$DIR" ] || die "--dir DIR is required"

if [ "$DOWN" = 1 ]; then
  if [ -f "$DIR/sshd.pid" ]; then
    kill "$(cat "$DIR/sshd.pid")" 2>/dev/null || true
  fi
  exit 0
fi

[ "$(id -u)" = 0 ] || die "must run as root"
[ -x /usr/sbin/sshd ] || die "/usr/sbin/sshd not found; run .ci/install.sh ssh"

LAPTOP=ovl-laptop
# The user's home is a fixed path (a symlink to this run's DIR/laptop), so that the user
# never needs changing while an earlier run's ssh processes still live.
LAPTOP_HOME=/tmp/ovlaunch-laptop-home
mkdir -p "$DIR/bin" "$DIR/laptop/.ssh"
chmod 755 "$DIR" "$DIR/bin"
if ! id "$LAPTOP" >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir "$LAPTOP_HOME" --shell /bin/sh "$LAPTOP"
  log "created user $LAPTOP"
fi
[ "$(getent passwd "$LAPTOP" | cut -d: -f6)" = "$LAPTOP_HOME" ] || usermod --home "$LAPTOP_HOME" "$LAPTOP" >&2
rm -f "$LAPTOP_HOME"
ln -s "$DIR/laptop" "$LAPTOP_HOME"

rm -f "$DIR/host_ed25519" "$DIR/host_ed25519.pub" "$DIR/laptop/.ssh/id_ed25519" "$DIR/laptop/.ssh/id_ed25519.pub"
ssh-keygen -q -t ed25519 -N '' -C ovlaunch-test-host -f "$DIR/host_ed25519"
ssh-keygen -q -t ed25519 -N '' -C ovlaunch-test-laptop -f "$DIR/laptop/.ssh/id_ed25519"
install -m 600 "$DIR/laptop/.ssh/id_ed25519.pub" "$DIR/authorized_keys"

# the first free port from the base
PORT=${OVLAUNCH_SSHD_PORT_BASE:-22220}
while (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
  PORT=$((PORT + 1))
done

{
  echo "Port $PORT"
  echo "ListenAddress 127.0.0.1"
  echo "HostKey $DIR/host_ed25519"
  echo "PidFile $DIR/sshd.pid"
  echo "AuthorizedKeysFile $DIR/authorized_keys"
  echo "PubkeyAuthentication yes"
  echo "PasswordAuthentication no"
  echo "KbdInteractiveAuthentication no"
  echo "PermitRootLogin prohibit-password"
  echo "UsePAM no"
  # the key file sits under /tmp (mode 1777), which StrictModes refuses
  echo "StrictModes no"
  echo "MaxSessions 64"
  echo "MaxStartups 64"
  printf 'SetEnv PATH=%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$DIR"
  for e in ${ENVS[@]+"${ENVS[@]}"}; do printf ' %s' "$e"; done
  echo
} > "$DIR/sshd_config"

mkdir -p /run/sshd
chmod 755 /run/sshd
/usr/sbin/sshd -t -f "$DIR/sshd_config" || die "sshd -t rejected $DIR/sshd_config"
/usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"
for _ in $(seq 50); do
  (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  sleep 0.1
done
(echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null || die "sshd did not listen on $PORT: $(tail -5 "$DIR/sshd.log")"

HOSTKEY=$(cut -d' ' -f1,2 "$DIR/host_ed25519.pub")
echo "[127.0.0.1]:$PORT $HOSTKEY" > "$DIR/laptop/.ssh/known_hosts"
: > "$DIR/laptop/.ssh/known_hosts_empty"
cat > "$DIR/laptop/.ssh/config" <<EOF
Host cluster
  HostName 127.0.0.1
  Port $PORT
  User root
  IdentityFile ~/.ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile ~/.ssh/known_hosts

Host stranger
  HostName 127.0.0.1
  Port $PORT
  User root
  IdentityFile ~/.ssh/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile ~/.ssh/known_hosts_empty
EOF
chown -R "$LAPTOP:" "$DIR/laptop"
chmod 700 "$DIR/laptop" "$DIR/laptop/.ssh"
chmod 600 "$DIR/laptop/.ssh/"*
log "sshd on 127.0.0.1:$PORT (pid $(cat "$DIR/sshd.pid")), laptop user $LAPTOP"
echo "export OVLAUNCH_SSHD_PORT=$PORT"
echo "export OVLAUNCH_LAPTOP_USER=$LAPTOP"
echo "export OVLAUNCH_LAPTOP_HOME=$DIR/laptop"
