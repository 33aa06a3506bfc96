#!/usr/bin/env bash
# A second, newer Vulkan stack for the cooperative-matrix path: Mesa 26 lavapipe (VK_KHR_cooperative_matrix),
# glslang 15 (GL_KHR_cooperative_matrix) and the 1.4 validation layer, from Debian trixie(-backports), in a
# debootstrapped root under .cache/trixie. Nothing is installed on the machine itself.
#
#   run="$(tools/mesa_trixie.sh)"          # sets the root up once (root, network; ~2 min), prints the wrapper
#   "$run" .venv/bin/python tools/bench.py --sections kernels
#
# Why a root: trixie's Mesa needs glibc >= 2.39 (Debian 12 has 2.36), so the wrapper runs the given program
# (an ELF binary: the venv's python, not a script) under trixie's dynamic loader and libraries, with the
# Vulkan loader pointed at trixie's lavapipe and validation layer and trixie's glslangValidator and spirv-val
# first on PATH (they run the same way). Debian 12's Mesa 22.3 and bookworm-backports' 25.0 have no
# cooperative matrices. Idempotent: a second call only prints the wrapper. Progress goes to stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.cache/trixie"
SYS="$DIR/root"
RUN="$DIR/run"
MIRROR="http://deb.debian.org/debian"
PACKAGES="mesa-vulkan-drivers glslang-tools spirv-tools vulkan-validationlayers libvulkan1"

if [ ! -x "$RUN" ]; then
    command -v debootstrap >/dev/null || { echo "mesa_trixie: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    [ "$(id -u)" -eq 0 ] || { echo "mesa_trixie: debootstrap needs root" >&2; exit 1; }
    rm -rf "$SYS"
    mkdir -p "$DIR"
    echo "mesa_trixie: debootstrap trixie into $SYS" >&2
    debootstrap --variant=minbase trixie "$SYS" "$MIRROR" >"$DIR/debootstrap.log" 2>&1 \
        || { tail -5 "$DIR/debootstrap.log" >&2; exit 1; }
    printf 'deb %s trixie main\ndeb %s trixie-backports main\n' "$MIRROR" "$MIRROR" >"$SYS/etc/apt/sources.list"
    echo "mesa_trixie: installing $PACKAGES (Mesa from trixie-backports)" >&2
    chroot "$SYS" apt-get update -qq >&2
    chroot "$SYS" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -t trixie-backports $PACKAGES >"$DIR/apt.log" 2>&1 || { tail -5 "$DIR/apt.log" >&2; exit 1; }
    chroot "$SYS" apt-get clean
    LIBS="$SYS/usr/lib/x86_64-linux-gnu:$SYS/lib/x86_64-linux-gnu"
    mkdir -p "$DIR/bin"
    for tool in glslangValidator spirv-val; do
        printf '#!/bin/sh\nexec "%s/lib64/ld-linux-x86-64.so.2" --library-path "%s" "%s/usr/bin/%s" "$@"\n' \
            "$SYS" "$LIBS" "$SYS" "$tool" >"$DIR/bin/$tool"
        chmod +x "$DIR/bin/$tool"
    done
    cat >"$RUN.tmp" <<WRAP
#!/bin/sh
# Runs an ELF program with trixie's loader and libraries, Mesa 26 lavapipe and trixie's shader tools.
unset VK_ICD_FILENAMES
export VK_DRIVER_FILES="$SYS/usr/share/vulkan/icd.d/lvp_icd.json"
export VK_LAYER_PATH="$SYS/usr/share/vulkan/explicit_layer.d"
export PATH="$DIR/bin:\$PATH"
exec "$SYS/lib64/ld-linux-x86-64.so.2" --library-path "$LIBS" "\$@"
WRAP
    chmod +x "$RUN.tmp"
    mv "$RUN.tmp" "$RUN"
fi
echo "$RUN"
