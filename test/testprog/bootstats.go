package main

import (
	"context"
	"fmt"

	"github.com/roxamen/roxamen/shmem"
)

func init() { scenarios["bootstats"] = bootStats }

// bootStats prints, on every PE, the bootstrap traffic its Init handled (InitReport: what its
// process sent and received, the rendezvous server's included where it hosts it), one line
// "bootstats: PE P msgs M bytes B transport msgs TM bytes received TB" (TM, TB: the transport
// phase's, where the default rails are chosen), then meets the others in a barrier. The launcher tests
// compare the busiest PE and the root across the star and the tree.
func bootStats(ctx context.Context, w *shmem.World) error {
	var msgs, bytes int64
	var transport shmem.BootTraffic
	for _, p := range w.InitReport().Phases {
		msgs += p.Boot.MsgsSent + p.Boot.MsgsRecv
		bytes += p.Boot.BytesSent + p.Boot.BytesRecv
		if p.Name == shmem.PhaseTransport {
			transport = p.Boot
		}
	}
	fmt.Printf("bootstats: PE %d msgs %d bytes %d transport msgs %d bytes received %d\n", w.MyPE(), msgs, bytes,
		transport.MsgsSent+transport.MsgsRecv, transport.BytesRecv)
	return w.BarrierAll(ctx)
}
