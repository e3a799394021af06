package pmix

import (
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl/abitest"
)

// abiProgram prints, for every struct field and constant this package mirrors, a line
// "name value" computed by the C compiler from the installed PMIx headers.
const abiProgram = `#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <pmix.h>
#define S(t) printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define O(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))
#define C(c) printf("%s %lld\n", #c, (long long)(c))
#define K(k) printf("%s %s\n", #k, k)
int main(void) {
	S(pmix_proc_t); O(pmix_proc_t, nspace); O(pmix_proc_t, rank);
	S(pmix_value_t); O(pmix_value_t, type); O(pmix_value_t, data);
	O(pmix_value_t, data.flag); O(pmix_value_t, data.string); O(pmix_value_t, data.integer);
	O(pmix_value_t, data.uint16); O(pmix_value_t, data.uint32);
	S(pmix_info_t); O(pmix_info_t, key); O(pmix_info_t, flags); O(pmix_info_t, value);
	S(pmix_status_t); S(pmix_rank_t); S(pmix_data_type_t); S(pmix_scope_t); S(pmix_info_directives_t);
	S(pmix_nspace_t); S(pmix_key_t); S(bool); S(int);
	C(PMIX_MAX_NSLEN); C(PMIX_MAX_KEYLEN); C(PMIX_RANK_WILDCARD);
	C(PMIX_SUCCESS); C(PMIX_ERR_TIMEOUT); C(PMIX_ERR_NOT_FOUND);
	C(PMIX_BOOL); C(PMIX_STRING); C(PMIX_INT); C(PMIX_UINT16); C(PMIX_UINT32);
	C(PMIX_GLOBAL);
	K(PMIX_JOB_SIZE); K(PMIX_LOCAL_RANK); K(PMIX_LOCAL_SIZE); K(PMIX_NODEID); K(PMIX_HOSTNAME);
	K(PMIX_TIMEOUT); K(PMIX_COLLECT_DATA);
	return 0;
}
`

// goABI is the same facts from the Go mirrors; strings are the keys' values.
func goABI() (map[string]int64, map[string]string) {
	var (
		p  proc
		v  value
		in info
	)
	nums := map[string]int64{
		"sizeof(pmix_proc_t)":            int64(unsafe.Sizeof(p)),
		"pmix_proc_t.nspace":             int64(unsafe.Offsetof(p.nspace)),
		"pmix_proc_t.rank":               int64(unsafe.Offsetof(p.rank)),
		"sizeof(pmix_value_t)":           int64(unsafe.Sizeof(v)),
		"pmix_value_t.type":              int64(unsafe.Offsetof(v.typ)),
		"pmix_value_t.data":              int64(unsafe.Offsetof(v.data)),
		"pmix_value_t.data.flag":         int64(unsafe.Offsetof(v.data)), // every member at the union's start
		"pmix_value_t.data.string":       int64(unsafe.Offsetof(v.data)),
		"pmix_value_t.data.integer":      int64(unsafe.Offsetof(v.data)),
		"pmix_value_t.data.uint16":       int64(unsafe.Offsetof(v.data)),
		"pmix_value_t.data.uint32":       int64(unsafe.Offsetof(v.data)),
		"sizeof(pmix_info_t)":            int64(unsafe.Sizeof(in)),
		"pmix_info_t.key":                int64(unsafe.Offsetof(in.key)),
		"pmix_info_t.flags":              int64(unsafe.Offsetof(in.flags)),
		"pmix_info_t.value":              int64(unsafe.Offsetof(in.value)),
		"sizeof(pmix_status_t)":          4, // the int32 every binding returns
		"sizeof(pmix_rank_t)":            int64(unsafe.Sizeof(p.rank)),
		"sizeof(pmix_data_type_t)":       int64(unsafe.Sizeof(v.typ)),
		"sizeof(pmix_scope_t)":           1, // the uint8 scope argument of PMIx_Put
		"sizeof(pmix_info_directives_t)": int64(unsafe.Sizeof(in.flags)),
		"sizeof(pmix_nspace_t)":          int64(unsafe.Sizeof(p.nspace)),
		"sizeof(pmix_key_t)":             int64(unsafe.Sizeof(in.key)),
		"sizeof(bool)":                   1, // boolInfo writes one byte
		"sizeof(int)":                    4, // intInfo writes an int32
		"PMIX_MAX_NSLEN":                 maxNSLen,
		"PMIX_MAX_KEYLEN":                maxKeyLen,
		"PMIX_RANK_WILDCARD":             rankWildcard,
		"PMIX_SUCCESS":                   statusSuccess,
		"PMIX_ERR_TIMEOUT":               statusErrTimeout,
		"PMIX_ERR_NOT_FOUND":             statusErrNotFound,
		"PMIX_BOOL":                      typeBool,
		"PMIX_STRING":                    typeString,
		"PMIX_INT":                       typeInt,
		"PMIX_UINT16":                    typeUint16,
		"PMIX_UINT32":                    typeUint32,
		"PMIX_GLOBAL":                    scopeGlobal,
	}
	keys := map[string]string{
		"PMIX_JOB_SIZE":     keyJobSize,
		"PMIX_LOCAL_RANK":   keyLocalRank,
		"PMIX_LOCAL_SIZE":   keyLocalSize,
		"PMIX_NODEID":       keyNodeID,
		"PMIX_HOSTNAME":     keyHostname,
		"PMIX_TIMEOUT":      attrTimeout,
		"PMIX_COLLECT_DATA": attrCollect,
	}
	return nums, keys
}

// pmixCflags are the compiler flags for the installed headers: pkg-config's, else Debian's
// libpmix-dev location (its headers live outside /usr/include).
func pmixCflags() []string {
	if out, err := exec.Command("pkg-config", "--cflags", "pmix").Output(); err == nil {
		return strings.Fields(string(out))
	}
	return []string{"-I/usr/lib/x86_64-linux-gnu/pmix2/include"}
}

// TestABI compiles abiProgram against the installed PMIx headers (Debian libpmix-dev) and
// checks that every size, offset, constant and key agrees with the Go mirrors. It skips, saying
// why, when there is no C compiler or no headers, unless ROX_TEST_PMIX (CI as root) requires
// them.
func TestABI(t *testing.T) {
	nums, keys := goABI()
	abitest.Check(t, abitest.Program{Source: abiProgram, Cflags: pmixCflags(), Header: "pmix.h",
		Install: "Debian: apt-get install libpmix-dev", Require: "ROX_TEST_PMIX"}, nums, keys)
}
