module github.com/roxamen/roxamen

go 1.26.0

require (
	github.com/ebitengine/purego v0.11.3
	github.com/google/go-cmp v0.7.0
	golang.org/x/sys v0.50.0
	gonum.org/v1/gonum v0.17.0
)
