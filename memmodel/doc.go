// Package memmodel is Roxamen's API-level memory model: what a PE may observe for every sequence
// of roxshmem calls, stated axiomatically (herd-style) in two modes, with a litmus-test parser and
// printer, an enumerator of candidate executions, herd-style verdicts, and the conformance harness
// that checks a real backend against the model. It imports only the standard library. Next to
// this file, LITMUS.md describes the litmus format and MODEL.md states the model in prose,
// precise enough to reimplement.
//
// # Events and relations
//
// Each litmus instruction becomes events (Events): plain loads and stores (st, ld) go through the
// issuing PE's caches; puts, gets, AMOs, put-with-signal (two events: data, then signal) and
// wait_until are network accesses at the target's memory; fence, quiet and barrier are events
// without a location. A candidate execution (Execution) adds rf (reads-from), co (per-location
// coherence order) and fr (from-reads), and the API-preserved order ord from program order:
//
//   - fence orders delivery of puts, AMOs, put-with-signal and (Options.FenceOrdersStores) plain
//     stores to the same target PE; quiet and barrier complete everything before them;
//   - put-with-signal delivers its data before its signal; wait_until and barrier acquire;
//   - blocking gets and fetching AMOs order later accesses (Options.BlockingFetchOrders);
//   - a PE's plain accesses to one location are coherent (program order per location).
//
// fence and quiet are per communication context, and per thread of a multi-threaded PE (columns
// PEn.t). The rest of the API (MODEL.md §3b) lowers to the same events: non-blocking fetching
// AMOs are AMOs that are not blocking fetches; a put from a source buffer is a plain read of the
// buffer, performed any time up to completion, whose value the put writes; a get into a location
// is a read whose value a network write of the destination carries; a store through
// roxshmem_ptr is a plain store to a peer's word; wait_until_all/any/some and the test family
// read each word once, the candidate choosing the outcome returned (acquiring on a success); team
// barriers and syncs, all-reduce and broadcast order memory as barrier and sync do among their
// members (a broadcast from its root only); a collective call is an event in program order, so a
// PE's later collective is ordered after its earlier one and order passes along chains of them.
//
// # Axioms
//
// Strict: every memory event is one instant; acyclic(ord | rf | co | fr), and an AMO reads the
// write immediately co-before it among AMOs (Options.AtomicAllWrites: among all writes;
// Options.SameWidthAtomicity: among those of its own width).
//
// CacheBypass (Bypass): network accesses act on memory, plain accesses on the PE's caches. A plain
// load has two instants, the moment the cached copy it reads was taken from memory and the moment
// it executes; a plain store has two, its execution and its arrival in memory. Only an acquire
// (wait_until, barrier) pins a later load's memory instant after it; only a release (quiet,
// barrier) pins an earlier store's arrival before it; a PE always sees its own plain stores. The
// same acyclicity over the instants is the axiom. Strict is Bypass with each pair merged, so every
// outcome Strict allows Bypass allows too.
//
// # What Bypass allows and Strict forbids, and why hardware shows it
//
// Every such shape in testdata, with the mechanism:
//
//   - CoRR+put: two plain loads of a word a put just wrote return 1, then 0. The put lands in
//     memory (or the GPU's L2) without invalidating the L1; the two loads may be served by
//     different non-coherent caches (AMD's scalar cache and vector L1) or one may refill a line the
//     other still holds stale.
//   - Big+4PE+12: plain loads on the owner disagree with blocking gets on a third PE about the order
//     of two puts to one word: the gets read memory, the loads read stale cached copies.
//   - MP+quiet+fetchAMO, MP+putsig+fetch+ld, WRC+get+fetch+ld: the flag is read with a fetching AMO,
//     which executes at memory (NIC or L2 atomics) and is not an acquire, so the plain load of the
//     data that follows hits a line cached before the data arrived. wait_until invalidates; an AMO
//     does not.
//   - MP+fence+get+quiet+ld: quiet releases (completes this PE's operations, writes dirty lines
//     back) but does not invalidate, so the plain load after it may still be stale.
//   - MP+st+fence+st+gets, MP+st+fence+put+fetch: fence orders deliveries but, in Bypass, does not
//     write plain stores back; the data store may sit dirty in a write-back cache (AMD's L2 for
//     coarse-grained memory, read by peers over xGMI or by a copy engine straight from HBM) after the
//     flag is visible.
//   - CoWR+st+fence+fetch: an AMO on the PE's own word executes at memory and misses the PE's dirty
//     plain store.
//   - CoWW+st+fence+writeback: the dirty line holding a plain store is written back after a later
//     put to the same word, overwriting it in memory.
//
// # Deciding
//
// Check lists every allowed final state (herd's States); Decide returns only the verdict, with a
// search pruned by the condition; Enumerate lists every execution with its relations. Tests check
// that the three agree.
//
// # Conformance
//
// Runner is what a backend implements; Conform runs a test many times, prints a litmus7-style
// Histogram and returns a *ForbiddenError for any outcome the selected mode forbids. The host
// backend's runner lives in tools/litmusrun; `roxrun litmus --run N` drives it.
//
// Test.Features says which of the language's shapes beyond the core a test uses (Feature:
// fetch_nbi, putsig_nbi, mixed_width, threads, ptr_store, contexts, teams, irregular_team,
// collectives, sync, signals, signal_fetch, amo_inc, amo_bitwise, polls, poll_vector, mixed_poll,
// put_from_buffer, get_into_location, signal_buffer); each runner declares the FeatureSet it
// supports, and Test.Unsupported, the set difference, is what it skips and why (the power
// table's "not run" column, NotRunPower). MODEL.md §8 lists what each runner supports.
package memmodel
