package shmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/kernels"
)

var errLibRecord = errors.New("a library's device check failed")

func init() {
	RegisterDeviceRecord(0x9f, func(w *World, r kernels.AbortRecord) (error, string) {
		return errLibRecord, fmt.Sprintf("library call on PE %d saw %d", r.PE, int32(r.Detail))
	})
}

// A device library's own abort record is reported through its registered decoder: its kind and
// detail, the call that synchronized, this PE; runtime codes and a second registration are refused.
func TestDeviceRecordDecoder(t *testing.T) {
	w, err := Init(context.Background(), WithHeapSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	neg := int32(-7)
	rec := uint64(1)<<63 | uint64(0x9f)<<48 | uint64(0)<<32 | uint64(uint32(neg))
	err = w.deviceRecordError("SyncStream", rec, 1, nil)
	if !errors.Is(err, errLibRecord) || !strings.Contains(err.Error(), "SyncStream on PE 0") || !strings.Contains(err.Error(), "library call on PE 0 saw -7") {
		t.Fatalf("got %v", err)
	}
	for _, c := range []uint8{kernels.CallBadPE, 0x9f} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterDeviceRecord(%#x) did not panic", c)
				}
			}()
			RegisterDeviceRecord(c, func(*World, kernels.AbortRecord) (error, string) { return nil, "" })
		}()
	}
}
