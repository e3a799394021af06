// Hello prints one line per PE: the smallest Roxamen program.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/roxamen/roxamen/shmem"
)

func main() {
	w, err := shmem.Init(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello from PE %d of %d on %s\n", w.MyPE(), w.NPEs(), w.Device())
	if err := w.Finalize(); err != nil {
		log.Fatal(err)
	}
}
