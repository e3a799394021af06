// Package seam owns the hooks through which the conformance runner (tools/litmusrun) and the
// runtime's tests reach the reordering delivery path without the runtime exporting it: package
// shmem sets each hook in an init func, the caller asserts the type it knows. seam imports
// nothing, so it sits in the lowest layer and any layer may reach it.
package seam

var (
	// Reorder returns a *shmem.World's reordering delivery path (a *nic.Reorder) when
	// ROX_DELIVERY=reorder, else nil (an untyped nil, also for a nil World).
	Reorder func(world any) any
	// CtxReorder returns a *shmem.Ctx's stream on the reordering delivery path (a
	// *nic.ReorderCtx), else nil (an untyped nil, also for a nil Ctx).
	CtxReorder func(ctx any) any
)
