//go:build race

package shmem

// raceOn: the race detector slows the in-process jobs some tenfold; the collectives table then
// runs a smaller set.
const raceOn = true
