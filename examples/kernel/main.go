// Kernel runs a user's GPU kernel on Roxamen: allreduce.hip, compiled to allreduce.ptx with
// clang-19 (go generate), is loaded with World.LoadModule and launched on every PE with
// Module.LaunchAll; it sums each PE's array into every PE with put-with-signal. The program checks
// every element against the sum computed on the host.
//
//	roxrun -n 2 ./examples/kernel                   # the committed clang-19 PTX
//	roxrun -n 2 ./examples/kernel -image my.ptx     # a code object of your own (nvcc, hipcc)
//
// It builds its own PTX on purpose, not through go generate ./kernels: it is the user's side, a
// kernel compiled against kernels/include and loaded with LoadModule (kernels/PREFIXES.md).
package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
)

//go:generate clang-19 -x cuda --cuda-gpu-arch=sm_90 --cuda-device-only -nocudainc -nocudalib -S -O3 -Wall -Wextra -Werror -g0 -fno-ident -I../../kernels/include -o allreduce.ptx allreduce.hip

//go:embed allreduce.ptx
var allreducePTX []byte

func main() {
	image := flag.String("image", "", "code object to load instead of the embedded allreduce.ptx")
	n := flag.Int("n", 1<<20+3, "floats per PE")
	calls := flag.Int("calls", 3, "all-reduces to run, each on fresh data")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	me, np := w.MyPE(), w.NPEs()
	log.SetPrefix(fmt.Sprintf("PE %d: ", me))
	img := allreducePTX
	if *image != "" {
		if img, err = os.ReadFile(*image); err != nil {
			log.Fatal(err)
		}
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		log.Fatal(err)
	}
	data, err := shmem.Alloc[float32](w, *n)
	if err != nil {
		log.Fatal(err)
	}
	recv, err := shmem.Alloc[float32](w, *n)
	if err != nil {
		log.Fatal(err)
	}
	sig, err := shmem.Alloc[uint64](w, 1)
	if err != nil {
		log.Fatal(err)
	}
	for call := 1; call <= *calls; call++ {
		// Every PE draws every PE's input from the same seed, so each can check the sum. Small
		// integers keep float sums exact in any order.
		seed := uint64(call)*1000003 + 17
		inputs := make([][]float32, np)
		for pe := range inputs {
			r := rand.New(rand.NewPCG(seed, uint64(pe)))
			inputs[pe] = make([]float32, *n)
			for i := range inputs[pe] {
				inputs[pe][i] = float32(r.IntN(2001) - 1000)
			}
		}
		if err := data.Put(0, inputs[me], me); err != nil {
			log.Fatal(err)
		}
		if err := mod.LaunchAll(ctx, "ring_allreduce", device.D1(1), device.D1(512), 0,
			data.Device(), recv.Device(), sig.Device(), uint64(*n), uint64(call)); err != nil {
			log.Fatal(err)
		}
		got := make([]float32, *n)
		if err := data.Get(0, got, me); err != nil {
			log.Fatal(err)
		}
		for i := range got {
			var want float32
			for pe := range inputs {
				want += inputs[pe][i]
			}
			if got[i] != want {
				log.Fatalf("all-reduce %d: element %d is %v, want %v", call, i, got[i], want)
			}
		}
	}
	if me == 0 {
		fmt.Printf("kernel: %d all-reduces of %d floats over %d PEs on %s: every element right\n", *calls, *n, np, w.Device())
	}
	if err := mod.Unload(); err != nil {
		log.Fatal(err)
	}
	if err := w.Finalize(); err != nil {
		log.Fatal(err)
	}
}
