package shmem

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Errors name the call the user made (CtxP, not CtxPut) and, for a nil team or context, the PE
// of the process's World instead of an unknown one.
func TestErrorsNameTheCall(t *testing.T) {
	job(t, 1, func(w *World) error {
		x, err := Alloc[int64](w, 4)
		if err != nil {
			return err
		}
		c, err := w.CreateCtx(0)
		if err != nil {
			return err
		}
		defer c.Destroy()
		_, gerr := CtxG(c, x, 9, 0)
		for call, err := range map[string]error{
			"CtxP":      CtxP(c, x, 9, 1, 0),
			"CtxG":      gerr,
			"CtxPutNBI": CtxPutNBI(c, x, 9, []int64{1}, 0),
		} {
			if err == nil || !strings.HasPrefix(err.Error(), "shmem: "+call+" on PE 0: ") {
				return fmt.Errorf("%s out of bounds: %v; want it named %s on PE 0", call, err, call)
			}
		}
		dst, src := x, x
		err = AllReduce(context.Background(), nil, dst, src, OpSum)
		if err == nil || !strings.Contains(err.Error(), "AllReduce on PE 0") || strings.Contains(err.Error(), "?") {
			return fmt.Errorf("AllReduce on a nil team: %v; want it to name PE 0", err)
		}
		if err := CtxP(nil, x, 0, 1, 0); err == nil || !strings.Contains(err.Error(), "CtxP on PE 0") {
			return fmt.Errorf("CtxP on a nil context: %v; want it to name PE 0", err)
		}
		return nil
	})
}

// A cgroup file is named from /, also on a real machine (root "/").
func TestCgroupShown(t *testing.T) {
	for _, c := range []struct{ root, file, want string }{
		{"/", "/sys/fs/cgroup/job/memory.max", "/sys/fs/cgroup/job/memory.max"},
		{"/tmp/x", "/tmp/x/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
	} {
		if got := cgroupShown(c.root, c.file); got != c.want {
			t.Errorf("cgroupShown(%q, %q) = %q, want %q", c.root, c.file, got, c.want)
		}
	}
}

// Counts in messages read as words: "1 element", "2 entries".
func TestErrorsCountWords(t *testing.T) {
	job(t, 1, func(w *World) error {
		x, err := Alloc[int64](w, 1)
		if err != nil {
			return err
		}
		err = WaitUntilAll(context.Background(), x, []bool{false, false}, CmpEQ, 0)
		if err == nil || !strings.Contains(err.Error(), "status has 2 entries for 1 element") {
			return fmt.Errorf("WaitUntilAll with 2 status entries on 1 element: %v", err)
		}
		return nil
	})
}
