package launch

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// oomWatch tells a SIGKILL by the kernel's out-of-memory killer from any other: it reads the
// oom_kill counter of roxrun's memory cgroup (which its PEs inherit) when the job starts and when a
// PE is killed. cgroup v2 keeps it in memory.events, v1 in memory.oom_control.
type oomWatch struct {
	mu   sync.Mutex
	file string // "" when no counter is readable
	seen uint64
}

func newOOMWatch() *oomWatch {
	w := &oomWatch{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return w
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "memory.events")
			if _, err := os.Stat(file); err != nil {
				file = filepath.Join("/sys/fs/cgroup/unified", parts[2], "memory.events")
			}
		case strings.Contains(","+parts[1]+",", ",memory,"):
			file = filepath.Join("/sys/fs/cgroup/memory", parts[2], "memory.oom_control")
		default:
			continue
		}
		if n, ok := readOOMKills(file); ok {
			w.file, w.seen = file, n
			// v1's memory line is the one that counts when both are present.
			if strings.HasSuffix(file, "memory.oom_control") {
				break
			}
		}
	}
	return w
}

// check returns why a SIGKILL just seen was the OOM killer's, or "" when the counter did not move.
func (w *oomWatch) check() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file == "" {
		return ""
	}
	n, ok := readOOMKills(w.file)
	if !ok || n <= w.seen {
		return ""
	}
	why := fmt.Sprintf("out of memory: the kernel's OOM killer, oom_kill %d -> %d in %s", w.seen, n, w.file)
	w.seen = n
	return why
}

func readOOMKills(file string) (uint64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == "oom_kill" {
			n, err := strconv.ParseUint(f[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
