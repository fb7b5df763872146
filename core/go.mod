module encmatch/core

go 1.26.8

require (
	github.com/tuneinsight/lattigo/v6 v6.2.0
	golang.org/x/sys v0.38.0
)

require (
	github.com/ALTree/bigfloat v0.2.0 // indirect
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.10.0 // indirect
	golang.org/x/crypto v0.45.0 // indirect
	golang.org/x/exp v0.0.0-20250506013437-ce4c2cf36ca6 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
replace github.com/tuneinsight/lattigo/v6 v6.2.0 => ./build/lattigo
