// Package bootstrap finds out which PE this process is (Detect: roxrun or a foreign launcher) and
// connects it to the job's rendezvous service (Dial): a small key-value store with allgather
// and barrier, authenticated by a per-job token, that also tells every PE when another one dies.
// Under a launcher that runs a PMIx server (mpirun, srun --mpi=pmix), Dial learns the rest of
// the rank and the rendezvous address and token through PMIx (pmix.go).
//
// Two shapes carry the same API (Put, Get, Allgather, Barrier, Abort, Failed/Err/Exits, Close):
//
//   - Star (server.go, client.go): every PE holds one connection to the rendezvous server, which
//     stores every key, counts every collective and tells everyone of a failure. One round trip
//     per call, O(N) messages and, for an Allgather, O(N^2) bytes at the server.
//   - Tree (tree.go, client_tree.go): the server is the root of a k-ary tree over the PEs
//     (DefaultFanout 8). Collectives go up and down the tree (2 log_k N hops, O(k) messages at
//     any node), a key lives at the PE that owns hash(key) and is reached directly, failures are
//     reported up and flooded down. No node handles O(N) messages.
//
// Dial takes the tree for jobs above StarMax PEs, and above OneNodeStarMax on one node, where the
// star measured faster (ROX_BOOTSTRAP_TREE=auto; on: at any size; off: never) wherever the PEs' addresses can be had without the root handing out every one; DialConfig
// chooses explicitly and over any Network (the scale simulation, sim/, runs both shapes for
// thousands of virtual PEs over an in-memory network).
//
// How a PE finds its parent without asking the root: the root's address (ROX_BOOTSTRAP, or the
// launcher's convention, or PMIx) stays the only thing given; every other address is derived. On
// one node a PE listens on an abstract unix socket named by a hash of the job token and its PE
// number (UnixPEAddr): the token is per job, so names never collide across jobs; nothing has to
// be bound in advance, passed down or cleaned up (the name goes with the process), and a child
// that starts before its parent retries until ROX_TIMEOUT, as a PE does for the root. The
// alternatives were weighed: a TCP port derived from the token collides with whatever else
// holds the port and cannot be checked in advance; roxrun pre-binding every PE's socket and
// passing the fd works for the PEs roxrun forks itself but not for those it starts through ssh,
// nor for foreign launchers; PMIx's key-value store needs a fence, i.e. the launcher's own tree,
// which is exactly the piece that is missing without PMIx. Across nodes no address is derivable,
// so the launcher's help is taken where it exists:
//
//   - Under PMIx (mpirun, srun --mpi=pmix; pmix.go), every PE listens on TCP and publishes its
//     address with PMIx_Put in the commit and fence the PMIx path makes anyway (the launcher's
//     own fence, which scales); a PE then reads with PMIx_Get only the addresses of the PEs it
//     dials: its parent and the directory owners it uses. The tree is the one-level k-ary one.
//   - Under roxrun across hosts (hier.go), roxrun tells every PE and its server how many PEs each
//     host runs (ROX_LAYOUT). The tree becomes two-level: each node's first PE (its leader)
//     listens on TCP, registers at the root and reads its parent leader's address there, and
//     the leaders form the k-ary tree across nodes; within a node the abstract-socket tree
//     hangs under the leader. The root handles O(nodes) registrations, and its k children.
//   - Other foreign launchers across nodes (Slurm without PMIx, torchrun, Open MPI's variables
//     alone) give neither, so those jobs keep the star.
//
// Lifetimes: a Server lives until its Close, and whoever called NewServer closes it (roxrun, or a
// Client that hosts it because its Rank says Host). A Client lives until Close, which says goodbye
// so that its disconnection is not taken for a death; a process that exits without Close is
// reported to every other PE as dead. In tree mode an interior PE relays for its subtree, so Close
// is a wave: a PE says goodbye once its subtree has, and its links close only when the root has
// heard from everyone (at most ROX_TIMEOUT later); shmem.Finalize's barrier makes that wait short.
// A launcher that runs the server (roxrun) reports each PE's exit (Server.Exited): the others then
// learn how it ended (its status or signal, before Init or without Finalize), even when it ended
// before it ever joined. Once any PE has died or aborted, every pending and later call on every
// Client fails with a *PeerError naming it; the job cannot be resumed.
//
// Every blocking call ends at the latest after the timeout given to Dial (ROX_TIMEOUT), with a
// *TimeoutError that says what it waited for.
package bootstrap
