package ratelog

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A flood of 3000 lines writes the burst and a summary whose count, with the burst, is every line.
func TestFloodIsSummarized(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	l := &Limiter{Burst: 5, Period: 50 * time.Millisecond, Logf: func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
	}}
	for i := 0; i < 3000; i++ {
		l.Printf("refused connection %d", i)
	}
	l.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(lines) > 20 {
		t.Fatalf("%d lines for 3000 refusals; want the burst and a few summaries", len(lines))
	}
	total := 0
	for _, s := range lines {
		var n int
		if _, err := fmt.Sscanf(s, "%d more like this", &n); err == nil {
			total += n
			if !strings.Contains(s, "the latest: refused connection") {
				t.Errorf("summary %q does not quote the latest line", s)
			}
		} else {
			total++
		}
	}
	if total != 3000 {
		t.Errorf("the lines account for %d refusals, want 3000:\n%s", total, strings.Join(lines, "\n"))
	}
	if lines[0] != "refused connection 0" {
		t.Errorf("first line %q: the first refusals are written as they are", lines[0])
	}
}

// Once the period has passed, lines are written at once again, and the held-back count is
// written by itself when the period ends.
func TestSummaryAtPeriodEnd(t *testing.T) {
	got := make(chan string, 100)
	l := &Limiter{Burst: 1, Period: 30 * time.Millisecond, Logf: func(f string, a ...any) { got <- fmt.Sprintf(f, a...) }}
	l.Printf("a")
	l.Printf("b")
	l.Printf("c")
	if s := <-got; s != "a" {
		t.Fatalf("first line %q", s)
	}
	select {
	case s := <-got:
		if !strings.HasPrefix(s, "2 more like this") || !strings.HasSuffix(s, "the latest: c") {
			t.Fatalf("summary %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no summary after the period")
	}
}
