package ep

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/roxamen/roxamen/shmem"
)

// configFields are Config's fields as New compares them across PEs, in declaration order
// (TestConfigFieldsCompared holds the list to the struct).
var configFields = []struct {
	name string
	get  func(Config) int64
	show func(int64) string
}{
	{"Hidden", func(c Config) int64 { return int64(c.Hidden) }, nil},
	{"TopK", func(c Config) int64 { return int64(c.TopK) }, nil},
	{"Experts", func(c Config) int64 { return int64(c.Experts) }, nil},
	{"MaxTokens", func(c Config) int64 { return int64(c.MaxTokens) }, nil},
	{"DType", func(c Config) int64 { return int64(c.DType) }, func(v int64) string { return DType(v).String() }},
	{"Mode", func(c Config) int64 { return int64(c.Mode) }, func(v int64) string { return Mode(v).String() }},
}

// agreeConfig checks that every PE passed New the same Config. Buffers of different shapes can
// still be the same size (BF16 rows of 16 elements, F32 rows of 8), and their calls then
// exchange garbage with no error: every PE puts its Config into its row of a small symmetric
// array on every PE and compares the rows. Every PE sees the same rows, so when any two differ
// every PE fails, and New's own checks that follow agree on every PE too.
func agreeConfig(w *shmem.World, cfg Config) (err error) {
	const call = "ep.New"
	me, npes, nf := w.MyPE(), w.NPEs(), len(configFields)
	mine := make([]int64, nf)
	for i, f := range configFields {
		mine[i] = f.get(cfg)
	}
	rows, err := shmem.Alloc[int64](w, npes*nf)
	if err != nil {
		return fmt.Errorf("%s on PE %d: exchanging the Config: %w", call, me, err)
	}
	defer func() { err = errors.Join(err, w.Free(rows.Mem())) }()
	for pe := 0; pe < npes; pe++ {
		if err := rows.Put(me*nf, mine, pe); err != nil {
			return fmt.Errorf("%s on PE %d: exchanging the Config: %w", call, me, err)
		}
	}
	// The barrier completes every PE's puts before any PE reads its rows.
	if err := w.BarrierAll(context.Background()); err != nil {
		return fmt.Errorf("%s on PE %d: exchanging the Config: %w", call, me, err)
	}
	all := make([]int64, npes*nf)
	if err := rows.Get(0, all, me); err != nil {
		return fmt.Errorf("%s on PE %d: exchanging the Config: %w", call, me, err)
	}
	for pe := 0; pe < npes; pe++ {
		theirs := all[pe*nf : (pe+1)*nf]
		var diffs []string
		for i, f := range configFields {
			if theirs[i] != mine[i] {
				show := func(v int64) string { return fmt.Sprint(v) }
				if f.show != nil {
					show = f.show
				}
				diffs = append(diffs, fmt.Sprintf("%s is %s on PE %d and %s on PE %d", f.name, show(mine[i]), me, show(theirs[i]), pe))
			}
		}
		if diffs != nil {
			return &shmem.Error{Call: call, PE: me, Kind: shmem.ErrMismatch,
				Detail: "every PE must pass the same Config: " + strings.Join(diffs, ", ")}
		}
	}
	return nil
}
