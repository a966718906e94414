#!/bin/sh
# bench/scale on a lent machine where nothing can be installed (#47): the device tool carries the repository and
# .device/, made here by `bench/scale-device.sh pack`: Node (xz), node_modules (xz), wrk and redis-server with the
# Debian libraries they and the origin's system codecs load, and the six photographs. On the machine,
# `bench/scale-device.sh run <out>` unpacks them, prints the CPU topology and runs bench/scale with the BENCH_*
# settings it is given; the reports land in <out>. `bench/scale-device.sh test FILE…` runs tests there the same way
# (origin/test/cores.test.js: the origin's defaults on a 16-core affinity mask), `… node FILE` a script
# (bench/ceiling.js).
set -e
cd "$(dirname "$0")/.."
D=.device
case "$1" in
pack)
  rm -rf $D && mkdir -p $D/lib $D/fallback $D/bin
  for name in Path Autumn ColdRipple BytheWater Kite FallenLeaf; do
    mkdir -p $D/wallpapers/$name/contents/images
    cp -L /usr/share/wallpapers/$name/contents/images/1920x1080.jpg $D/wallpapers/$name/contents/images/
  done
  for lib in libturbojpeg.so.0 libwebp.so.7 libluajit-5.1.so.2 liblzf.so.1 libjemalloc.so.2; do
    cp -L /lib/x86_64-linux-gnu/$lib $D/lib/
  done
  # redis-server's own, used only where the machine lacks them
  for lib in libsystemd.so.0 libgcrypt.so.20 libgpg-error.so.0 libcap.so.2 liblz4.so.1 libatomic.so.1; do
    cp -L /lib/x86_64-linux-gnu/$lib $D/fallback/
  done
  cp /usr/bin/wrk /usr/bin/redis-server $D/bin/
  node=$(dirname "$(dirname "$(command -v node)")")
  tar -C "$(dirname "$node")" -cf - "$(basename "$node")/bin/node" | xz -T0 -6 >$D/node.tar.xz
  tar --exclude=node_modules/typescript --exclude=node_modules/prettier --exclude=node_modules/playwright-core \
    --exclude='node_modules/@types' -cf - node_modules | xz -T0 -6 >$D/node_modules.tar.xz
  du -sh $D
  ;;
run | test | node)
  mkdir -p /tmp/scale-node && [ -x /tmp/scale-node/*/bin/node ] || tar -C /tmp/scale-node -xJf $D/node.tar.xz
  [ -d node_modules/sharp ] || tar -xJf $D/node_modules.tar.xz
  PATH="$(dirname /tmp/scale-node/*/bin/node):$PWD/$D/bin:$PATH"
  LD_LIBRARY_PATH=$PWD/$D/lib
  ldd $D/bin/redis-server | grep -q 'not found' && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$PWD/$D/fallback
  export PATH LD_LIBRARY_PATH WALLPAPERS_DIR=$PWD/$D/wallpapers JEMALLOC=$PWD/$D/lib/libjemalloc.so.2
  case "$1" in
  test) shift && exec node --test "$@" ;;
  node) shift && exec node "$@" ;;
  esac
  out=${2:?bench/scale-device.sh run <out>}
  (lscpu; grep . /sys/devices/system/cpu/cpu*/topology/thread_siblings_list; free -g; uname -a) >"$out/machine.txt" 2>&1
  node bench/scale.js
  cp bench/reports/*-"${BENCH_SCALE_REPORT:-scale}".* "$out/"
  ;;
*)
  echo "usage: bench/scale-device.sh pack | run <out> | test FILE… | node FILE" >&2
  exit 2
  ;;
esac
