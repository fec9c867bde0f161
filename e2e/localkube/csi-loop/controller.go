package main

import (
	"context"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TopologyKey is the one topology segment of a volume: the node that holds its backing file.
const TopologyKey = "topology.loop.csi.localkube/node"

// controller makes and removes the backing files of this node's volumes (called by the external-provisioner
// beside it) and answers the external-resizer.
type controller struct {
	csi.UnimplementedControllerServer
	vols   *volumes
	nodeID string
}

func (c *controller) topology() []*csi.Topology {
	return []*csi.Topology{{Segments: map[string]string{TopologyKey: c.nodeID}}}
}

// onThisNode refuses a volume asked for another node: the provisioner beside each driver provisions for
// its own node only, so this means a provisioner that is not in its node-deployment mode.
func (c *controller) onThisNode(requirement *csi.TopologyRequirement) error {
	wanted := append(requirement.GetPreferred(), requirement.GetRequisite()...)
	if len(wanted) == 0 {
		return nil
	}
	for _, topology := range wanted {
		if topology.GetSegments()[TopologyKey] == c.nodeID {
			return nil
		}
	}
	return status.Errorf(codes.ResourceExhausted, "node %s cannot hold a volume for %v", c.nodeID, wanted)
}

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, status.Error(codes.InvalidArgument, "no snapshots or clones: volumes start empty")
	}
	if err := c.onThisNode(req.GetAccessibilityRequirements()); err != nil {
		return nil, err
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
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: req.GetName(), CapacityBytes: bytes,
		AccessibleTopology: c.topology()}}, nil
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
	// A volume still mounted (its loop device attached) stays; mounts release their device when they go.
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

// ControllerExpandVolume has nothing to do centrally (the resizer that asks may run on any node): the
// volume's node grows the backing file, the loop device and the filesystem (NodeExpandVolume), with the
// volume mounted or at its next mount.
func (c *controller) ControllerExpandVolume(_ context.Context, req *csi.ControllerExpandVolumeRequest) (
	*csi.ControllerExpandVolumeResponse, error) {
	if _, err := c.vols.file(req.GetVolumeId()); err != nil {
		return nil, err
	}
	bytes, err := size(req.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: bytes, NodeExpansionRequired: true}, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (
	*csi.ValidateVolumeCapabilitiesResponse, error) {
	if _, err := c.vols.file(req.GetVolumeId()); err != nil {
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
