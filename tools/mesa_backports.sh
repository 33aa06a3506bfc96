#!/usr/bin/env bash
# Unpack Mesa's lavapipe from Debian bookworm-backports (Mesa 25, Vulkan 1.4) into .cache/ without
# installing it or changing the system's apt sources, and print the environment that points the
# Vulkan loader at it:
#
#   eval "$(tools/mesa_backports.sh)"
#   .venv/bin/python tools/bench_overhead.py
#
# Why: Debian 12's lavapipe (Mesa 22.3) lacks shaderSampledImageArrayDynamicIndexing and
# shaderStorageImageArrayDynamicIndexing, which Dawn requires, so ORT's WebGPU EP finds no adapter.
# Idempotent: a second call only prints the environment. Progress goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.cache/mesa-backports"
PREFIX="$DIR/root"
LIBDIR="$PREFIX/usr/lib/x86_64-linux-gnu"
ICD="$DIR/lvp_icd.json"

if [ ! -f "$ICD" ]; then
    echo "mesa_backports: fetching mesa-vulkan-drivers from bookworm-backports into $DIR" >&2
    mkdir -p "$DIR/lists/partial" "$DIR/cache/archives/partial" "$DIR/debs"
    # the machine's own Debian mirror, as its apt sources name it
    mirror="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)"
    [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)"
    [ -n "$mirror" ] || { echo "mesa_backports: no Debian mirror in /etc/apt sources" >&2; exit 1; }
    echo "deb $mirror bookworm-backports main" >"$DIR/sources.list"
    cat >"$DIR/apt.conf" <<EOF
Dir::Etc::SourceList "$DIR/sources.list";
Dir::Etc::SourceParts "/dev/null";
Dir::State::Lists "$DIR/lists";
Dir::Cache "$DIR/cache";
APT::Sandbox::User "root";
EOF
    export APT_CONFIG="$DIR/apt.conf"
    apt-get update -qq >&2
    # libdrm: Mesa 25 needs >= 2.4.121 (bookworm has 2.4.114); its other dependencies are in bookworm.
    (cd "$DIR/debs" && apt-get download -qq \
        mesa-vulkan-drivers/bookworm-backports libdrm2/bookworm-backports \
        libdrm-amdgpu1/bookworm-backports >&2)
    rm -rf "$PREFIX"
    for deb in "$DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$PREFIX"; done
    api="$(sed -n 's/.*"api_version": *"\([^"]*\)".*/\1/p' "$PREFIX/usr/share/vulkan/icd.d/lvp_icd.json")"
    cat >"$ICD.tmp" <<EOF
{
    "ICD": {
        "api_version": "${api:-1.4.0}",
        "library_path": "$LIBDIR/libvulkan_lvp.so"
    },
    "file_format_version": "1.0.0"
}
EOF
    mv "$ICD.tmp" "$ICD"
fi

printf 'export VK_DRIVER_FILES=%q\n' "$ICD"
printf 'export VK_ICD_FILENAMES=%q\n' "$ICD"
printf 'export LD_LIBRARY_PATH=%q\n' "$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
