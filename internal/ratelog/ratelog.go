// Package ratelog limits how many lines a flood of one kind of event (connections refused by the
// rendezvous or a transport: a port scan, a misdirected job) writes: the first few at once, then
// one summary a period, so that 3000 refusals cost a handful of lines and none is lost from the
// count.
package ratelog

import (
	"fmt"
	"sync"
	"time"
)

// Limiter passes the first Burst lines of each period to Logf and counts the rest; the count,
// with the last line it stood for, is written once the period ends.
type Limiter struct {
	Logf   func(format string, args ...any)
	Burst  int           // lines passed at once per period; default 5
	Period time.Duration // default 1s

	mu         sync.Mutex
	start      time.Time // of the current period
	passed     int       // lines passed in it
	suppressed int       // lines counted, not written, in it
	last       string    // the last of those
	timer      *time.Timer
}

// Printf writes the line, or counts it once this period's burst is spent.
func (l *Limiter) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	burst, period := l.Burst, l.Period
	if burst <= 0 {
		burst = 5
	}
	if period <= 0 {
		period = time.Second
	}
	now := time.Now()
	if l.start.IsZero() || now.Sub(l.start) >= period {
		l.start, l.passed = now, 0
	}
	if l.passed < burst {
		l.passed++
		l.mu.Unlock()
		l.Logf("%s", line)
		return
	}
	l.suppressed++
	l.last = line
	if l.timer == nil {
		l.timer = time.AfterFunc(period-now.Sub(l.start), l.summarize)
	}
	l.mu.Unlock()
}

// summarize writes the period's count of lines it held back.
func (l *Limiter) summarize() {
	l.mu.Lock()
	n, last := l.suppressed, l.last
	l.suppressed, l.last, l.timer = 0, "", nil
	l.start, l.passed = time.Now(), 1 // the summary is this period's first line
	l.mu.Unlock()
	if n > 0 {
		l.Logf("%d more like this in the last period, the latest: %s", n, last)
	}
}

// Flush writes the summary of lines held back now (at shutdown), instead of when the period ends.
func (l *Limiter) Flush() {
	l.mu.Lock()
	t := l.timer
	l.mu.Unlock()
	if t != nil && t.Stop() {
		l.summarize()
	}
}
