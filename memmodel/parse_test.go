package memmodel

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{"SHMEM T\nPE0 | PE1 ;\nput x@1 1 | wait y@0 == 1 ;\nexists (x@1=0)\n", "f:3:18: wait on PE1 names y@0"},
		{"SHMEM T\nPE0 | PE1 ;\nput x@1 1 ;\nexists (x@1=0)\n", "f:3:11: row has 1 cells, want 2"},
		{"SHMEM T\nPE0 ;\nfoo x ;\nexists (x@0=0)\n", `f:3:1: unknown instruction "foo"`},
		{"SHMEM T\nPE0 ;\nput x@99 1 ;\nexists (x@0=0)\n", "f:3:7: PE 99 out of range"},
		{"SHMEM T\nPE0 ;\nput x@1 one ;\nexists (x@0=0)\n", `f:3:9: want a number, found "one"`},
		{"SHMEM T\nPE0 | PE0 ;\n", "f:2:7: column PE0 appears twice"},
		{"SHMEM T\nPE0 ;\nwait x = 1 ;\nexists (x@0=0)\n", "f:3:8: want a comparison"},
		{"SHMEM T\nPE0 ;\nput x@1 1 ;\nexists (x@1=0 /\\ )\n", "f:4:18: want a condition term"},
		{"SHMEM T\nPE0 ;\nput x@1 1 ;\nexists (x@1=0)\nexpect strict=Maybe\n", `f:5:15: want Allowed or Forbidden, found "Maybe"`},
		{"SHMEM T\nPE0 | PE1 ;\nbarrier | ;\nexists (x@1=0)\n", "f:1:1: test T: PE1 runs 0 barriers"},
		{"SHMEM T\nPE0 ;\nld r0 x ;\nld r0 x ;\nexists (0:r0=0)\n", "f:1:1: test T: register r0 is written twice on PE0"},
		{"SHMEM T\nPE0 ;\nput x@1 1 ;\nexists (0:r9=0)\n", "f:1:1: test T: condition names register 0:r9"},
		{"SHMEM T\nPE0 ;\nputsig x@1 1 s@2 set 1 ;\nexists (x@1=0)\n", "f:3:14: putsig on PE0: signal s@2 is not on the data's PE 1"},
		{"SHMEM T\n(* open\nPE0 ;\n", "f:2:1: comment never closed"},
		{"SHMEM T\nPE0 ;\nput x@1 1 2 ;\n", `f:3:11: extra "2" after put`},
		{"SHMEM\n", "f:1:6: want the test name"},
		{"SHMEM T\nPE0 ;\nput x.mid@1 1 ;\nexists (x@1=0)\n", "f:3:5: variable x.mid: a half of word x is x.lo (bytes 0-3) or x.hi (bytes 4-7)"},
		{"SHMEM T\nPE0 | PE1 ;\nput x.lo@1 1 | wait x == 1 ;\nexists (x@1=0)\n", "f:1:1: test T: wait x == 1 on PE1: x@1 is named by half elsewhere: a 64-bit wait"},
		{"SHMEM T\nPE0 ;\nputsig x@1 1 x.hi@1 set 1 ;\nexists (x@1=0)\n", "f:1:1: test T: putsig x@1 1 x.hi@1 set 1 on PE0: x.hi@1 as a signal"},
		{"SHMEM T\n{ x@1=1; x.lo@1=2; }\nPE0 ;\nput x@1 1 ;\nexists (x@1=0)\n", "f:1:1: test T: x@1 is initialized both whole and by half"},
		{"SHMEM T\n{ nostore c; }\nPE0 ;\nput x@1 1 on c ;\nexists (x@1=0)\n", "f:1:1: test T: put x@1 1 on c on PE0: a write on NOSTORE context c"},
		{"SHMEM T\n{ nostore c; nostore c; }\nPE0 ;\nquiet ;\nexists (x@1=0)\n", "f:2:22: context c declared nostore twice"},
		{"SHMEM T\nPE0 ;\nput a,b@1 1 ;\nexists (a@1=0)\n", "f:3:5: put on PE0: 1 values for 2 words"},
		{"SHMEM T\nPE0 ;\nget r0,r1 a,b,c@1 ;\nexists (a@1=0)\n", "f:3:5: get on PE0: 2 registers for 3 words"},
		{"SHMEM T\nPE0 ;\nget r0 a,b@1 ;\nexists (a@1=0)\n", `f:3:9: extra "," after get`},
		{"SHMEM T\nPE0 ;\niput a@1 1 ;\nexists (a@1=0)\n", "f:3:6: iput on PE0 names 1 words, want 2 to 8"},
		{"SHMEM T\nPE0 ;\nput a,a@1 1,2 ;\nexists (a@1=0)\n", "f:3:5: put on PE0 names a@1 twice"},
		{"SHMEM T\nPE0 ;\npe_quiet ;\nexists (x@1=0)\n", "f:3:10: want the PEs of pe_quiet ({1,2})"},
		{"", "f:1:1: no test"},
		{"SHMEM T\nPE0 ;\nput x@1 1 ;\n", "f:4:1: want a row or the final condition"},
		{"SHMEM T\nPE0 ;\nst x 1 $ ;\n", "f:3:8: unexpected character '$'"},
		{"SHMEM T\nPE0 | PE1 | PE2 ;\nbarrier {0,1} | | ;\nexists (x@1=0)\n", "f:1:1: test T: PE1 runs 0 barrier {0,1}s, PE0 1"},
		{"SHMEM T\nPE0 | PE1 | PE2 ;\nsync {0,1} | sync {0,1} | sync {0,1} ;\nexists (x@1=0)\n", "f:1:1: test T: PE2 calls sync {0,1} but is not in the team"},
		{"SHMEM T\nPE0 ;\nbarrier {0,3} ;\nexists (x@1=0)\n", "f:1:1: test T: barrier {0,3} names PE3, which has no column"},
		{"SHMEM T\nPE0 ;\nbarrier {1,0} ;\nexists (x@1=0)\n", "f:3:9: team {1,0}: want its PEs once each"},
		{"SHMEM T\nPE0 | PE1 ;\nbroadcast 2 {0,1} | broadcast 2 {0,1} ;\nexists (x@1=0)\n", "f:3:1: broadcast on PE0: root 2 is not in the team {0,1}"},
		{"SHMEM T\nPE0 ;\nwait_any r0 x,y == 1,2,3 ;\nexists (0:r0=0)\n", "f:3:1: wait_any on PE0: 3 compare values for 2 words"},
		{"SHMEM T\nPE0 ;\ntest r0 x,y == 1 ;\nexists (0:r0=0)\n", "f:3:1: test on PE0 names 2 words, want 1"},
		{"SHMEM T\nPE0 ;\nwait_all x,x == 1 ;\nexists (x@0=0)\n", "f:3:1: wait_all on PE0 names x@0 twice"},
		{"SHMEM T\nPE0 ;\nwait_all x@1 == 1 ;\nexists (x@0=0)\n", "f:3:10: wait_all on PE0 names x@1"},
		{"SHMEM T\nPE0 ;\nget d@1 x@1 ;\nexists (x@0=0)\n", "f:3:5: get on PE0: destination d@1 is not the PE's own copy"},
		{"SHMEM T\nPE0 | PE1 ;\nget d@0 x@1 | get x@1 d@0 ;\nexists (x@0=0)\n", "f:1:1: test T: a value moves in a cycle through"},
		{"SHMEM T\nPE0 | PE0.1 ;\nbarrier | barrier ;\nexists (x@0=0)\n", "f:1:1: test T: barrier in a test with threads"},
		{"SHMEM T\nPE0 | PE1 ;\nbarrier | sync ;\nsync | barrier ;\nexists (x@0=0)\n", "f:1:1: test T: PE0 calls barrier, sync, PE1 sync, barrier: collectives they both take part in must come in one order"},
		{"SHMEM T\nPE0 | PE1 | PE2 ;\nbarrier {0,1} | barrier {1,2} | barrier {0,2} ;\nbarrier {0,2} | barrier {0,1} | barrier {1,2} ;\nexists (x@0=0)\n", "f:1:1: test T: collectives wait for each other in a cycle (barrier {0,1} #1 before barrier {0,2} #1 before barrier {1,2} #1 before barrier {0,1} #1): they deadlock"},
		{"SHMEM T\nPE0 ;\nctx_destroy ;\nexists (x@0=0)\n", "f:1:1: test T: ctx_destroy on PE0 names no context"},
		{"SHMEM T\nPE0 ;\nctx_destroy on a ;\nput x@0 1 on a ;\nexists (x@0=0)\n", "f:1:1: test T: put x@0 1 on a on PE0: context a was destroyed before"},
		{"SHMEM T\nPE0.0 ;\n", "f:2:1: bad column header \"PE0.0\""},
		{"SHMEM T\nPE0 ;\ntest r0 x == 1 on a ;\nexists (0:r0=0)\n", "f:3:16: test takes no context"},
		{"SHMEM T\nPE0 ;\nadd_nbi x@1 1 ;\nexists (x@0=0)\n", `f:3:1: unknown instruction "add_nbi"`},
	}
	for _, c := range cases {
		_, err := ParseFile("f", []byte(c.src))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("parse %q:\n got %v\nwant %s...", c.src, err, c.want)
		}
	}
}

func TestParseShape(t *testing.T) {
	tt := mustParse(t, `SHMEM Shape (* a comment *)
{ y@0=1; x@1=5 }
PE1 | PE0 ;
putsig x@0 1 s@0 add 2 | wait s >= 2 ;
cswap r1 x@1 5 6       | ;
~exists (~(1:r1=5) \/ x@1=6 /\ true)
expect bypass=Allowed strict=Forbidden
`)
	want := &Test{
		Name: "Shape",
		Init: []InitVal{{Loc{"y", 0}, 1}, {Loc{"x", 1}, 5}},
		Columns: []Column{
			{PE: 1, Instrs: []Instr{
				{Op: OpPutSig, Loc: Loc{"x", 0}, Val: 1, Sig: Loc{"s", 0}, SigOp: SigAdd, New: 2},
				{Op: OpCSwap, Reg: "r1", Loc: Loc{"x", 1}, Val: 5, New: 6},
			}},
			{PE: 0, Instrs: []Instr{{Op: OpWait, Loc: Loc{"s", 0}, Cmp: CmpGE, Val: 2}}},
		},
		Quant: NotExists,
		Cond: Prop{Kind: PropOr, Args: []Prop{
			{Kind: PropNot, Args: []Prop{{Kind: PropReg, PE: 1, Reg: "r1", Val: 5}}},
			{Kind: PropAnd, Args: []Prop{{Kind: PropMem, Loc: Loc{"x", 1}, Val: 6}, {Kind: PropTrue}}},
		}},
		ExpectStrict: Forbidden, ExpectBypass: Allowed,
	}
	if !reflect.DeepEqual(tt, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", tt, want)
	}
}

func TestRoundTripSuite(t *testing.T) {
	for _, tt := range suite(t) {
		back, err := Parse(tt.Name, []byte(tt.String()))
		if err != nil {
			t.Fatalf("%s: printed test does not parse: %v\n%s", tt.Name, err, tt)
		}
		if !reflect.DeepEqual(back, tt) {
			t.Errorf("%s: parse(print(t)) != t\n%s", tt.Name, tt)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range suite(&testing.T{}) {
		f.Add(tt.String())
	}
	f.Add("SHMEM A\n{ x@1=2; }\nPE0 ;\nfadd r0 x@1 -3 ;\nforall ((0:r0=2 /\\ x@1=-1) \\/ false)\n")
	f.Fuzz(func(t *testing.T, src string) {
		tests, err := ParseFile("fuzz", []byte(src))
		if err != nil {
			var pe *ParseError
			if !asParseError(err, &pe) || pe.Line < 1 || pe.Col < 1 {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		for _, tt := range tests {
			back, err := Parse("printed", []byte(tt.String()))
			if err != nil {
				t.Fatalf("printed test does not parse: %v\n%s", err, tt)
			}
			if !reflect.DeepEqual(back, tt) {
				t.Fatalf("parse(print(t)) != t\n%s\n%#v\n%#v", tt, tt, back)
			}
		}
	})
}

func asParseError(err error, pe **ParseError) bool {
	p, ok := err.(*ParseError)
	*pe = p
	return ok
}
