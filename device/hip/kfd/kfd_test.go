package kfd

import (
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl/abitest"
	"github.com/roxamen/roxamen/internal/testkit"
)

// TestABI compiles a C program against libhsakmt-dev's hsakmttypes.h and compares every size,
// offset and constant this package uses. It skips without the header (FAILS under ROX_TEST_KFD,
// which test/run.sh sets as root, where it installs the header).
func TestABI(t *testing.T) {
	src := `#include <stdio.h>
#include <stddef.h>
#include <hsakmttypes.h>
#define P(n, v) printf("%s %lld\n", n, (long long)(v))
int main(void) {
	HsaMemFlags f;
	P("sys.size", sizeof(HsaSystemProperties)); P("sys.NumNodes", offsetof(HsaSystemProperties, NumNodes));
	P("sys.PlatformRev", offsetof(HsaSystemProperties, PlatformRev));
	P("res.size", sizeof(HsaQueueResource)); P("res.QueueId", offsetof(HsaQueueResource, QueueId));
	P("res.Doorbell", offsetof(HsaQueueResource, QueueDoorBell)); P("res.Wptr", offsetof(HsaQueueResource, QueueWptrValue));
	P("res.Rptr", offsetof(HsaQueueResource, QueueRptrValue)); P("res.ErrorReason", offsetof(HsaQueueResource, ErrorReason));
	P("node.size", sizeof(HsaNodeProperties)); P("node.NumFComputeCores", offsetof(HsaNodeProperties, NumFComputeCores));
	P("node.DeviceId", offsetof(HsaNodeProperties, DeviceId)); P("node.LocationId", offsetof(HsaNodeProperties, LocationId));
	P("node.NumSdmaEngines", offsetof(HsaNodeProperties, NumSdmaEngines));
	P("node.NumSdmaXgmiEngines", offsetof(HsaNodeProperties, NumSdmaXgmiEngines));
	P("node.NumSdmaQueuesPerEngine", offsetof(HsaNodeProperties, NumSdmaQueuesPerEngine));
	P("flags.size", sizeof(HsaMemFlags));
	f.Value = 0; f.ui32.NonPaged = 1; P("flags.NonPaged", f.Value);
	f.Value = 0; f.ui32.HostAccess = 1; P("flags.HostAccess", f.Value);
	f.Value = 0; f.ui32.ExecuteAccess = 1; P("flags.ExecuteAccess", f.Value);
	f.Value = 0; f.ui32.Uncached = 1; P("flags.Uncached", f.Value);
	f.Value = 0; f.ui32.NoNUMABind = 1; P("flags.NoNUMABind", f.Value);
	P("HSA_QUEUE_SDMA", HSA_QUEUE_SDMA); P("HSA_QUEUE_SDMA_XGMI", HSA_QUEUE_SDMA_XGMI);
	P("HSA_QUEUE_PRIORITY_NORMAL", HSA_QUEUE_PRIORITY_NORMAL); P("status.size", sizeof(HSAKMT_STATUS));
	P("HSAKMT_STATUS_INVALID_PARAMETER", HSAKMT_STATUS_INVALID_PARAMETER);
	P("HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED", HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED);
	P("HSAKMT_STATUS_MEMORY_ALIGNMENT", HSAKMT_STATUS_MEMORY_ALIGNMENT);
	P("queueid.size", sizeof(HSA_QUEUEID));
	return 0;
}
`
	var sp systemProperties
	var res queueResource
	want := map[string]int64{
		"sys.size": int64(unsafe.Sizeof(sp)), "sys.NumNodes": int64(unsafe.Offsetof(sp.NumNodes)),
		"sys.PlatformRev": int64(unsafe.Offsetof(sp.PlatformRev)),
		"res.size":        int64(unsafe.Sizeof(res)), "res.QueueId": int64(unsafe.Offsetof(res.QueueID)),
		"res.Doorbell": int64(unsafe.Offsetof(res.Doorbell)), "res.Wptr": int64(unsafe.Offsetof(res.WritePtr)),
		"res.Rptr": int64(unsafe.Offsetof(res.ReadPtr)), "res.ErrorReason": int64(unsafe.Offsetof(res.ErrorReason)),
		"node.size": nodePropsSize, "node.NumFComputeCores": offNumFComputeCores, "node.DeviceId": offDeviceID,
		"node.LocationId": offLocationID, "node.NumSdmaEngines": offNumSdmaEngines,
		"node.NumSdmaXgmiEngines": offNumSdmaXgmiEngines, "node.NumSdmaQueuesPerEngine": offNumSdmaQueuesPerEng,
		"flags.size": 4, "flags.NonPaged": memNonPaged, "flags.HostAccess": memHostAccess,
		"flags.ExecuteAccess": memExecute, "flags.Uncached": memUncached, "flags.NoNUMABind": memNoNUMABind,
		"HSA_QUEUE_SDMA": queueSDMA, "HSA_QUEUE_SDMA_XGMI": queueSDMAXGMI, "HSA_QUEUE_PRIORITY_NORMAL": priorityNormal,
		"status.size": int64(unsafe.Sizeof(Status(0))), "HSAKMT_STATUS_INVALID_PARAMETER": 3,
		"HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED": 20, "HSAKMT_STATUS_MEMORY_ALIGNMENT": 37,
		"queueid.size": int64(unsafe.Sizeof(res.QueueID)),
	}
	abitest.Check(t, abitest.Program{Source: src, Header: "hsakmttypes.h", Install: "apt-get install libhsakmt-dev",
		Require: "ROX_TEST_KFD"}, want, nil)
	if s := Status(3).Error(); s != "HSAKMT_STATUS_INVALID_PARAMETER" {
		t.Errorf("Status(3) = %s", s)
	}
}

// TestNoKFD: on a machine without /dev/kfd (this one, and CI) Open says so, as ErrNoDevice.
func TestNoKFD(t *testing.T) {
	if _, err := os.Stat(DevicePath); err == nil {
		t.Skip(DevicePath + " exists: an AMD GPU driver is loaded")
	}
	k, err := Open()
	if err == nil {
		k.Close()
		t.Fatal("Open succeeded without " + DevicePath)
	}
	if !errors.Is(err, device.ErrNoDevice) || !strings.Contains(err.Error(), DevicePath) {
		t.Fatalf("Open: %v: want ErrNoDevice naming %s", err, DevicePath)
	}
}

// TestLibraryLoads: Debian's libhsakmt1 has every entry point bound here (skips without it).
func TestLibraryLoads(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/" + Library); err != nil {
		testkit.Need(t, "ROX_TEST_KFD", "%s not installed (apt-get install libhsakmt1)", Library)
	}
	if err := load(); err != nil {
		t.Fatal(err)
	}
}
