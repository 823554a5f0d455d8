#!/usr/bin/env bash
# promtool and prometheus for the alert-rule tests (tests/helm/test_alert_rules.py):
# Debian's `prometheus` package ships both. Idempotent; needs root (or sudo) on Debian or
# Ubuntu.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus
command -v promtool >/dev/null
