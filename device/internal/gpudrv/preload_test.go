package gpudrv

import (
	"reflect"
	"testing"
)

// The .entry lookup that preloads a PTX image's kernels where the driver has no cuFuncLoad.
func TestPTXEntries(t *testing.T) {
	ptx := []byte(`.version 8.4
.target sm_90
.visible .entry chk_putsig(
	.param .u64 chk_putsig_param_0
)
{ ret; }
.func _ZL4helpv()
{ ret; }
	.entry local_kernel()
{ ret; }
.weak .entry $weak_one()
{ ret; }
// .entry commented_out(
`)
	var got []string
	for _, m := range ptxEntry.FindAllSubmatch(ptx, -1) {
		got = append(got, string(m[1]))
	}
	if want := []string{"chk_putsig", "local_kernel", "$weak_one"}; !reflect.DeepEqual(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
}
