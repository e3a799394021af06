// Package mpslog reads the logs of CUDA's Multi-Process Service to find whose kernel faulted. MPS
// does not isolate a fatal GPU fault: every client of the server sees its context fail with the
// same error (CUDA_ERROR_ILLEGAL_ADDRESS), so no client can tell from its own error whether the
// fault was its own; the server's log names the client process. roxrun's verdict (tools/launch)
// and every PE's own error (shmem) read it here, with the same rules.
package mpslog

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
)

// The directories the control daemon uses where CUDA_MPS_PIPE_DIRECTORY and
// CUDA_MPS_LOG_DIRECTORY are unset (NVIDIA's MPS documentation).
const (
	DefaultPipeDir = "/tmp/nvidia-mps"
	DefaultLogDir  = "/var/log/nvidia-mps"
)

// PipeDir is the pipe directory of the MPS daemon a process with this environment would use.
func PipeDir(getenv func(string) string) string {
	if d := getenv("CUDA_MPS_PIPE_DIRECTORY"); d != "" {
		return d
	}
	return DefaultPipeDir
}

// LogDir is the log directory of the MPS daemon a process with this environment would use.
func LogDir(getenv func(string) string) string {
	if d := getenv("CUDA_MPS_LOG_DIRECTORY"); d != "" {
		return d
	}
	return DefaultLogDir
}

// Running reports whether an MPS daemon serves processes with this environment: its pipe
// directory has the daemon's control pipe.
func Running(getenv func(string) string) bool {
	_, err := os.Stat(filepath.Join(PipeDir(getenv), "control"))
	return err == nil
}

// Files are the logs a control daemon writes in its log directory: the server's, which records
// what happens to its clients, and the control daemon's.
var Files = []string{"server.log", "control.log"}

// Logs is an MPS log directory and how much of each log was there when it was opened: what
// follows is the reader's (a job's, a PE's) own time.
type Logs struct {
	dir   string
	start map[string]int64
}

// Since opens dir's logs from their present ends; nil for an empty dir.
func Since(dir string) *Logs {
	if dir == "" {
		return nil
	}
	l := &Logs{dir: dir, start: map[string]int64{}}
	for _, f := range Files {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
			l.start[f] = st.Size()
		}
	}
	return l
}

// Dir is the log directory.
func (l *Logs) Dir() string { return l.dir }

// Lines returns the lines the logs gained since Since, each prefixed with its file's name
// ("server.log: [...] Client {PID: 480, Context: 1} encountered a fatal GPU error.").
func (l *Logs) Lines() []string {
	var out []string
	for _, f := range Files {
		b, err := os.ReadFile(filepath.Join(l.dir, f))
		if err != nil {
			continue
		}
		if off := l.start[f]; off <= int64(len(b)) {
			b = b[off:]
		}
		for _, s := range strings.Split(string(b), "\n") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, f+": "+s)
			}
		}
	}
	return out
}

// FaultingClient is FaultingClient of the lines the logs gained.
func (l *Logs) FaultingClient(pids map[int]int) (rank int, line string, ok bool) {
	return FaultingClient(l.Lines(), pids)
}

// faultWords mark a line about a fatal GPU fault.
var faultWords = []string{"fatal", "exception", "fault", "illegal", "xid"}

// FaultingClient returns the rank (pids maps a process ID to it) of the one process that lines
// name on a line about a fatal fault, and that line; ok is false when none is so named, or when
// lines name several (a line naming several says nothing of which faulted). A line's
// "[date time Server pid]" header is no client: CUDA 13's server writes
// "[2026-12-02 05:33:34.930 Server   471] Client {PID: 480, Context: 1} encountered a fatal GPU error.",
// and a small container PID could equal a field of the date.
func FaultingClient(lines []string, pids map[int]int) (rank int, line string, ok bool) {
	rank = -1
	for _, s := range lines {
		low := strings.ToLower(s)
		fault := false
		for _, w := range faultWords {
			fault = fault || strings.Contains(low, w)
		}
		if !fault {
			continue
		}
		named := -1
		for _, pid := range namedPIDs(s) {
			if r, isClient := pids[pid]; isClient {
				if named >= 0 && named != r {
					named = -2
					break
				}
				named = r
			}
		}
		switch {
		case named < 0:
		case rank >= 0 && rank != named:
			return -1, "", false
		case rank < 0:
			rank, line = named, s
		}
	}
	return rank, line, rank >= 0
}

// namedPIDs returns the process IDs a log line names: the numbers after "PID" where it says so,
// else every number past the line's header.
func namedPIDs(s string) []int {
	if i := strings.Index(s, "["); i >= 0 && i < 24 { // "server.log: [header] text"
		if j := strings.Index(s[i:], "]"); j >= 0 {
			s = s[i+j+1:]
		}
	}
	var out []int
	low := strings.ToLower(s)
	for rest := low; ; {
		i := strings.Index(rest, "pid")
		if i < 0 {
			break
		}
		rest = strings.TrimLeft(rest[i+3:], ": =\t")
		end := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsDigit(r) })
		if end < 0 {
			end = len(rest)
		}
		if n, err := strconv.Atoi(rest[:end]); err == nil {
			out = append(out, n)
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}
