package main

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// controller makes, grows and removes backing files (called by external-provisioner and -resizer).
type controller struct {
	csi.UnimplementedControllerServer
	vols *volumes
}

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "no snapshots or clones: volumes start empty")
	}
	bytes, err := size(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	file, err := c.vols.file(req.GetName())
	if err != nil {
		return nil, err
	}
	c.vols.mu.Lock()
	defer c.vols.mu.Unlock()
	if info, err := os.Stat(file); err == nil { // made by an earlier call with this name
		if !fits(info.Size(), req.GetCapacityRange()) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes", req.GetName(), info.Size())
		}
		bytes = info.Size()
	} else if err := create(file, bytes); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: req.GetName(), CapacityBytes: bytes}}, nil
}

// create makes a sparse file with an XFS filesystem in it, under its final name only once complete.
// A new volume costs its log on disk (up to 64 MiB) and well under a second.
func create(file string, bytes int64) error {
	partial := file + ".partial"
	if err := os.WriteFile(partial, nil, 0o600); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer os.Remove(partial)
	if err := os.Truncate(partial, bytes); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if _, err := run("mkfs.xfs", "-q", "-f", partial); err != nil {
		return err
	}
	if err := os.Rename(partial, file); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	file, err := c.vols.file(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	c.vols.mu.Lock()
	defer c.vols.mu.Unlock()
	if _, err := os.Stat(file); os.IsNotExist(err) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	// A loop device nothing mounts (a publish whose mount failed) goes with the volume; a mounted one stops it.
	if err := detach(file); err != nil {
		return nil, err
	}
	devices, err := loopDevices(file)
	if err != nil {
		return nil, err
	}
	if len(devices) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still mounted through %v", req.GetVolumeId(),
			devices)
	}
	if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ControllerExpandVolume grows the backing file; the node then grows the loop device and the
// filesystem (NodeExpandVolume), with the volume mounted or at its next mount.
func (c *controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (
	*csi.ControllerExpandVolumeResponse, error) {
	bytes, err := size(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	c.vols.mu.Lock()
	defer c.vols.mu.Unlock()
	file, current, err := c.vols.existing(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if current < bytes {
		if err := os.Truncate(file, bytes); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: max(current, bytes), NodeExpansionRequired: true}, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (
	*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, _, err := c.vols.existing(req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (
	*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: rpcCapabilities(
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_EXPAND_VOLUME)}, nil
}

func rpcCapabilities(types ...csi.ControllerServiceCapability_RPC_Type) []*csi.ControllerServiceCapability {
	capabilities := make([]*csi.ControllerServiceCapability, 0, len(types))
	for _, t := range types {
		capabilities = append(capabilities, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{
			Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return capabilities
}
