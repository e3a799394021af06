package bootstrap

import "testing"

// TestDefaultShape: ROX_BOOTSTRAP_TREE=auto keeps a one-node job of up to OneNodeStarMax PEs in
// the star (measured faster there than the tree) and takes the tree above it, and across hosts
// above StarMax; on and off still force a shape.
func TestDefaultShape(t *testing.T) {
	for _, c := range []struct {
		mode   string
		r      Rank
		tree   bool
		layout bool
	}{
		{"auto", Rank{NPEs: 65, LocalNPEs: 65}, false, false},
		{"auto", Rank{NPEs: 256, LocalNPEs: 256}, false, false},
		{"auto", Rank{NPEs: 257, LocalNPEs: 257}, true, false},
		{"auto", Rank{NPEs: 130, LocalNPEs: 65, Layout: []int{65, 65}}, true, true},
		{"auto", Rank{NPEs: 64, LocalNPEs: 32, Layout: []int{32, 32}}, false, false},
		{"on", Rank{NPEs: 8, LocalNPEs: 8}, true, false},
		{"off", Rank{NPEs: 4096, LocalNPEs: 4096}, false, false},
	} {
		t.Setenv("ROX_BOOTSTRAP_TREE", c.mode)
		cfg := defaultConfig(c.r)
		if tree := cfg.PEAddr != nil; tree != c.tree || (cfg.Layout != nil) != c.layout {
			t.Errorf("ROX_BOOTSTRAP_TREE=%s, %d PEs (%d on this node, layout %v): tree %v, layout %v; want tree %v", c.mode, c.r.NPEs, c.r.LocalNPEs, c.r.Layout, tree, cfg.Layout, c.tree)
		}
	}
}
