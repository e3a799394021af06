//go:build race

package shmem

// raceEnabled: the race detector maps shadow memory as the heap grows, so tests that limit the
// address space skip under it; it also slows the in-process jobs some tenfold, so the collectives
// table runs a smaller set under it.
const raceEnabled = true
