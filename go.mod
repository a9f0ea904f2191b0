module github.com/bitdecode/bitdecode

go 1.26.0

require (
	github.com/dlclark/regexp2 v1.12.0
	github.com/ebitengine/purego v0.11.3
	golang.org/x/sys v0.50.0
)
