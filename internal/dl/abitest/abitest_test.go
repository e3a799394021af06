package abitest

import "testing"

// TestCheck compiles a program that prints two sizes and compares them with their Go values.
func TestCheck(t *testing.T) {
	Check(t, Program{Source: `#include <stdio.h>
#include <stdint.h>
int main(void) { printf("sizeof(int64_t) %zu\n", sizeof(int64_t)); printf("key %s\n", "pe"); return 0; }
`}, map[string]int64{"sizeof(int64_t)": 8}, map[string]string{"key": "pe"})
}
