//go:build !race

package shmem

const raceEnabled = false
