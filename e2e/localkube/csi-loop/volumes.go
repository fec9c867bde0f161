package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// When a claim asks for no size.
	defaultSize = int64(1) << 30
	// mkfs.xfs refuses anything smaller (a sparse file: the unused part costs nothing).
	minimumSize = int64(300) << 20
	// Sizes are whole filesystem blocks.
	blockSize = int64(4096)
)

// The external-provisioner names volumes pvc-<uid>: the volume ID is that name, and the backing file
// is <volumes>/<id>.img.
var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// volumes is the folder of backing files. One lock for every call that changes a volume: they are
// few, and each is quick (a sparse file, a new XFS).
type volumes struct {
	dir string
	mu  sync.Mutex
}

func (v *volumes) file(id string) (string, error) {
	if !validID.MatchString(id) {
		return "", status.Errorf(codes.InvalidArgument, "volume ID %q is not one of ours", id)
	}
	return filepath.Join(v.dir, id+".img"), nil
}

// existing is the backing file of a volume that exists, and its size.
func (v *volumes) existing(id string) (string, int64, error) {
	file, err := v.file(id)
	if err != nil {
		return "", 0, err
	}
	info, err := os.Stat(file)
	if os.IsNotExist(err) {
		return "", 0, status.Errorf(codes.NotFound, "no volume %s", id)
	}
	if err != nil {
		return "", 0, status.Error(codes.Internal, err.Error())
	}
	return file, info.Size(), nil
}

// size picks the bytes for a capacity range: the required size in whole blocks, at least minimumSize,
// defaultSize (or the limit, if less) when nothing is required, never above the limit.
func size(capacity *csi.CapacityRange) (int64, error) {
	required, limit := capacity.GetRequiredBytes(), capacity.GetLimitBytes()
	if required == 0 {
		required = defaultSize
		if limit > 0 {
			required = min(required, limit)
		}
	}
	bytes := max((required+blockSize-1)/blockSize*blockSize, minimumSize)
	if limit > 0 && bytes > limit {
		return 0, status.Errorf(codes.OutOfRange, "%d bytes (required %d, at least %d) exceed the limit of %d",
			bytes, capacity.GetRequiredBytes(), minimumSize, limit)
	}
	return bytes, nil
}

func fits(bytes int64, capacity *csi.CapacityRange) bool {
	limit := capacity.GetLimitBytes()
	return bytes >= capacity.GetRequiredBytes() && (limit == 0 || bytes <= limit)
}

// checkCapabilities accepts filesystem volumes (XFS, or no type given) for one node.
func checkCapabilities(capabilities []*csi.VolumeCapability) error {
	if len(capabilities) == 0 {
		return status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	for _, capability := range capabilities {
		mount := capability.GetMount()
		if mount == nil {
			return status.Error(codes.InvalidArgument, "only filesystem volumes, no block volumes")
		}
		if fsType := mount.GetFsType(); fsType != "" && fsType != "xfs" {
			return status.Errorf(codes.InvalidArgument, "only xfs, not %s", fsType)
		}
		switch capability.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
			csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
			return status.Error(codes.InvalidArgument, "a volume lives on one node: no multi-node access modes")
		}
	}
	return nil
}

// Loop devices and mounts

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", status.Errorf(codes.Internal, "%s %s: %v: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// loopDevices are the loop devices attached to a backing file.
func loopDevices(file string) ([]string, error) {
	out, err := run("losetup", "--noheadings", "--output", "NAME", "--associated", file)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

type mount struct{ point, source string }

// mounted tells whether /proc/self/mountinfo holds a mount that matches.
func mounted(match func(mount) bool) (bool, error) {
	text, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, status.Error(codes.Internal, err.Error())
	}
	for _, line := range strings.Split(string(text), "\n") {
		// ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
		fields := strings.Fields(line)
		separator := slices.Index(fields, "-")
		if separator < 5 || separator+2 >= len(fields) {
			continue
		}
		if match(mount{point: unescape(fields[4]), source: unescape(fields[separator+2])}) {
			return true, nil
		}
	}
	return false, nil
}

func mountedAt(point string) (bool, error) {
	return mounted(func(m mount) bool { return m.point == point })
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(text string) string {
	var b strings.Builder
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' && i+4 <= len(text) {
			if code, err := strconv.ParseUint(text[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(code))
				i += 3
				continue
			}
		}
		b.WriteByte(text[i])
	}
	return b.String()
}
