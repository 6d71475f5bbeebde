// Wrapper module: jsonnet-bundler (jb) at an exact version. The Go module proxy answers 403
// for this module's version list, which `go install ...@v0.6.0` asks for; a module that
// requires the version and builds the command does not need the list.
module fioprobe.local/tools/jsonnet-bundler

go 1.26.0

require github.com/jsonnet-bundler/jsonnet-bundler v0.6.0

require (
	github.com/alecthomas/template v0.0.0-20190718012654-fb15b899a751 // indirect
	github.com/alecthomas/units v0.0.0-20211218093645-b94a6e3cc137 // indirect
	github.com/elliotchance/orderedmap/v2 v2.2.0 // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/sys v0.0.0-20220615213510-4f61da869c0c // indirect
	gopkg.in/alecthomas/kingpin.v2 v2.2.6 // indirect
)
