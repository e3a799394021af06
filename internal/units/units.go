// Package units writes counts as messages read them: "1 element", "3 elements".
package units

import "fmt"

// Count writes n and the noun, in the plural unless n is 1 or -1.
func Count(n int, singular string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, singular)
	}
	return fmt.Sprintf("%d %s", n, plural(singular))
}

func plural(s string) string {
	switch {
	case len(s) > 1 && s[len(s)-1] == 'y' && !isVowel(s[len(s)-2]):
		return s[:len(s)-1] + "ies"
	case len(s) > 0 && (s[len(s)-1] == 's' || s[len(s)-1] == 'x'):
		return s + "es"
	}
	return s + "s"
}

func isVowel(c byte) bool { return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' }
