//go:build race

package shmem

// raceEnabled: the race detector maps shadow memory as the heap grows, so tests that limit the
// address space skip under it.
const raceEnabled = true
