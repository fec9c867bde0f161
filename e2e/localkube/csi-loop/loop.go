package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// makeLoopDeviceNodes makes /dev/loop0..count-1 where they are missing. A container's /dev is a copy of the
// devices that existed when it started, so a loop device the kernel adds later (mount -o loop asks
// /dev/loop-control for a free one, which may be new) has no node in it, and the mount fails.
func makeLoopDeviceNodes(count int) error {
	for n := 0; n < count; n++ {
		path := fmt.Sprintf("/dev/loop%d", n)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := unix.Mknod(path, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil && !os.IsExist(err) {
			return fmt.Errorf("mknod %s: %w", path, err)
		}
	}
	return nil
}
