package pmix

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl"
)

// Library is the file dlopen'ed: PMIx's client library under its SONAME (Debian 12: libpmix2
// 4.2, the one Open MPI 4.1 and Slurm's mpi/pmix plugin serve).
const Library = "libpmix.so.2"

// ErrNoLibrary is returned (wrapped, with the loader's message) when libpmix.so.2 cannot be
// loaded or lacks an entry point this package needs. Match it with errors.Is.
var ErrNoLibrary = errors.New(Library + " is not available")

// The C types this package mirrors, from pmix_common.h (PMIx 4.2). Every struct crosses into C
// by pointer only; TestABI checks each size and offset against the installed headers.
const (
	maxNSLen  = 255 // PMIX_MAX_NSLEN
	maxKeyLen = 511 // PMIX_MAX_KEYLEN
)

// proc mirrors pmix_proc_t: { pmix_nspace_t nspace; pmix_rank_t rank; }.
type proc struct {
	nspace [maxNSLen + 1]byte
	rank   uint32
}

// value mirrors pmix_value_t: { pmix_data_type_t type; union { ... } data; }. The union's
// largest member is pmix_envar_t (two pointers and a char), 24 bytes, pointer-aligned.
type value struct {
	typ  uint16
	_    [6]byte
	data [3]uint64
}

// info mirrors pmix_info_t: { pmix_key_t key; pmix_info_directives_t flags; pmix_value_t value; }.
type info struct {
	key   [maxKeyLen + 1]byte
	flags uint32
	_     [4]byte
	value value
}

// pmix_status_t values this package names (pmix_common.h).
const (
	statusSuccess     = 0   // PMIX_SUCCESS
	statusErrTimeout  = -24 // PMIX_ERR_TIMEOUT
	statusErrNotFound = -46 // PMIX_ERR_NOT_FOUND
)

// pmix_data_type_t values (pmix_common.h).
const (
	typeBool   = 1  // PMIX_BOOL: bool
	typeString = 3  // PMIX_STRING: char *
	typeInt    = 6  // PMIX_INT: int
	typeUint16 = 13 // PMIX_UINT16
	typeUint32 = 14 // PMIX_UINT32
)

// pmix_scope_t PMIX_GLOBAL: a Put is seen by processes on every node.
const scopeGlobal = 3

// rankWildcard is PMIX_RANK_WILDCARD (UINT32_MAX-1): job-level keys are read with it.
const rankWildcard = 1<<32 - 2

// The keys this package reads and the attributes it passes (pmix_common.h).
const (
	keyJobSize   = "pmix.job.size"   // PMIX_JOB_SIZE (uint32_t) #procs in this job
	keyLocalRank = "pmix.lrank"      // PMIX_LOCAL_RANK (uint16_t) rank on this node within this job
	keyLocalSize = "pmix.local.size" // PMIX_LOCAL_SIZE (uint32_t) #procs in this job on this node
	keyNodeID    = "pmix.nodeid"     // PMIX_NODEID (uint32_t) node identifier of the specified proc
	keyHostname  = "pmix.hname"      // PMIX_HOSTNAME (char*) name of the host the specified proc is on
	attrTimeout  = "pmix.timeout"    // PMIX_TIMEOUT (int) seconds before the operation times out
	attrCollect  = "pmix.collect"    // PMIX_COLLECT_DATA (bool) collect the put data in a fence
)

// The bindings, one per entry point, each with its prototype from pmix.h (PMIx 4.2).
var lib struct {
	// pmix_status_t PMIx_Init(pmix_proc_t *proc, pmix_info_t info[], size_t ninfo);
	init func(p *proc, info *info, ninfo uint64) int32
	// pmix_status_t PMIx_Finalize(const pmix_info_t info[], size_t ninfo);
	finalize func(info *info, ninfo uint64) int32
	// pmix_status_t PMIx_Put(pmix_scope_t scope, const char key[], pmix_value_t *val);
	put func(scope uint8, key *byte, val *value) int32
	// pmix_status_t PMIx_Commit(void);
	commit func() int32
	// pmix_status_t PMIx_Fence(const pmix_proc_t procs[], size_t nprocs,
	//                          const pmix_info_t info[], size_t ninfo);
	fence func(procs *proc, nprocs uint64, info *info, ninfo uint64) int32
	// pmix_status_t PMIx_Get(const pmix_proc_t *proc, const char key[],
	//                        const pmix_info_t info[], size_t ninfo, pmix_value_t **val);
	get func(p *proc, key *byte, info *info, ninfo uint64, val **value) int32
	// void PMIx_Value_destruct(pmix_value_t *val);
	// (PMIX_VALUE_RELEASE is this, then free(): the value PMIx_Get returns is the caller's.)
	valueDestruct func(val *value)
	// const char* PMIx_Error_string(pmix_status_t status);
	errorString func(status int32) string
	// const char* PMIx_Get_version(void);
	getVersion func() string
	// void *malloc(size_t size); void free(void *ptr); from libc: the strings a Put passes are
	// C memory (a pmix_value_t handed to C holds no Go pointer), and the pmix_value_t PMIx_Get
	// returns is freed with free().
	malloc func(n uint64) unsafe.Pointer
	free   func(p unsafe.Pointer)
}

// symbols pairs each binding with its entry point, every one required.
func symbols() []dl.Sym {
	l := &lib
	return []dl.Sym{
		{Name: "PMIx_Init", Fn: &l.init},
		{Name: "PMIx_Finalize", Fn: &l.finalize},
		{Name: "PMIx_Put", Fn: &l.put},
		{Name: "PMIx_Commit", Fn: &l.commit},
		{Name: "PMIx_Fence", Fn: &l.fence},
		{Name: "PMIx_Get", Fn: &l.get},
		{Name: "PMIx_Value_destruct", Fn: &l.valueDestruct},
		{Name: "PMIx_Error_string", Fn: &l.errorString},
		{Name: "PMIx_Get_version", Fn: &l.getVersion},
	}
}

var (
	loadOnce sync.Once
	loadErr  error
)

// load opens Library once for the process.
func load() error {
	loadOnce.Do(func() { loadErr = open(Library) })
	return loadErr
}

// open dlopens name and binds every entry point (a failed dlopen binds nothing).
func open(name string) error {
	h, err := dl.Open(name)
	if err != nil {
		return fmt.Errorf("%w: dlopen %s: %v (Debian: apt-get install libpmix2)", ErrNoLibrary, name, err)
	}
	libc, err := dl.Open("libc.so.6")
	if err != nil {
		return fmt.Errorf("%w: dlopen libc.so.6: %v", ErrNoLibrary, err)
	}
	if err := h.Bind(symbols()...); err != nil {
		return fmt.Errorf("%w: %v (PMIx older than 4?)", ErrNoLibrary, err)
	}
	return libc.Bind(dl.Sym{Name: "malloc", Fn: &lib.malloc}, dl.Sym{Name: "free", Fn: &lib.free})
}

// Probe loads libpmix.so.2: nil, or an error matching ErrNoLibrary that says why.
func Probe() error { return load() }

// Version returns the loaded library's version string ("OpenPMIx 4.2.2, ...").
func Version() (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	return lib.getVersion(), nil
}

// StatusString is PMIx_Error_string: the name PMIx gives a status ("PMIX_ERR_TIMEOUT").
func StatusString(status int32) string {
	if load() != nil {
		return fmt.Sprintf("PMIx status %d", status)
	}
	return lib.errorString(status)
}
