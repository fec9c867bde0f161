package main

import (
	"context"
	"os"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// node mounts volumes for the kubelet. No staging: each publish mounts the backing file through a loop
// device (mount -o loop: the device is released with its mount, even when the node dies).
type node struct {
	csi.UnimplementedNodeServer
	vols   *volumes
	nodeID string
}

func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (
	*csi.NodePublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	n.vols.mu.Lock()
	defer n.vols.mu.Unlock()
	file, _, err := n.vols.existing(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	isMounted, err := mountedAt(target)
	if err != nil {
		return nil, err
	}
	if isMounted {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	options := append([]string{"loop"}, req.GetVolumeCapability().GetMount().GetMountFlags()...)
	if req.GetReadonly() {
		options = append(options, "ro")
	}
	if _, err := run("mount", "-t", "xfs", "-o", strings.Join(options, ","), file, target); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (
	*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "no target path")
	}
	if _, err := n.vols.file(req.GetVolumeId()); err != nil {
		return nil, err
	}
	n.vols.mu.Lock()
	defer n.vols.mu.Unlock()
	isMounted, err := mountedAt(target)
	if err != nil {
		return nil, err
	}
	if isMounted {
		if _, err := run("umount", target); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(target); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume grows the backing file to the size asked, makes the loop device see it, then grows XFS
// while mounted.
func (n *node) NodeExpandVolume(_ context.Context, req *csi.NodeExpandVolumeRequest) (
	*csi.NodeExpandVolumeResponse, error) {
	volumePath := req.GetVolumePath()
	isMounted, err := mountedAt(volumePath)
	if err != nil {
		return nil, err
	}
	if !isMounted {
		return nil, status.Errorf(codes.FailedPrecondition, "nothing mounted at %q", volumePath)
	}
	n.vols.mu.Lock()
	defer n.vols.mu.Unlock()
	file, current, err := n.vols.existing(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	bytes, err := size(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if current < bytes {
		if err := os.Truncate(file, bytes); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	bytes = max(current, bytes)
	devices, err := loopDevices(file)
	if err != nil {
		return nil, err
	}
	if len(devices) == 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not attached", req.GetVolumeId())
	}
	for _, device := range devices {
		if _, err := run("losetup", "--set-capacity", device); err != nil {
			return nil, err
		}
	}
	if _, err := run("xfs_growfs", volumePath); err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: bytes}, nil
}

// NodeGetVolumeStats feeds the kubelet's kubelet_volume_stats_* metrics.
func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (
	*csi.NodeGetVolumeStatsResponse, error) {
	volumePath := req.GetVolumePath()
	if req.GetVolumeId() == "" || volumePath == "" {
		return nil, status.Error(codes.InvalidArgument, "a volume ID and path are needed")
	}
	isMounted, err := mountedAt(volumePath)
	if err != nil {
		return nil, err
	}
	if !isMounted {
		return nil, status.Errorf(codes.NotFound, "nothing mounted at %s", volumePath)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(volumePath, &fs); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	unit := fs.Frsize
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * unit, Available: int64(fs.Bavail) * unit,
			Used: int64(fs.Blocks-fs.Bfree) * unit},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree),
			Used: int64(fs.Files - fs.Ffree)},
	}}, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (
	*csi.NodeGetCapabilitiesResponse, error) {
	var capabilities []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME, csi.NodeServiceCapability_RPC_GET_VOLUME_STATS} {
		capabilities = append(capabilities, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: capabilities}, nil
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.nodeID, AccessibleTopology: &csi.Topology{
		Segments: map[string]string{TopologyKey: n.nodeID}}}, nil
}
