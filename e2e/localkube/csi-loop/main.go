// csi-loop is the CSI driver behind localkube's StorageClass "expandable": every volume is an XFS
// filesystem in a sparse file on the node that uses it, mounted through a loop device, and it grows while a
// pod uses it (PVC 1Gi -> 2Gi, and `df` in the running pod shows 2Gi). local-path-provisioner, the default
// class, hands out plain directories, which have no size to grow.
//
// It runs on every node (a DaemonSet pod, privileged: it calls mkfs.xfs, mount, losetup and xfs_growfs), and
// a volume lives on one node: its topology is that node (NodeGetInfo tells the kubelet the key, CreateVolume
// puts the volume there), so the scheduler puts the pod where its volume is, and the claim binds on the node
// where its first pod lands (WaitForFirstConsumer). The upstream external-provisioner runs beside each driver
// in its node-deployment mode: it provisions and deletes the volumes of its own node only. The upstream
// external-resizer (one of them leads) asks ControllerExpandVolume, which has nothing to do centrally; the
// kubelet then calls NodeExpandVolume on the volume's node, which grows the file, the loop device and XFS.
//
// Why our own driver: the upstream csi-driver-host-path (which also backs volumes with files) and the
// node-driver-registrar are not served by the Go module proxy on our machines. So this driver is small and
// answers the kubelet's plugin-registration API itself, the registrar's job.
//
// Why XFS and not ext4: ext4 grows while mounted only for a process with CAP_SYS_RESOURCE, which these
// VMs withhold even from root (resize2fs: "Permission denied to resize filesystem"); XFS's grow needs
// CAP_SYS_ADMIN, which root has. XFS is also the filesystem Kafka's documentation recommends.
//
// Every call is logged in one line to stderr (localkube's logs/csi-loop.log).
package main

import (
	"context"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

const (
	version = "1.0.0"
	// The CSI spec versions the kubelet may speak to us.
	csiVersion = "1.0.0"
)

func main() {
	name := flag.String("driver-name", "loop.csi.localkube", "the CSI driver name (the StorageClass's provisioner)")
	endpoint := flag.String("endpoint", "", "path of the CSI unix socket (kubelet and sidecars connect here)")
	registry := flag.String("registration-dir", "", "the kubelet's plugins_registry folder")
	dir := flag.String("volumes", "", "folder of the volumes' backing files")
	nodeID := flag.String("node-id", "", "this node's name")
	loopDevices := flag.Int("loop-devices", 256, "make device nodes /dev/loop0..N-1 where missing (see loop.go)")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *endpoint == "" || *registry == "" || *dir == "" || *nodeID == "" {
		log.Fatal("--endpoint, --registration-dir, --volumes and --node-id are required")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Fatal(err)
	}
	if err := makeLoopDeviceNodes(*loopDevices); err != nil {
		log.Fatal(err)
	}
	vols := &volumes{dir: *dir}

	csiServer := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(csiServer, &identity{name: *name})
	csi.RegisterControllerServer(csiServer, &controller{vols: vols, nodeID: *nodeID})
	csi.RegisterNodeServer(csiServer, &node{vols: vols, nodeID: *nodeID})
	serve(csiServer, *endpoint)

	// Only once the CSI socket answers: the kubelet calls NodeGetInfo as soon as it sees this one.
	regServer := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	registration.RegisterRegistrationServer(regServer, &registrar{name: *name, endpoint: *endpoint})
	regSocket := filepath.Join(*registry, *name+"-reg.sock")
	serve(regServer, regSocket)
	log.Printf("%s %s serving %s, registering at %s", *name, version, *endpoint, regSocket)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	log.Printf("stopping on %v", <-stop)
	regServer.Stop()
	csiServer.Stop()
	// Removing the registration socket tells the kubelet the driver is gone.
	for _, socket := range []string{regSocket, *endpoint} {
		_ = os.Remove(socket)
	}
}

// serve listens on a unix socket (replacing one a previous run left) and serves on it in the background.
func serve(server *grpc.Server, socket string) {
	if err := os.MkdirAll(filepath.Dir(socket), 0o750); err != nil {
		log.Fatal(err)
	}
	if err := os.Remove(socket); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	listener, err := net.Listen("unix", socket)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := server.Serve(listener); err != nil {
			log.Fatalf("serving %s: %v", socket, err)
		}
	}()
}

func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	began := time.Now()
	resp, err := handler(ctx, req)
	took := time.Since(began).Round(time.Millisecond)
	if err != nil {
		log.Printf("%s {%v} failed after %s: %v", path.Base(info.FullMethod), req, took, err)
	} else {
		log.Printf("%s {%v} -> {%v} in %s", path.Base(info.FullMethod), req, resp, took)
	}
	return resp, err
}

type identity struct {
	csi.UnimplementedIdentityServer
	name string
}

func (i *identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.name, VendorVersion: version}, nil
}

func (i *identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (
	*csi.GetPluginCapabilitiesResponse, error) {
	service := &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
		Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}
	// Volumes are reachable from their own node only: the provisioner then asks CreateVolume for the
	// claim's node and gives the PersistentVolume that node's affinity.
	topology := &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
		Type: csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}}
	expansion := &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{
		Type: csi.PluginCapability_VolumeExpansion_ONLINE}}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{
		{Type: service}, {Type: topology}, {Type: expansion}}}, nil
}

func (i *identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// registrar answers the kubelet's plugin watcher, which found our socket in its plugins_registry folder.
type registrar struct {
	registration.UnimplementedRegistrationServer
	name, endpoint string
}

func (r *registrar) GetInfo(context.Context, *registration.InfoRequest) (*registration.PluginInfo, error) {
	return &registration.PluginInfo{Type: registration.CSIPlugin, Name: r.name, Endpoint: r.endpoint,
		SupportedVersions: []string{csiVersion}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, status *registration.RegistrationStatus) (
	*registration.RegistrationStatusResponse, error) {
	if !status.PluginRegistered {
		log.Printf("the kubelet refused the registration: %s", status.Error)
	}
	return &registration.RegistrationStatusResponse{}, nil
}
