package memmodel_test

import (
	"fmt"
	"os"

	"github.com/roxamen/roxamen/memmodel"
)

func ExampleCheck() {
	t, err := memmodel.Parse("mp.litmus", []byte(`SHMEM MP+quiet+fetchAMO
PE0 | PE1 ;
put x@1 1 | fetch r1 y@1 ;
quiet     | ld r0 x ;
put y@1 1 | ;
exists (1:r1=1 /\ 1:r0=0)
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range []memmodel.Mode{memmodel.Strict, memmodel.Bypass} {
		r, err := memmodel.Check(t, m, memmodel.DefaultOptions())
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(m, r.Verdict, r.States)
	}
	r, _ := memmodel.Check(t, memmodel.Bypass, memmodel.DefaultOptions())
	r.Print(os.Stdout)
	// Output:
	// strict Forbidden [1:r0=0; 1:r1=0; 1:r0=1; 1:r1=0; 1:r0=1; 1:r1=1;]
	// bypass Allowed [1:r0=0; 1:r1=0; 1:r0=0; 1:r1=1; 1:r0=1; 1:r1=0; 1:r0=1; 1:r1=1;]
	// Test MP+quiet+fetchAMO bypass
	// States 4
	// 1:r0=0; 1:r1=0;
	// 1:r0=0; 1:r1=1;
	// 1:r0=1; 1:r1=0;
	// 1:r0=1; 1:r1=1;
	// Ok
	// Witnesses
	// Positive: 1 Negative: 3
	// Condition exists (1:r1=1 /\ 1:r0=0)
	// Observation MP+quiet+fetchAMO Sometimes 1 3
	// Verdict bypass Allowed
}

func ExampleParseError() {
	_, err := memmodel.Parse("bad.litmus", []byte("SHMEM Bad\nPE0 ;\nput x@1 ;\nexists (x@1=0)\n"))
	fmt.Println(err)
	// Output:
	// bad.litmus:3:9: want a number, found ";"
}
