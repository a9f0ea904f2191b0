module github.com/bitdecode/bitdecode

go 1.26

require (
	github.com/dlclark/regexp2 v1.12.0 // indirect
	github.com/ebitengine/purego v0.11.3 // indirect
)
