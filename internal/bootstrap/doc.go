// Package bootstrap finds out which PE this process is (Detect: roxrun or a foreign launcher) and
// connects it to the job's rendezvous service (Dial): a small TCP key-value store with allgather
// and barrier, authenticated by a per-job token, that also tells every PE when another one dies.
// Under a launcher that runs a PMIx server (mpirun, srun --mpi=pmix), Dial learns the rest of
// the rank and the rendezvous address and token through PMIx (pmix.go).
//
// Lifetimes: a Server lives until its Close, and whoever called NewServer closes it (roxrun, or a
// Client that hosts it because its Rank says Host). A Client lives until Close, which says goodbye
// so that its disconnection is not taken for a death; a process that exits without Close is
// reported to every other PE as dead. A launcher that runs the server (roxrun) reports each PE's
// exit (Server.Exited): the others then learn how it ended (its status or signal, before Init or
// without Finalize), even when it ended before it ever joined. Once any PE has died or aborted, every pending and later
// call on every Client fails with a *PeerError naming it; the job cannot be resumed.
//
// Every blocking call ends at the latest after the timeout given to Dial (ROX_TIMEOUT), with a
// *TimeoutError that says what it waited for.
package bootstrap
