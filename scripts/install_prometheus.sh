#!/usr/bin/env bash
# promtool and prometheus for the alert-rule tests (tests/helm/test_alert_rules.py,
# tests/helm/test_prometheus_scrape.py): Debian's `prometheus` package ships both; its
# `prometheus-node-exporter` reads the Spark jobs' metrics textfiles in the scrape test.
# Idempotent; needs root (or sudo) on Debian or Ubuntu.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus-node-exporter >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
  prometheus prometheus-node-exporter
command -v promtool >/dev/null
