//go:build wasip1

package plugin

// adapterArena is where the WASI preview 1 adapter of a componentized
// plugin keeps its state and stack. `host componentize` finds it by its
// first bytes and gives the adapter an allocator over the rest
// (host/src/cli/adapter_arena.rs): the adapter cannot call into Go for
// memory while Go's runtime starts, and pages it grew itself would be
// handed out again by Go's heap, which assumes it alone grows memory.
// Static data is memory Go never allocates from. The size (3 pages) and
// the marker are the host's constants.
var adapterArena = [3 * 65536]byte{
	'o', 'p', 'e', 'r', 'a', 't', 'o', 'r', '-', 'h', 'o', 's', 't', ' ',
	'w', 'a', 's', 'i', ' ', 'a', 'd', 'a', 'p', 't', 'e', 'r', ' ',
	'a', 'r', 'e', 'n', 'a', ' ', 'v', '1', 0,
}

// The linker keeps only what code reads.
func init() {
	if adapterArena[0] != 'o' {
		panic("the WASI adapter's arena was overwritten")
	}
}
