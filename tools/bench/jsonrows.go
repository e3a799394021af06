package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// The benchmarks' rows are JSON objects, one a line, among other output (a launcher's notes, a
// program's log): one reader serves the collectives' anchors, the rails runs and the GPU
// benchmark's PEs.

// parseJSONRows reads the rows of r, keeping those keep accepts and skipping the lines that are
// not rows.
func parseJSONRows[R any](r io.Reader, keep func(*R) bool) ([]R, error) {
	var rows []R
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var row R
		if json.Unmarshal(line, &row) == nil && keep(&row) {
			rows = append(rows, row)
		}
	}
	return rows, sc.Err()
}

// readJSONRows reads the rows of file; a file with none is an error saying what a row has (want).
func readJSONRows[R any](file string, keep func(*R) bool, want string) ([]R, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := parseJSONRows(f, keep)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no %s", file, want)
	}
	return rows, nil
}
