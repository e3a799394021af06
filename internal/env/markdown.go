package env

import (
	"fmt"
	"strings"
)

// Markdown is the knobs table of the README: name, type, default, meaning; a test holds the
// README to it, so the table is never stale.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| knob | type | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, k := range All() {
		typ := k.Type
		if len(k.Choices) > 0 {
			typ = strings.Join(k.Choices, " \\| ")
		}
		def := "`" + k.Default + "`"
		if k.Default == "" {
			def = "unset"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Name, typ, def, strings.ReplaceAll(k.Doc, "|", "\\|"))
	}
	return b.String()
}
