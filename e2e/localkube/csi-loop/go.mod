module localkube/csi-loop

go 1.24.0

require (
	github.com/container-storage-interface/spec v1.11.0
	golang.org/x/sys v0.31.0
	google.golang.org/grpc v1.72.1
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af
	k8s.io/kubelet v0.34.10
)

require (
	golang.org/x/net v0.38.0 // indirect
	golang.org/x/text v0.23.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250303144028-a0af3efb3deb // indirect
)
