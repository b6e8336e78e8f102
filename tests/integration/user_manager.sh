#!/bin/sh
# A systemd user manager for root on a machine whose PID 1 is not systemd (a
# container or a CI VM with a cgroup v1/v2 hybrid layout), for the cgroup-scope
# tests.  Usage: user_manager.sh RUNTIME_DIR NAME; SIGTERM ends it.
#
# - It first moves itself into cgroups of its own, NAME below its current memory
#   cgroup, in each hierarchy the manager uses: a manager at the root of a
#   hierarchy migrates every process there into its init.scope.
# - sd_booted() is made true in a private mount namespace only (a tmpfs on
#   /run/systemd holding system/), so nothing else on the machine sees a booted
#   systemd.
# The manager listens on RUNTIME_DIR/systemd/private.  The caller removes the
# (then empty) cgroups.
set -eu
runtime=$1 name=$2
base=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
grep -q '^[0-9]*:name=systemd:' /proc/self/cgroup || { echo "not a hybrid cgroup layout" >&2; exit 2; }
cg="${base%/}/$name"
for h in systemd unified memory pids; do
  [ -d "/sys/fs/cgroup/$h" ] || continue
  mkdir -p "/sys/fs/cgroup/$h$cg"
  echo $$ > "/sys/fs/cgroup/$h$cg/cgroup.procs"
done
export XDG_RUNTIME_DIR="$runtime"
if [ -d /run/systemd/system ]; then
  exec /lib/systemd/systemd --user
fi
exec unshare -m --propagation private sh -c '
  mount -t tmpfs -o mode=755 tmpfs /run/systemd && mkdir /run/systemd/system &&
  exec /lib/systemd/systemd --user'
