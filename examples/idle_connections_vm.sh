#!/usr/bin/env bash
# Runs `examples/idle_connections.rs` inside a small virtual machine of its
# own, for connection counts the host's file-descriptor limit does not allow.
#
#   examples/idle_connections_vm.sh                  # 10 000, then 100 000 silent connections
#   examples/idle_connections_vm.sh 19900 100000     # the counts to run, one after the other
#
# Why it is shaped so: one server holding 100 000 connections needs a
# RLIMIT_NOFILE above 100 000, and a container started with a lower hard
# limit and without CAP_SYS_RESOURCE may never raise it. A VM has a kernel of
# its own, in which the example runs as the init process's child with any
# limit it needs. The VM is the least that runs the example: Debian's kernel
# (`linux-image-amd64`, downloaded with `apt-get download`), an initramfs of
# busybox, the example (stripped) and the C libraries `ldd` names, and a
# loopback interface — no disk, no network device. The example is the same
# binary the host runs and measures the same way (the server child's RSS
# growth per connection); only the kernel and its limits are the VM's.
#
# Software emulation (TCG) is the default: it is slow but idle connections
# need little CPU (100 000 open in two minutes on a 2-core host, the whole
# script with 10 000 and 100 000 in three). Set
# VM_ACCEL=kvm where /dev/kvm works. VM_MEM (default 8G) and VM_CPUS
# (default 2) size the guest.
#
# Packages it needs and does not find (qemu-system-x86, cpio, binutils for
# `strip`, busybox-static — which replaces a dynamic busybox) are installed
# with apt-get when it runs as root.
#
# The exit status is the first nonzero exit status of the runs, in order (the
# example's: 1 when a run is over `--max-per-conn-bytes 5000` or a limit
# stopped it, 2 when the server stopped answering), 3 when a run printed no
# result (the VM failed, timed out, or was cut short; its console log says
# how far it got), 4 when the VM could not be prepared.
set -euo pipefail

runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(10000 100000)
for n in "${runs[@]}"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "idle_connections_vm: '$n' is not a connection count" >&2; exit 4; }
done

root_dir=$(CDPATH= cd "$(dirname "$0")/.." && pwd)
work="$root_dir/target/idle-vm"
accel=${VM_ACCEL:-tcg}
mem=${VM_MEM:-8G}
cpus=${VM_CPUS:-2}

need_pkgs=()
command -v qemu-system-x86_64 >/dev/null || need_pkgs+=(qemu-system-x86)
command -v cpio >/dev/null || need_pkgs+=(cpio)
command -v strip >/dev/null || need_pkgs+=(binutils)
# Debian's busybox-static: the initramfs has no C library for a dynamic one.
static_busybox() { [ -x /bin/busybox ] && { ldd "$(readlink -f /bin/busybox)" 2>&1 || true; } | grep -q "not a dynamic"; }
static_busybox || need_pkgs+=(busybox-static)
if [ ${#need_pkgs[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "idle_connections_vm: needs ${need_pkgs[*]}: sudo apt-get install ${need_pkgs[*]}" >&2
        exit 4
    fi
    echo "installing ${need_pkgs[*]} (Debian)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

echo "building the example"
(cd "$root_dir" && cargo build --release --example idle_connections -p brisk)
exe="$root_dir/target/release/examples/idle_connections"

mkdir -p "$work"
kernel=$(ls "$work"/kernel/boot/vmlinuz-* 2>/dev/null | head -n1 || true)
if [ -z "$kernel" ]; then
    pkg=$({ apt-cache depends linux-image-amd64 2>/dev/null || true; } | awk '/Depends: linux-image-/ {print $2; exit}')
    [ -n "$pkg" ] || { echo "idle_connections_vm: apt-cache names no linux-image-amd64 kernel (a Debian machine with its package lists is needed)" >&2; exit 4; }
    echo "downloading $pkg (Debian)"
    (cd "$work" && rm -f linux-image-*.deb && apt-get download -q "$pkg" >/dev/null && dpkg -x linux-image-*.deb kernel)
    kernel=$(ls "$work"/kernel/boot/vmlinuz-* | head -n1)
fi

# The initramfs: busybox, the example and its libraries, and /init.
rootfs="$work/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs"/{bin,proc,sys,dev,tmp}
cp "$(readlink -f /bin/busybox)" "$rootfs/bin/busybox"
for tool in sh mount ip cat date nproc grep sed poweroff; do ln -s busybox "$rootfs/bin/$tool"; done
strip -o "$rootfs/bin/idle_connections" "$exe"
for lib in $(ldd "$exe" | grep -o '/[^ ]*'); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done
cat > "$rootfs/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
ip addr add 127.0.0.1/8 dev lo; ip link set lo up
ulimit -Hn 1048576 && ulimit -n 1048576
echo "vm: kernel $(cat /proc/sys/kernel/osrelease), $(nproc) CPUs, $(grep MemTotal /proc/meminfo | sed 's/  */ /g'), RLIMIT_NOFILE $(ulimit -n)"
for n in $(sed 's/.*brisk.runs=//; s/ .*//; s/,/ /g' /proc/cmdline); do
    echo "=== run: idle_connections --connections $n --per-source 10000 --max-per-conn-bytes 5000 ($(date -u +%H:%M:%S) UTC)"
    /bin/idle_connections --connections "$n" --per-source 10000 --max-per-conn-bytes 5000
    echo "=== exit $? ($(date -u +%H:%M:%S) UTC)"
done
poweroff -f
EOF
chmod +x "$rootfs/init"
(cd "$rootfs" && find . | cpio -o -H newc 2>/dev/null | gzip -1 > "$work/initramfs.gz")

log="$work/vm.log"
rm -f "$log"
echo "starting the VM ($accel, $cpus CPUs, $mem; $(basename "$kernel")); its console goes to $log (tail -f it to follow)"
list=$(IFS=,; echo "${runs[*]}")
# Bounded: 10 minutes to boot, and 20 minutes for each started 100 000
# connections of each run.
limit=600
for n in "${runs[@]}"; do limit=$((limit + 1200 * ((n + 99999) / 100000))); done
qemu_status=0
timeout "$limit" qemu-system-x86_64 -accel "$accel" -smp "$cpus" -m "$mem" -nic none \
    -kernel "$kernel" -initrd "$work/initramfs.gz" \
    -append "console=ttyS0 quiet panic=-1 brisk.runs=$list" \
    -display none -monitor none -serial "file:$log" -no-reboot </dev/null || qemu_status=$?
if [ "$qemu_status" = 124 ]; then
    echo "idle_connections_vm: the VM did not finish within ${limit} s" >&2
elif [ "$qemu_status" != 0 ]; then
    echo "idle_connections_vm: qemu failed (exit status $qemu_status)" >&2
fi
[ -f "$log" ] || { echo "idle_connections_vm: the VM wrote no console log" >&2; exit 3; }
tr -d '\r' < "$log" | grep -v -e '^\s*$' -e 'connections open (' -e 'SeaBIOS' -e 'Booting from' -e '\[' || true

# Each run's exit status, in order: the `=== exit` line after its `=== run`
# line and before the next one ("none" when it has none).
mapfile -t codes < <(tr -d '\r' < "$log" | awk '
    /^=== run: / { if (open) print "none"; open = 1; next }
    /^=== exit / && open { print $3; open = 0 }
    END { if (open) print "none" }')
status=0
for i in "${!runs[@]}"; do
    code=${codes[$i]:-none}
    if ! [[ "$code" =~ ^[0-9]+$ ]]; then
        echo "idle_connections_vm: no result for ${runs[$i]} connections (see $log)" >&2
        [ "$status" = 0 ] && status=3
    elif [ "$code" != 0 ] && [ "$status" = 0 ]; then
        status=$code
    fi
done
exit "$status"
