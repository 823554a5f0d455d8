#!/usr/bin/env bash
# promtool and prometheus for the alert-rule tests (tests/helm/test_alert_rules.py,
# tests/helm/test_prometheus_scrape.py): Debian's `prometheus` package ships both; its
# `prometheus-node-exporter` reads the Spark jobs' metrics textfiles in the scrape test.
# Run by `make test` and `make test-fast` only (`make setup` and `make demo` need no root).
# Found on PATH, else installed with apt-get as root or through sudo without a password;
# otherwise one line says what to install, and the test target stops before its run.
set -euo pipefail
PACKAGES="prometheus prometheus-node-exporter"
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 \
  && command -v prometheus-node-exporter >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if ! command -v apt-get >/dev/null 2>&1 || { [ -n "$SUDO" ] && ! sudo -n true 2>/dev/null; }; then
  echo "The Helm tests need promtool, prometheus and prometheus-node-exporter on PATH;" \
    "this script installs them only with apt-get as root or through sudo: run 'sudo apt-get install $PACKAGES' (Debian, Ubuntu)" \
    "or put those binaries on PATH, then run the tests again." >&2
  exit 1
fi
echo "Installing $PACKAGES for the Helm tests (apt-get)" >&2
$SUDO apt-get update -qq -o DPkg::Lock::Timeout=300
# Another apt or dpkg run holding the lock is waited for, not a failure.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  -o DPkg::Lock::Timeout=300 $PACKAGES
command -v promtool >/dev/null
