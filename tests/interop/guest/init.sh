#!/bin/busybox sh
# The interop guest's init: loads the modules, brings eth0 up with the address
# given on the kernel command line (uroce.ip=A.B.C.D/N), adds the rxe device
# on it and then runs every job the host drops into the 9p share.
#
# Job protocol (tests/interop/guest/guest.py is the host side), in /jobs:
#   NAME.job   written by the host (renamed into place when complete)
#   NAME.run   the job, renamed by the guest when it starts it
#   NAME.pid   the PID of the shell running it
#   NAME.out   its standard output and error
#   NAME.rc    its exit status, written last (renamed into place)
# Jobs run concurrently: a server job keeps running while the next job starts.
/bin/busybox --install -s /bin
export PATH=/usr/bin:/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
while read -r m; do
  insmod "$m" || echo "init: insmod $m failed"
done < /modules.order
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none jobs /jobs || echo "init: no 9p share"

ip_arg=$(sed -n 's/.*uroce\.ip=\([^ ]*\).*/\1/p' /proc/cmdline)
ip link set lo up
ip link set eth0 up
ip addr add "$ip_arg" dev eth0
echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
rdma link add rxe0 type rxe netdev eth0
echo "init: $(uname -r) eth0 $ip_arg, $(ls /sys/class/infiniband)" > /jobs/ready.tmp
mv /jobs/ready.tmp /jobs/ready

cd /jobs
while :; do
  for j in /jobs/*.job; do
    [ -e "$j" ] || continue
    n=${j%.job}
    mv "$j" "$n.run"
    (
      sh "$n.run" > "$n.out" 2>&1 &
      echo $! > "$n.pid"
      wait $!
      echo $? > "$n.rc.tmp"
      mv "$n.rc.tmp" "$n.rc"
    ) &
  done
  usleep 50000
done
