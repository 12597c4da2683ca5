#!/usr/bin/env bash
# A bare Debian chroot for the `bundle` and `fresh` tests (sourced by them):
# Debian 12 "minbase" (essential packages and apt: no compiler, no Python, no
# CUDA, none of kiln's dependencies). debootstrap builds it once; the finished
# root is cached as ~/.cache/kiln/debootstrap-bookworm-minbase.tar.gz
# (KILN_CHROOT_CACHE), so a warm run only unpacks it into a new folder, and
# every test starts from the same bare system.
#   new_chroot DIR     unpack (building the cache first if need be) into DIR,
#                      with /proc, /dev and the host's resolv.conf (for apt and pip)
#   in_chroot DIR CMD  run CMD (bash -c) inside, as root, with a clean environment
#                      (plus the host's proxy settings and CA bundle for pip)
#   drop_chroot DIR    unmount and delete
set -euo pipefail
KILN_CHROOT_CACHE=${KILN_CHROOT_CACHE:-$HOME/.cache/kiln/debootstrap-bookworm-minbase.tar.gz}
KILN_DEBIAN_MIRROR=${KILN_DEBIAN_MIRROR:-http://deb.debian.org/debian}

chroot_need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "FAIL: the chroot tests need root (debootstrap, chroot, mount)"; exit 1; }
  command -v debootstrap >/dev/null ||
    { echo "FAIL: debootstrap is not installed (tools/install_deps.sh installs it)"; exit 1; }
}

build_chroot_cache() {
  local tmp t0
  t0=$(date +%s)
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-debootstrap.XXXXXX")
  echo "chroot: no cache at $KILN_CHROOT_CACHE: debootstrap --variant=minbase bookworm ($KILN_DEBIAN_MIRROR)"
  if ! debootstrap --variant=minbase bookworm "$tmp/root" "$KILN_DEBIAN_MIRROR" > "$tmp/debootstrap.log" 2>&1; then
    tail -20 "$tmp/debootstrap.log"; rm -rf "$tmp"
    echo "FAIL: debootstrap failed"; exit 1
  fi
  rm -rf "$tmp/root/var/cache/apt/archives/"*.deb
  mkdir -p "$(dirname "$KILN_CHROOT_CACHE")"
  tar -C "$tmp/root" -czf "$KILN_CHROOT_CACHE.tmp.$$" . && mv "$KILN_CHROOT_CACHE.tmp.$$" "$KILN_CHROOT_CACHE"
  rm -rf "$tmp"
  echo "chroot: cache built in $(( $(date +%s) - t0 )) s ($(du -h "$KILN_CHROOT_CACHE" | cut -f1))"
}

new_chroot() {
  local root=$1
  chroot_need_root
  # One builder at a time (the bundle and fresh tests may start together).
  exec 9> "$KILN_CHROOT_CACHE.lock" 2>/dev/null || { mkdir -p "$(dirname "$KILN_CHROOT_CACHE")"; exec 9> "$KILN_CHROOT_CACHE.lock"; }
  flock 9
  [ -f "$KILN_CHROOT_CACHE" ] || build_chroot_cache
  flock -u 9
  mkdir -p "$root"
  tar -C "$root" -xzf "$KILN_CHROOT_CACHE"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # The host's network, so the host's certificate authorities (an HTTPS proxy's
  # too); pip in the chroot is pointed at them (in_chroot).
  cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/kiln-host-ca.crt" 2>/dev/null || true
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
}

in_chroot() {
  local root=$1; shift
  local net=() v
  [ -f "$root/etc/kiln-host-ca.crt" ] && net+=(PIP_CERT=/etc/kiln-host-ca.crt)
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [ -n "${!v:-}" ] && net+=("$v=${!v}")
  done
  # shellcheck disable=SC2086
  env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8 \
    "${net[@]}" ${KILN_CHROOT_ENV:-} chroot "$root" /bin/bash -c "$*"
}

drop_chroot() {
  local root=$1 m p
  # Whatever still runs inside (a test that was interrupted) goes first.
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  for m in "$root"/dev "$root"/proc $(awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  rm -rf --one-file-system "$root"
}
