package memmodel

import (
	"strings"
	"testing"
)

// Test.Features names what each shape of the suite uses, computed from the parsed test.
func TestFeaturesOfSuite(t *testing.T) {
	want := map[string]string{
		"MP+fence+wait":                      "",
		"LB+fadd_nbi+put":                    "fetch_nbi",
		"MP+fetch_nbi+quiet+ld":              "fetch_nbi",
		"MP+putsig_nbi+wait":                 "putsig_nbi,signals",
		"MixW+st64+ld32":                     "mixed_width",
		"MP+put32lo+fence+put32hi+wait+ld64": "mixed_width",
		"SB+threads":                         "threads",
		"MP+ptr+ptr":                         "ptr_store",
		"MP+ctx+quiet":                       "contexts",
		"MP+team_barrier":                    "teams",
		"MP+quiet+allreduce":                 "collectives",
		"MP+sync":                            "sync",
		"MP+putsig+wait":                     "signals",
		"MP+putsig+sigfetch+ld":              "signals,signal_fetch",
		"AMO+inc+put":                        "amo_inc",
		"AMO+finc+for+fand":                  "amo_inc,amo_bitwise",
		"MP+wait_any+index":                  "polls",
		"MP+wait_all_vector":                 "polls",
		"PutNBI+reuse":                       "put_from_buffer",
		"Get+dst+ld":                         "get_into_location",
		"MP+quiet+alltoall":                  "collectives,call_variants",
		"MP+putsig+signal_wait":              "signals,call_variants",
		"MP+ctx+destroy":                     "contexts,call_variants",
		"Dev+put_warp+fence+put_block":       "device_calls",
		"Dev+ctx_group_putsigs":              "putsig_nbi,contexts,signals,device_calls",
	}
	seen := map[string]bool{}
	for _, tt := range suite(t) {
		w, ok := want[tt.Name]
		if !ok {
			continue
		}
		seen[tt.Name] = true
		if got := tt.Features().String(); got != w {
			t.Errorf("%s: features %q, want %q", tt.Name, got, w)
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("%s is not in testdata", n)
		}
	}
}

// The features no suite test has, on programs written for them.
func TestFeaturesOfShapes(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"PE0 | PE1 | PE2 | PE3 ;\nbarrier {0,1,3} | barrier {0,1,3} | | barrier {0,1,3} ;\nexists (x@0=1)", "teams,irregular_team"},
		{"PE0 | PE1 ;\nputsig x@1 1 s@1 set 1 | test_any r0 s,y == 1,1 ;\nexists (1:r0=0)", "signals,polls,poll_vector,mixed_poll"},
		{"PE0 | PE1 ;\nputsig x@1 1 s@1 set 1 | get r0 s@0 ;\n | get s@1 x@0 ;\nexists (1:r0=0)", "signals,get_into_location,signal_buffer"},
	} {
		tt, err := Parse("shape", []byte("SHMEM shape\n"+c.src+"\n"))
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		if got := tt.Features().String(); got != c.want {
			t.Errorf("%q: features %q, want %q", c.src, got, c.want)
		}
	}
}

// A runner's skip is the set difference: what the test uses and the runner lacks.
func TestFeatureSetDifference(t *testing.T) {
	s := Features(FetchNBI, MixedWidth, Threads)
	runner := AllFeatures.Minus(Features(MixedWidth, Teams))
	if got := s.Minus(runner); got != Features(MixedWidth) {
		t.Errorf("%v minus %v = %v, want mixed_width", s, runner, got)
	}
	if !s.Minus(AllFeatures).Empty() {
		t.Errorf("%v minus every feature is not empty", s)
	}
	all := AllFeatures.String()
	back, err := ParseFeatures(all)
	if err != nil || back != AllFeatures {
		t.Errorf("ParseFeatures(%q) = %v, %v", all, back, err)
	}
	if _, err := ParseFeatures("fetch_nbi,warp_shuffle"); err == nil || !strings.Contains(err.Error(), `"warp_shuffle"`) {
		t.Errorf("an unknown feature is not refused by name: %v", err)
	}
	if n := len(AllFeatures.List()); n != int(numFeatures) {
		t.Errorf("AllFeatures has %d features, want %d", n, numFeatures)
	}
}

// A test a runner lacks a feature of has a power row that says which, and counts for nothing.
func TestPowerNotRunRow(t *testing.T) {
	var nbi *Test
	for _, tt := range suite(t) {
		if tt.Name == "LB+fadd_nbi+put" {
			nbi = tt
		}
	}
	if nbi == nil {
		t.Fatal("LB+fadd_nbi+put is not in testdata")
	}
	p, err := NotRunPower(nbi, Strict, DefaultOptions(), AllFeatures.Minus(Features(FetchNBI, Teams)))
	if err != nil {
		t.Fatal(err)
	}
	if p.NotRun != Features(FetchNBI) || p.Verdict != Allowed {
		t.Errorf("not-run row %+v, want verdict Allowed and not run for fetch_nbi", p)
	}
	var out strings.Builder
	PrintPower(&out, "test", []Power{p})
	if !strings.Contains(out.String(), "LB+fadd_nbi+put  strict  Allowed           -     -          -       -  fetch_nbi\n") ||
		!strings.Contains(out.String(), "weak outcome seen on 0 of 0 Allowed (test, mode) rows (100%), 0 forbidden states observed; 1 rows not run") {
		t.Errorf("power table:\n%s", out.String())
	}
}
