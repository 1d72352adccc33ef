#!/usr/bin/env bash
# Runs a command inside a network and mount namespace of its own: loopback only, with the tier's pod, Service
# and node ranges made local to it, so every component of the real tier listens there and no packet leaves it.
# The namespaces end with the command (nothing to tear down); root is needed to create them.
set -euo pipefail
if [ "${CUTOVER_E2E_NETNS:-}" != inside ]; then
  [ "$(id -u)" = 0 ] || { echo "e2e/netns.sh: the real tier creates a network namespace: run it as root" >&2; exit 1; }
  command -v unshare >/dev/null && command -v ip >/dev/null && command -v iptables >/dev/null &&
    command -v redis-server >/dev/null || {
    echo "e2e/netns.sh: needs unshare (Debian: util-linux), ip (Debian: iproute2), iptables (Debian: iptables)" \
      "and redis-server (Debian: redis-server, for ArgoCD)" >&2
    exit 1
  }
  exec unshare --net --mount --propagation private --fork -- env CUTOVER_E2E_NETNS=inside "$0" "$@"
fi
ip link set lo up
# pods, Services, the control plane and the nodes (e2e/tier/controlplane.py); a dummy interface would be the
# usual way, but local routes on loopback need no kernel module
for range in 10.244.0.0/16 10.96.0.0/16 10.250.0.0/24; do ip route add local "$range" dev lo table local; done
exec "$@"
