#!/usr/bin/env bash
# Installs the Debian packages verlc builds and tests with, only those that are missing.
set -eu
pkgs="build-essential cmake ninja-build ccache pkg-config libopenblas-dev libonig-dev libutf8proc-dev libcjson-dev libyaml-dev libsnappy-dev libzstd-dev zlib1g-dev liblz4-dev libbrotli-dev libpng-dev libjpeg62-turbo-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libcurl4-openssl-dev libopenmpi-dev openmpi-bin"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "verlc: installing Debian packages:$missing" >&2
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
$SUDO apt-get install -y -qq --no-install-recommends $missing >&2
