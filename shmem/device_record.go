package shmem

import (
	"fmt"
	"sync"

	"github.com/roxamen/roxamen/kernels"
)

// DeviceRecordDecoder names what a device library's call recorded in this PE's abort block: the
// error kind (matched with errors.Is) and the detail of the error the host call that synchronizes
// with the kernel (SyncStream, Module.Sync) returns.
type DeviceRecordDecoder func(w *World, r kernels.AbortRecord) (kind error, detail string)

var deviceDecoders sync.Map // uint8 -> DeviceRecordDecoder

// RegisterDeviceRecord makes the host report the abort records of call (a device library's own
// call code, 0x90 and up: the runtime's are below) with decode, as the runtime reports its own (a
// bad PE, a wait that gave up). Libraries built on roxshmem.h whose kernels check what only the
// device sees (shmem/ep's expert indices) register theirs from an init func. It panics on a
// runtime code or a second registration of one code: programming errors.
func RegisterDeviceRecord(call uint8, decode DeviceRecordDecoder) {
	if call < 0x90 || decode == nil {
		panic(fmt.Sprintf("shmem.RegisterDeviceRecord(%#x): want a library call code (0x90 and up) and a decoder", call))
	}
	if _, dup := deviceDecoders.LoadOrStore(call, decode); dup {
		panic(fmt.Sprintf("shmem.RegisterDeviceRecord(%#x): registered twice", call))
	}
}

func deviceRecordDecoder(call uint8) (DeviceRecordDecoder, bool) {
	d, ok := deviceDecoders.Load(call)
	if !ok {
		return nil, false
	}
	return d.(DeviceRecordDecoder), true
}
